"""`python -m benchmarks followups`: follow-up questions made standalone (before / after reading the previous
answer, and
with --model the contextualize node), scored on referents named and keyword retrieval
(benchmarks/followups.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from service.cli.common import (
    JsonReportOption,
    console,
    fail,
    settings_or_exit,
    user_errors,
    write_json_report,
)


def eval_followups(
    fixture: Annotated[
        Path | None, typer.Option(help="Conversations (JSONL; default benchmarks/fixtures/followups.jsonl).")
    ] = None,
    model: Annotated[
        bool,
        typer.Option("--model", help="Also rewrite with the contextualize node and the configured model."),
    ] = False,
    json_out: JsonReportOption = None,
) -> None:
    """Referent named (resolved) and hit@1 / hit@3 of the follow-up's passage, per split (dev / test)."""
    from benchmarks.followups import (
        DEFAULT_FIXTURE,
        load_conversations,
        run_followups_eval,
        run_followups_with_model,
    )
    from evals.environment import machine_description

    path = fixture or DEFAULT_FIXTURE
    if not path.is_file():
        fail(f"no conversations file at {path}")
    try:
        conversations = load_conversations(path)
    except ValueError as error:
        fail(str(error))
    settings = settings_or_exit()
    with user_errors():
        if model:
            report = run_followups_with_model(conversations, settings)
        else:
            report = run_followups_eval(conversations, title_weight=settings.bm25_title_weight)
    report = {**report, "fixture": str(path), "machine": machine_description()}
    write_json_report(json_out, report)
    print_followups_report(report)


def print_followups_report(report: dict[str, Any]) -> None:
    """One table: per split, each rewrite's resolved / hit@1 / hit@3."""
    table = Table(
        title=f"follow-up rewrites ({report['conversations']} conversations, {report['passages']} passages)"
    )
    for column in ("split", "rewrite", "n", "resolved", "hit@1", "hit@3"):
        table.add_column(column, justify="right" if column not in ("split", "rewrite") else "left")
    for split, entry in report["splits"].items():
        for name in report["rewriters"]:
            row = entry[name]
            table.add_row(
                split, name, str(row["n"]), str(row["resolved"]), str(row["hit@1"]), str(row["hit@3"])
            )
    console.print(table)
    if "model" in report:
        console.print(f"model: {report['model']['name']} (strength {report['model']['strength']})")
