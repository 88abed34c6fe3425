"""`python -m benchmarks chaos`: attack the engine as a hostile tenant would and count the harm
(benchmarks/chaos), then print the figures and every failed probe."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import JsonReportOption, console, error_console, fail, user_errors, write_json_report


def eval_chaos(
    json_out: JsonReportOption = None,
    suite: Annotated[
        list[str] | None,
        typer.Option(
            help="Suites to run (repeatable): tenants, turns, injection, hostile, ingest, api, storage, "
            "bounds, sharing, seeds, fairness. Default all."
        ),
    ] = None,
    code_root: Annotated[
        Path | None,
        typer.Option(
            help="Attack another checkout of the engine (for before/after figures). Default: this one."
        ),
    ] = None,
) -> None:
    """Attack the engine as a hostile tenant would and count harm: tenant leaks (CLI and REST API), lost or
    mixed turns, obeyed injections and suppressed answers, stack traces, hangs, wrong exit codes and statuses,
    oversize bodies accepted, checkpoint bytes per turn at turns 10 and 100, peak memory on hostile files.
    Real models, temp data; the last line is 'N passed, M failed'."""
    from benchmarks.chaos import REPO_ROOT, SUITES, run_chaos

    unknown = [name for name in suite or () if name not in SUITES]
    if unknown:
        fail(f"unknown chaos suite(s) {', '.join(unknown)}; choose among {', '.join(SUITES)}")
    with user_errors():
        report = run_chaos(
            code_root=code_root or REPO_ROOT,
            suites=suite or list(SUITES),
            progress=lambda line: error_console.print(escape(line), highlight=False),
        )
    write_json_report(json_out, report)
    _print_chaos_figures(report)
    for probe in report["probes"]:
        if not probe["passed"]:
            console.print(
                f"FAIL {probe['suite']}/{probe['name']}: {probe['detail']}", highlight=False, markup=False
            )
    console.print(f"{report['passed']} passed, {report['failed']} failed", highlight=False)


def _print_chaos_figures(report: dict[str, Any]) -> None:
    """The chaos report's figures as one table: the harm counts, the checkpoint growth per turn and the peak
    memory on hostile files (the rows whose figure the run measured)."""
    table = Table(title=f"chaos ({report['machine']}, {report['seconds']} s)")
    table.add_column("figure")
    table.add_column("count", justify="right")
    for name, value in report["figures"].items():
        table.add_row(name, f"{value:g}")
    if report["bytes_per_turn"] is not None:
        table.add_row(
            "bytes per turn (10 turns)",
            f"{report['bytes_per_turn']:.0f} (target <= {report['bytes_per_turn_target']})",
        )
        table.add_row("checkpoints per turn (10 turns)", f"{report['checkpoints_per_turn']:.1f}")
    if report.get("bytes_per_turn_at_100") is not None:
        table.add_row(
            "bytes per turn at turn 100",
            f"{report['bytes_per_turn_at_100']:.0f} (target <= {report['bytes_per_turn_at_100_target']})",
        )
        table.add_row(
            "bytes added by turn 20 / turn 100",
            f"{report['bytes_added_turn_20']:.0f} / {report['bytes_added_turn_100']:.0f}",
        )
    if report.get("hostile_peak_rss_bytes") is not None:
        table.add_row("peak RSS on hostile inputs", f"{report['hostile_peak_rss_bytes'] / 1024**2:.0f} MiB")
    console.print(table)
