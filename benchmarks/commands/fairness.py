"""`python -m benchmarks fairness`: one tenant's latency while another floods the API, with a stand-in model
(benchmarks/fairness.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from service.cli.common import console, fail, write_json_report

#: Where the result goes unless --json-out says otherwise.
DEFAULT_REPORT = Path("results/fairness_standin.json")


def eval_fairness(
    model: Annotated[
        str, typer.Option(help="The model: only 'standin' (an endpoint served here).")
    ] = "standin",
    checkout: Annotated[
        Path | None, typer.Option(help="The checkout whose `rag serve` is measured (default: this one).")
    ] = None,
    hold_s: Annotated[float, typer.Option(min=0.0, max=10.0, help="Seconds each model call holds.")] = 0.5,
    questions: Annotated[int, typer.Option(min=1, max=100, help="bravo's questions per phase.")] = 8,
    clients: Annotated[int, typer.Option(min=1, max=100, help="alpha's concurrent clients.")] = 20,
    json_out: Annotated[Path, typer.Option(help="JSON report written here.")] = DEFAULT_REPORT,
    configuration: Annotated[
        list[str] | None,
        typer.Option(
            help="Model gates to measure (repeatable): endpoint, one_model_place, two_model_places."
        ),
    ] = None,
) -> None:
    """bravo's median latency while alpha floods / alone (target <= 1.5x), and whether alpha got every
    answer; with no model gate (an endpoint) and with one model place (the embedded model's gate)."""
    from benchmarks.fairness import CONFIGURATIONS, REPO_ROOT, run_fairness

    if model != "standin":
        fail(f"--model {model!r}: only 'standin' is supported (a CPU-free endpoint served by the benchmark)")
    root = (checkout or REPO_ROOT).resolve()
    if not (root / "service" / "api" / "app.py").is_file():
        fail(f"--checkout {root}: not a checkout of this project (no service/api/app.py)")
    unknown = sorted(set(configuration or ()) - set(CONFIGURATIONS))
    if unknown:
        fail(f"--configuration {', '.join(unknown)}: choose among {', '.join(CONFIGURATIONS)}")
    chosen = {name: CONFIGURATIONS[name] for name in configuration} if configuration else None
    report = run_fairness(root, hold_s=hold_s, questions=questions, clients=clients, configurations=chosen)
    write_json_report(json_out, report)
    table = Table(title=f"fairness ({report['machine']})")
    for column in ("configuration", "bravo alone p50 s", "flooded p50 s", "ratio", "alpha answered"):
        table.add_column(column)
    for row in report["results"]:
        if "skipped" in row:
            table.add_row(row["configuration"], row["skipped"], "", "", "")
            continue
        table.add_row(
            row["configuration"],
            f"{row['bravo_alone_p50_s']:.2f}",
            f"{row['bravo_flooded_p50_s']:.2f}",
            f"{row['ratio_p50']:.2f}",
            f"{row['alpha_answered']}/{row['alpha_asked']}",
        )
    console.print(table)
