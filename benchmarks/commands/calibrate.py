"""`python -m benchmarks calibrate`: the answer-confidence threshold chosen on development QA records and
checked on test
ones (the rule and the metrics: benchmarks/calibration.py).

Typical use, on data/squad/squad2_dev_mixed400.json.gz: `rag eval qa --split dev` and `--split test` with the
confidence decline disabled (RAG_ANSWER_CONFIDENCE_THRESHOLD=-1000), then this command on their JSONL records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.table import Table

from config.settings import LocalModelName
from evals.environment import DEFAULT_RESULTS_DIR
from service.cli.common import console, fail, settings_or_exit, user_errors, warning, write_json_report

#: Where the calibration report is written by default.
DEFAULT_CALIBRATION_RESULTS = DEFAULT_RESULTS_DIR / "calibration.json"
#: The question file of `reader-confidence`: SQuAD 2.0 development questions, answerable and not.
DEFAULT_READER_DATASET = Path("data/squad/squad2_dev_mixed400.json.gz")
#: Columns of the per-split table: (heading, key of the outcome at the chosen threshold).
OUTCOME_COLUMNS = (
    ("answerable acc.", "answerable_accuracy"),
    ("answerable declined", "answerable_declined"),
    ("unanswerable declined", "unanswerable_declined"),
    ("declines with gold", "declines_with_gold"),
    ("wrong shown", "wrong_shown"),
    ("correct withheld", "correct_withheld"),
    ("cost", "cost"),
)


def read_record_files(paths: list[Path]) -> list[dict[str, Any]]:
    """The latest record of each question over `paths` (a later file's record replaces an earlier one)."""
    from evals.qa import read_records

    records: dict[str, dict[str, Any]] = {}
    for path in paths:
        if not path.is_file():
            fail(f"records file not found: {path}")
        records.update(read_records(path))
    return list(records.values())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _print_report(report: dict[str, Any]) -> None:
    """The per-split table, the targets, the rule and the setting to use."""
    table = Table(title=f"answer confidence at threshold {report['threshold']:.4f}")
    for column in (
        "split",
        "used / records",
        "skipped",
        "AUROC",
        *(heading for heading, _ in OUTCOME_COLUMNS),
    ):
        table.add_column(column, justify="right")
    for split in ("dev", "test"):
        summary = report[split]
        if not summary:
            continue
        skipped = ", ".join(f"{name} {count}" for name, count in summary["skipped"].items() if count) or "0"
        table.add_row(
            split,
            f"{summary['used']} / {summary['records']}",
            skipped,
            _cell(summary["auroc"]),
            *(_cell(summary["at_threshold"][key]) for _heading, key in OUTCOME_COLUMNS),
        )
    console.print(table)
    measured_on = "test" if report["test"] else "dev"
    targets = Table(title=f"targets, measured on {report['targets_measured_on']}")
    for column in ("metric", "target", "value", "met"):
        targets.add_column(column)
    for check in report[measured_on]["targets"]:
        met = {True: "[green]met[/]", False: "[red]not met[/]", None: "n/a"}[check["met"]]
        targets.add_row(
            check["metric"], f"{check['comparison']} {check['bound']}", _cell(check["value"]), met
        )
    console.print(targets)
    console.print(f"[dim]rule: {report['rule']}[/]", highlight=False)
    console.print(report["setting"], highlight=False, soft_wrap=True)


def _warn_about_inputs(report: dict[str, Any]) -> None:
    """Warnings for records that make the calibration doubtful: off-split questions, mixed models."""
    for split in ("dev", "test"):
        summary = report[split]
        if summary and summary["split_mismatch"]:
            warning(f"{summary['split_mismatch']} {split} records belong to the other half (split_of)")
    if report["test"] and report["dev"]["models"] != report["test"]["models"]:
        warning(f"dev records name models {report['dev']['models']}, test records {report['test']['models']}")


def eval_calibrate(
    dev: Annotated[
        list[Path],
        typer.Option(
            help="Per-question QA JSONL (rag eval qa --results) of a development run made with the "
            "confidence decline disabled (repeatable). The threshold is chosen on these only."
        ),
    ],
    test: Annotated[
        list[Path] | None,
        typer.Option(help="Per-question QA JSONL of test runs (repeatable): the chosen threshold replayed."),
    ] = None,
    json_out: Annotated[
        Path, typer.Option("--json", help="Write the calibration report as JSON here.")
    ] = DEFAULT_CALIBRATION_RESULTS,
    plot: Annotated[Path | None, typer.Option(help="Write the trade-off and ROC plot (PNG) here.")] = None,
) -> None:
    """Choose RAG_ANSWER_CONFIDENCE_THRESHOLD on development QA records (least 2 x wrong shown + 1 x correct
    withheld) and report AUROC, the trade-off and the targets on the test records."""
    from benchmarks.calibration import calibrate
    from benchmarks.plots import plot_calibration

    dev_records = read_record_files(dev)
    test_records = read_record_files(test or [])
    if not dev_records:
        fail("the development records files hold no record")
    with user_errors():
        report = calibrate(dev_records, test_records)
    write_json_report(json_out, report)
    _warn_about_inputs(report)
    _print_report(report)
    console.print(f"[dim]written to {json_out}[/]")
    if plot:
        console.print(f"plot: {plot_calibration(report, plot)}")


def eval_reader_confidence(
    model: Annotated[
        str, typer.Option(help="Catalog model that reads (models/local_catalog.py).")
    ] = "qwen2.5-coder-0.5b",
    split: Annotated[
        str, typer.Option(help="Half of the question file: dev or test (evals/splits.py).")
    ] = "dev",
    dataset: Annotated[
        Path, typer.Option(help="SQuAD-format file with answerable and unanswerable questions.")
    ] = DEFAULT_READER_DATASET,
    limit: Annotated[int, typer.Option(min=1, help="At most this many questions of the half.")] = 400,
    records: Annotated[
        Path | None,
        typer.Option(help="Per-question JSONL (default results/runs/reader-confidence-MODEL-SPLIT.jsonl)."),
    ] = None,
) -> None:
    """Read each question over its gold paragraph only, with the engine's focused-read prompt, and record the
    reply's mean token log-probability: the records `calibrate` takes as --dev / --test."""
    from benchmarks.bench_server import BenchServer
    from benchmarks.reader_confidence import run_reader_confidence
    from evals.datasets import load_squad
    from evals.splits import SPLITS, examples_in_split
    from models.local_catalog import LOCAL_MODEL_NAMES

    if model not in LOCAL_MODEL_NAMES:
        fail(f"unknown model {model!r}; choose among {', '.join(LOCAL_MODEL_NAMES)}")
    if split not in SPLITS:
        fail(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    if not dataset.is_file():
        fail(f"question file not found: {dataset}")
    name = cast(LocalModelName, model)  # checked above
    settings = settings_or_exit()
    path = records or DEFAULT_RESULTS_DIR / "runs" / f"reader-confidence-{model}-{split}.jsonl"
    with user_errors():
        examples = examples_in_split(load_squad(dataset), split)[:limit]
        with BenchServer(name, settings) as bench:
            rows = run_reader_confidence(name, bench, examples, path, console.print)
    console.print(f"{len(rows)} records written to {path}")
