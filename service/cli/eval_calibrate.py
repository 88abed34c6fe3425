"""`rag eval calibrate`: fit a reader's answer calibrator on `rag eval qa` results and report it on others."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import JsonReportOption, fail, user_errors, write_json_report

#: What an artifact name may be (it becomes a file name in answering/calibrators/).
CALIBRATOR_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"

CalibratorNameOption = Annotated[
    str,
    typer.Option(
        help="Calibrator name: the artifact answering/calibrators/NAME.json (an embedded reader such as "
        "qwen2.5-coder-0.5b, or 'default' for endpoints without their own calibrator)."
    ),
]
DevResultsOption = Annotated[
    list[Path] | None,
    typer.Option(
        help="Development results file of `rag eval qa` (JSONL with signals; repeatable): the fit's records."
    ),
]
ServedModelsOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Model identity substring the calibrator serves (repeatable). Default: NAME; none for 'default'."
    ),
]
ExcludeFeaturesOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Signal group to leave out (repeatable; answering.signals.SIGNAL_GROUPS). The default "
        "artifact is fit with --exclude-features log_probability (other endpoints may give none)."
    ),
]


def eval_calibrate(
    model: CalibratorNameOption,
    dev: DevResultsOption = None,
    test: Annotated[
        list[Path] | None, typer.Option(help="Test results file (repeatable): reported, never fit on.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Artifact to write (or, with --report-only, read). Default: the committed one."),
    ] = None,
    models: ServedModelsOption = None,
    exclude_features: ExcludeFeaturesOption = None,
    json_out: JsonReportOption = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="Write per set risk_coverage_<set>.png (one line per results file) and "
            "reliability_<set>.png into DIR."
        ),
    ] = None,
    ablation: Annotated[
        bool,
        typer.Option(
            "--ablation",
            help="Also refit without each signal group and with each alone (out-of-fold AUROC and cost).",
        ),
    ] = False,
    report_only: Annotated[
        bool, typer.Option("--report-only", help="Evaluate the committed calibrator of --model; fit nothing.")
    ] = False,
) -> None:
    """Fit a reader's calibrator (logistic regression over the answer signals, isotonic map, band thresholds
    by a stated cost rule) on --dev results and report AUROC, ECE, bands and cost on --test."""
    from answering.calibrator import CALIBRATOR_DIR, DEFAULT_CALIBRATOR
    from evals.calibration_report import run_calibration
    from service.cli.calibrate_report import print_calibration_report
    from service.cli.common import command_line

    excluded = exclude_features or []
    _check_calibrate_options(model, dev=dev, test=test, excluded=excluded, report_only=report_only)
    with user_errors():
        report = run_calibration(
            name=model,
            dev=dev or [],
            test=test or [],
            out=out or CALIBRATOR_DIR / f"{model}.json",
            models=models if models is not None else ([] if model == DEFAULT_CALIBRATOR else [model]),
            exclude=excluded,
            report_only=report_only,
            plot=plot,
            with_ablation=ablation,
            command=command_line(),
        )
    write_json_report(json_out, report)
    print_calibration_report(report)


def _check_calibrate_options(
    model: str, *, dev: list[Path] | None, test: list[Path] | None, excluded: list[str], report_only: bool
) -> None:
    """Exit on options that cannot go together; warn on a default calibrator fit on log-probabilities."""
    import re

    from answering.calibrator import DEFAULT_CALIBRATOR
    from service.cli.common import warning

    if not re.fullmatch(CALIBRATOR_NAME, model):
        fail(f"--model {model!r}: a calibrator name is letters, digits, '.', '_' and '-'")
    if report_only and not (dev or test):
        fail("--report-only evaluates the committed calibrator: give --test (or --dev) results files")
    if not report_only and not dev:
        fail(
            "give at least one --dev results file to fit on (or --report-only to evaluate the committed one)"
        )
    if model == DEFAULT_CALIBRATOR and not report_only and "log_probability" not in excluded:
        warning(
            "the default calibrator serves endpoints that may give no log-probabilities: fit it with "
            "--exclude-features log_probability"
        )
