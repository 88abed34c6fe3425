"""`rag eval calibrate` end to end: fit (evals/calibration_fit.py) or read a reader's calibrator, then report
it on development and test QA records per set (AUROC, ECE, bands, cost, the shares a user feels), with an
optional ablation of the signal groups and optional risk-coverage and reliability plots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from answering.calibrator import Calibrator
from answering.decision import band_of
from answering.signals import SIGNAL_GROUPS
from evals.calibration_fit import CostRule, cross_validate, fit_calibrator, write_artifact
from evals.calibration_records import (
    LABEL_FIELD,
    CalibrationInputError,
    Record,
    RunFile,
    check_record,
    features_without,
    is_finite_number,
    load_run,
    record_place,
    set_of,
)
from evals.metrics import (
    auroc,
    band_counts,
    calibration_totals,
    expected_calibration_error,
    risk_coverage,
    rounded,
    share,
)
from state.answer_record import BANDS, Band

#: Plot files written per set by `--plot DIR`.
RISK_COVERAGE_PLOT = "risk_coverage_{set}.png"
RELIABILITY_PLOT = "reliability_{set}.png"


def band_figures(
    records: Sequence[Record], probabilities: Sequence[float], bands: Sequence[Band], cost: CostRule
) -> dict[str, Any]:
    """The figures of one set of records given each one's probability and band."""
    right = [bool(record[LABEL_FIELD]) for record in records]
    answerable = [bool(record.get("answerable", True)) for record in records]
    per_band = band_counts(bands, right, [not has for has in answerable], BANDS)
    shown = [band in ("confident", "tentative") for band in bands]
    total_cost = sum(cost.cost(band, ok) for band, ok in zip(bands, right, strict=True))
    labels = [float(ok) for ok in right]
    return {
        "n": len(records),
        "auroc": rounded(auroc(list(probabilities), labels)),
        "ece": rounded(expected_calibration_error(list(probabilities), labels)),
        "bands": per_band,
        "cost_per_question": rounded(total_cost / len(records)) if records else None,
        "confident_right_share": share(per_band["confident"]["right"], per_band["confident"]["n"]),
        "not_found_candidate_right_share": share(per_band["not_found"]["right"], per_band["not_found"]["n"]),
        "unanswerable_confident_share": share(per_band["confident"]["unanswerable"], answerable.count(False)),
        "right_reaches_user_share": share(
            sum(1 for ok, has, seen in zip(right, answerable, shown, strict=True) if ok and has and seen),
            answerable.count(True),
        ),
    }


def _stored(records: Sequence[Record]) -> tuple[list[float], list[Band]] | None:
    """The engine's own confidence and band of every record, or None when any record lacks them."""
    if not all(
        is_finite_number(record.get("confidence")) and record.get("band") in BANDS for record in records
    ):
        return None
    return [float(record["confidence"]) for record in records], [record["band"] for record in records]


def _evaluate_group(calibrator: Calibrator, records: Sequence[Record], cost: CostRule) -> dict[str, Any]:
    probabilities = [calibrator.probability(dict(record["signals"])) for record in records]
    bands = [band_of(probability, calibrator.thresholds) for probability in probabilities]
    figures = band_figures(records, probabilities, bands, cost)
    stored = _stored(records)
    figures["engine"] = None if stored is None else band_figures(records, stored[0], stored[1], cost)
    return figures


def evaluate(
    calibrator: Calibrator, records: Sequence[Record], cost: CostRule | None = None
) -> dict[str, Any]:
    """The calibrator's figures on `records`, all together and per set, from each record's `signals`; the
    engine's stored `confidence` / `band` figures beside them under "engine" when every record has them."""
    cost = cost or CostRule()
    by_set: dict[str, list[Record]] = {}
    for record in records:
        check_record(record, calibrator.features, record_place(record))
        by_set.setdefault(set_of(record), []).append(record)
    return {
        "all": _evaluate_group(calibrator, records, cost),
        "by_set": {name: _evaluate_group(calibrator, group, cost) for name, group in sorted(by_set.items())},
    }


def ablation(
    records: Sequence[Record],
    groups: Mapping[str, Sequence[str]] = SIGNAL_GROUPS,
    cost: CostRule | None = None,
) -> list[dict[str, Any]]:
    """Out-of-fold AUROC and cost per question with every signal, each group dropped, and each group alone."""
    cost = cost or CostRule()
    every = [name for group in groups.values() for name in group]
    variants: list[tuple[str, list[str]]] = [("all signals", every)]
    variants += [
        (f"without {group}", [n for n in every if n not in names]) for group, names in groups.items()
    ]
    variants += [(f"only {group}", list(names)) for group, names in groups.items()]
    rows = []
    for label, features in variants:
        oof = cross_validate(records, features, cost)
        figures = {"oof_auroc": rounded(oof.auroc), "oof_cost_per_question": rounded(oof.cost)}
        rows.append({"features": label, "signals": len(features), **figures})
    return rows


def render_ablation(rows: Sequence[Mapping[str, Any]]) -> str:
    """The ablation as a markdown table."""
    lines = ["| signals | count | OOF AUROC | OOF cost per question |", "|---|---:|---:|---:|"]
    for row in rows:
        auroc_text = "-" if row["oof_auroc"] is None else f"{row['oof_auroc']:.3f}"
        lines.append(
            f"| {row['features']} | {row['signals']} | {auroc_text} | {row['oof_cost_per_question']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def write_plots(calibrator: Calibrator, runs: Sequence[RunFile], folder: Path) -> list[Path]:
    """Per set, a risk-coverage plot and a reliability diagram (one line per run); the paths written."""
    from evals.qa_plot import finish_axes, new_figure, save_figure

    written = []
    for set_name in sorted({run.set_name for run in runs}):
        curves = figure_curves(calibrator, [run for run in runs if run.set_name == set_name])
        figure = new_figure()
        axes = figure.add_subplot()
        for label, (probabilities, labels) in curves.items():
            points = risk_coverage(probabilities, labels)
            axes.plot([p[0] for p in points], [p[1] for p in points], label=f"{label} (n={len(labels)})")
        title = f"Risk-coverage: {set_name} ({calibrator.name} calibrator)"
        finish_axes(
            axes, "coverage (share of questions answered)", "accuracy of the answers shown", title, 1, 1.02
        )
        written.append(save_figure(figure, folder / RISK_COVERAGE_PLOT.format(set=set_name)))
        figure = new_figure()
        axes = figure.add_subplot()
        axes.plot([0, 1], [0, 1], linestyle="--", color="gray", linewidth=1)
        for label, (probabilities, labels) in curves.items():
            xs, ys = reliability(probabilities, labels)
            axes.plot(xs, ys, marker="o", label=label)
        title = f"Reliability: {set_name} ({calibrator.name} calibrator)"
        finish_axes(axes, "calibrated probability (bin mean)", "share right", title, 1, 1)
        written.append(save_figure(figure, folder / RELIABILITY_PLOT.format(set=set_name)))
    return written


def figure_curves(
    calibrator: Calibrator, runs: Sequence[RunFile]
) -> dict[str, tuple[list[float], list[float]]]:
    """Per run label: the calibrator's probability of each record and whether its candidate was right."""
    return {
        run.label: (
            [calibrator.probability(dict(record["signals"])) for record in run.records],
            [float(record[LABEL_FIELD]) for record in run.records],
        )
        for run in runs
    }


def reliability(probabilities: Sequence[float], labels: Sequence[float]) -> tuple[list[float], list[float]]:
    """(mean probability, share right) of each non-empty calibration bin, in bin order."""
    ordered = calibration_totals(probabilities, labels)
    return [summed / count for count, summed, _ in ordered], [right / count for count, _, right in ordered]


def run_calibration(
    *,
    name: str,
    dev: Sequence[Path],
    test: Sequence[Path],
    out: Path,
    models: Sequence[str],
    exclude: Sequence[str],
    report_only: bool,
    plot: Path | None,
    with_ablation: bool,
    command: str,
) -> dict[str, Any]:
    """Fit on `dev` and write the artifact to `out` (with `report_only`, read it), evaluate it on `dev` and
    `test` per file and pooled, optionally run the ablation and write the plots; return the report."""
    from answering.calibrator import load_calibrator

    features = features_without(exclude)
    dev_runs = [load_run(path) for path in dev]
    test_runs = [load_run(path) for path in test]
    dev_records = [record for run in dev_runs for record in run.records]
    report: dict[str, Any] = {"model": name, "artifact": str(out), "report_only": report_only}
    if report_only:
        if not out.is_file():
            raise CalibrationInputError(f"no calibrator to report on: {out} does not exist")
        calibrator = load_calibrator(out)
    else:
        if not dev_records:
            raise CalibrationInputError("--dev: give at least one development results file to fit on")
        calibrator, fit_report = fit_calibrator(
            dev_records,
            name=name,
            models=models,
            features=features,
            files=[str(path) for path in dev],
            command=command,
        )
        write_artifact(calibrator, out)
        report["fit"] = fit_report.to_json()
    report["thresholds"] = asdict(calibrator.thresholds)
    for split, runs in (("dev", dev_runs), ("test", test_runs)):
        if runs:
            report[split] = {
                "files": {run.label: evaluate(calibrator, run.records) for run in runs},
                "skipped_failed_questions": {run.label: run.skipped for run in runs},
                "pooled": evaluate(calibrator, [record for run in runs for record in run.records]),
            }
    if with_ablation:
        if not dev_records:
            raise CalibrationInputError("--ablation refits on the development records: give --dev")
        report["ablation"] = ablation(
            dev_records, {g: SIGNAL_GROUPS[g] for g in SIGNAL_GROUPS if g not in exclude}
        )
    if plot is not None:
        report["plots"] = [str(path) for path in write_plots(calibrator, [*dev_runs, *test_runs], plot)]
    return report
