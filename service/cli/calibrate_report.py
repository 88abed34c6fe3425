"""What `rag eval calibrate` prints: the fit's out-of-fold figures, one table per split, the ablation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table

from service.cli.common import console

#: Columns of a split's table: heading and the figure it shows.
_SHARES = (
    ("conf. right", "confident_right_share"),
    ("not-found cand. right", "not_found_candidate_right_share"),
    ("unans. confident", "unanswerable_confident_share"),
    ("right reaches user", "right_reaches_user_share"),
)


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _band(figures: Mapping[str, Any], band: str) -> str:
    counts = figures["bands"][band]
    return f"{counts['n']} ({counts['right']} right)"


def _row(label: str, figures: Mapping[str, Any]) -> list[str]:
    return [
        label,
        str(figures["n"]),
        _number(figures["auroc"]),
        _number(figures["ece"]),
        _band(figures, "confident"),
        _band(figures, "tentative"),
        _band(figures, "not_found"),
        _number(figures["cost_per_question"]),
        *[_number(figures[key]) for _heading, key in _SHARES],
    ]


def split_table(title: str, split: Mapping[str, Any]) -> Table:
    """One split's figures: a row per file (and per set within it when it holds several), then pooled."""
    table = Table(title=title)
    for column in ("run", "n", "AUROC", "ECE", "confident", "tentative", "not found", "cost/q"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for heading, _key in _SHARES:
        table.add_column(heading, justify="right")
    groups = [*split["files"].items(), ("pooled", split["pooled"])]
    for label, report in groups:
        table.add_row(*_row(label, report["all"]))
        if report["all"]["engine"] is not None:
            table.add_row(*_row(f"{label} (engine's stored bands)", report["all"]["engine"]))
        if len(report["by_set"]) > 1:
            for set_name, figures in report["by_set"].items():
                table.add_row(*_row(f"  {label} · {set_name}", figures))
    return table


def print_calibration_report(report: Mapping[str, Any]) -> None:
    """Print `run_calibration`'s report."""
    thresholds = report["thresholds"]
    fit = report.get("fit")
    if fit is not None:
        per_set = ", ".join(f"{name} {_number(value)}" for name, value in fit["per_set_oof_auroc"].items())
        console.print(
            f"fit {fit['name']!r} on {fit['records']} records ({fit['positives']} right candidates), "
            f"{len(fit['features'])} signals, C={fit['C']:g}: out-of-fold AUROC {_number(fit['oof_auroc'])} "
            f"({per_set}), ECE {_number(fit['oof_ece'])}, "
            f"cost per question {_number(fit['oof_cost_per_question'])}",
            highlight=False,
            soft_wrap=True,
        )
        console.print(f"wrote {report['artifact']}", highlight=False, soft_wrap=True)
    else:
        console.print(f"calibrator {report['artifact']} (not refit)", highlight=False, soft_wrap=True)
    console.print(
        f"bands: confident at >= {thresholds['confident']:.2f}, not found below {thresholds['floor']:.2f}",
        highlight=False,
        soft_wrap=True,
    )
    for split in ("dev", "test"):
        if split in report:
            label = "development (in-sample)" if split == "dev" and fit is not None else split
            console.print(split_table(f"{report['model']} calibrator on {label} records", report[split]))
    if "ablation" in report:
        from evals.calibration_report import render_ablation

        console.print(
            "signal groups (out-of-fold on the development records):", highlight=False, soft_wrap=True
        )
        console.print(render_ablation(report["ablation"]), markup=False, highlight=False, soft_wrap=True)
    for path in report.get("plots", ()):
        console.print(f"plot: {path}", highlight=False, soft_wrap=True)
