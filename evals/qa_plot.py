"""`rag eval qa --plot DIR`: answer F1 against LLM calls per question, one point per QA report in DIR; and
the figure helpers of every plot. matplotlib's `Figure` rather than pyplot: it keeps no global state and
renders with Agg, no display needed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

QA_PLOT = "qa_f1_vs_llm_calls.png"
#: Output size of every plot, in inches at PLOT_DPI.
FIGURE_SIZE = (7.0, 4.5)
PLOT_DPI = 120
#: Room around the points of the QA plot, so their labels stay inside the axes.
POINT_MARGIN = 0.2
#: Markers cycled per dataset in the QA plot (colours come from the pipeline).
DATASET_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
PIPELINE_COLOURS = {"no-retrieval": "tab:gray", "naive": "tab:blue", "agentic": "tab:orange"}
OTHER_COLOUR = "tab:green"
LABEL_OFFSET_POINTS = (5, 4)


def new_figure() -> Any:
    """A blank Figure of the plots' size (matplotlib imported here: `rag` starts without it)."""
    from matplotlib.figure import Figure

    return Figure(figsize=FIGURE_SIZE, dpi=PLOT_DPI)


def save_figure(figure: Any, path: Path) -> Path:
    """Write the figure as PNG at `path` (its folder created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def finish_axes(
    axes: Any, xlabel: str, ylabel: str, title: str, right: float | None = None, top: float | None = None
) -> None:
    """Labels, axes from 0 (up to `right` and `top` when given), grid and legend of one plot."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xlim(0, right)
    axes.set_ylim(0, top)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="best")


def plot_qa_f1_vs_llm_calls(reports: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
    """One point per pipeline and dataset: F1 (y) against LLM calls per question (x). None without runs."""
    points = [report for report in reports if report.get("f1") is not None]
    if not points:
        return None
    figure = new_figure()
    axes = figure.add_subplot()
    datasets = sorted({str(report.get("dataset")) for report in points})
    markers = {name: DATASET_MARKERS[index % len(DATASET_MARKERS)] for index, name in enumerate(datasets)}
    seen_labels: set[str] = set()
    for report in points:
        pipeline, dataset = str(report.get("pipeline")), str(report.get("dataset"))
        label = f"{pipeline} · {dataset}"
        x, y = float(report.get("llm_calls_per_question") or 0.0), float(report["f1"])
        colour, legend = PIPELINE_COLOURS.get(pipeline, OTHER_COLOUR), None if label in seen_labels else label
        axes.scatter([x], [y], marker=markers[dataset], color=colour, s=60, label=legend)
        seen_labels.add(label)
        note = f"{pipeline} (n={report.get('n')})"
        axes.annotate(note, (x, y), textcoords="offset points", xytext=LABEL_OFFSET_POINTS, fontsize=8)
    axes.margins(POINT_MARGIN)
    finish_axes(axes, "LLM calls per question", "F1", "Answer F1 against LLM calls")
    return save_figure(figure, path)


def is_qa_report(report: Mapping[str, Any]) -> bool:
    """A `rag eval qa` JSON report (it has a pipeline and an F1)."""
    return "pipeline" in report and "f1" in report


def qa_reports(folder: Path) -> list[dict[str, Any]]:
    """The QA reports among `folder/*.json`; unreadable or other JSON files are skipped."""
    found: list[dict[str, Any]] = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            logger.warning("skipping %s: %s", path, error)
            continue
        if isinstance(report, dict) and is_qa_report(report):
            found.append(report)
    return found


def _qa_key(report: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(report.get("dataset")), str(report.get("pipeline")), str(report.get("n")))


def write_qa_plot(folder: Path, extra: Iterable[Mapping[str, Any]] = ()) -> Path | None:
    """`folder/QA_PLOT` from the QA reports there plus `extra` (which win a tie); None without any."""
    reports = {_qa_key(report): report for report in [*qa_reports(folder), *extra]}  # `extra` last: it wins
    return plot_qa_f1_vs_llm_calls(list(reports.values()), Path(folder) / QA_PLOT)
