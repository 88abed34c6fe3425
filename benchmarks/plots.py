"""The campaigns' plots (PNG), drawn from the JSON reports of the evaluation commands.

The figure helpers and the F1-against-LLM-calls plot are the product's (evals/qa_plot.py, `rag eval qa
--plot`); these are the campaigns' own: accuracy per run, latency per node, retrieval nDCG.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.qa_plot import FIGURE_SIZE, new_figure, save_figure

BAR_GROUP_WIDTH = 0.8
#: Value printed at the end of each bar (three significant digits: 0.691, 45.2, 2100).
BAR_LABEL_FORMAT = "%.3g"


def plot_qa_accuracy(runs: Sequence[tuple[str, Mapping[str, Any]]], path: Path) -> Path | None:
    """Gold contained in the answer (left) and model calls per question (right) of each (run label, QA
    report, its keys current: evals.qa_scoring.current_names), one bar per pipeline within each run: the
    agentic-against-naive question of the QA targets at a glance, quality beside its price. Reports without
    the score (older runs) are left out; None when none has it."""
    usable = [(label, report) for label, report in runs if report.get("contains_gold") is not None]
    if not usable:
        return None
    labels = list(dict.fromkeys(label for label, _report in usable))
    pipelines = list(dict.fromkeys(str(report.get("pipeline")) for _label, report in usable))
    by_key = {(label, str(report.get("pipeline"))): report for label, report in usable}
    figure = new_figure()
    figure.set_size_inches(FIGURE_SIZE[0] * 1.4, max(FIGURE_SIZE[1], 0.45 * len(labels) * len(pipelines)))
    for column, (key, title) in enumerate(
        (
            ("contains_gold", "gold contained in the answer"),
            ("llm_calls_per_question", "model calls per question"),
        )
    ):
        axes = figure.add_subplot(1, 2, column + 1)
        series = {
            pipeline: [_value(by_key.get((label, pipeline)), key) for label in labels]
            for pipeline in pipelines
        }
        _grouped_bars(axes, labels, series, horizontal=True)
        axes.invert_yaxis()
        axes.set_xlabel(title)
        axes.grid(axis="x", alpha=0.3)
        if column:
            axes.set_yticks([])
    figure.suptitle("Question answering: gold contained in the answer and its price, per run")
    return save_figure(figure, path)


def _value(report: Mapping[str, Any] | None, key: str) -> float:
    """`report[key]` as a float; NaN when the run or the value is missing (no bar is drawn)."""
    value = None if report is None else report.get(key)
    return math.nan if value is None else float(value)


def _grouped_bars(
    axes: Any, groups: Sequence[str], series: Mapping[str, Sequence[float]], *, horizontal: bool
) -> None:
    """Bars of several series side by side within each group (NaN: no bar)."""
    width = BAR_GROUP_WIDTH / max(1, len(series))
    for index, (name, values) in enumerate(series.items()):
        offsets = [position + (index - (len(series) - 1) / 2) * width for position in range(len(groups))]
        if horizontal:
            bars = axes.barh(offsets, values, height=width, label=name)
        else:
            bars = axes.bar(offsets, values, width=width, label=name)
        # A missing value (NaN) draws no bar and gets no label, so it is not mistaken for a measured 0.
        texts = ["" if math.isnan(value) else BAR_LABEL_FORMAT % value for value in values]
        axes.bar_label(bars, labels=texts, fontsize=7, padding=2)
    if horizontal:
        axes.set_yticks(range(len(groups)), groups)
    else:
        axes.set_xticks(range(len(groups)), groups)
    if len(series) > 1:
        axes.legend(fontsize=8)


def plot_latency_per_node(reports: Mapping[str, Mapping[str, Any]], path: Path) -> Path | None:
    """Mean milliseconds per question spent in each node (one series per latency report)."""
    with_nodes = {name: report for name, report in reports.items() if report.get("per_node_ms")}
    if not with_nodes:
        return None
    nodes = sorted({node for report in with_nodes.values() for node in report["per_node_ms"]})
    series = {
        name: [float(report["per_node_ms"].get(node, 0.0)) for node in nodes]
        for name, report in with_nodes.items()
    }
    figure = new_figure()
    axes = figure.add_subplot()
    _grouped_bars(axes, nodes, series, horizontal=True)
    axes.invert_yaxis()
    axes.set_xlabel("mean ms per question")
    axes.set_title("Time per graph node")
    axes.grid(axis="x", alpha=0.3)
    return save_figure(figure, path)


def plot_retrieval_ndcg(
    reports: Sequence[Mapping[str, Any]], path: Path, metric: str = "ndcg@10"
) -> Path | None:
    """`metric` per search mode (bars) for each retrieval dataset (groups)."""
    usable = [report for report in reports if report.get("modes")]
    if not usable:
        return None
    datasets = [str(report.get("dataset")) for report in usable]
    modes = list(dict.fromkeys(mode for report in usable for mode in report["modes"]))
    series = {
        mode: [float(report["modes"].get(mode, {}).get(metric, 0.0)) for report in usable] for mode in modes
    }
    figure = new_figure()
    axes = figure.add_subplot()
    _grouped_bars(axes, datasets, series, horizontal=False)
    axes.set_ylabel(metric)
    axes.set_ylim(0, 1)
    axes.set_title(f"Retrieval {metric} per search mode")
    axes.grid(axis="y", alpha=0.3)
    return save_figure(figure, path)
