"""`python -m benchmarks report`: results/README.md (tables) and PNG plots from the benchmarks' JSON reports.

Why a generated README: the numbers in a hand-edited table drift from the runs; this one is rebuilt from
the JSON files each benchmark writes (`--json`), so it shows exactly what was measured, with the machine
and model of each run. Files are recognised by content (a QA report has "pipeline", a router report
"confusion", a latency report "overhead_fraction", a retrieval report "modes", a graders report "graders"
and "base_rate"), so any file name works,
and a missing kind of report leaves its section with a note on how to produce it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.plots import plot_latency_per_node, plot_qa_accuracy, plot_retrieval_ndcg
from benchmarks.report_tables import (
    MISSING,
    PIPELINE_ORDER,
    fmt,
    qa_table,
    run_label,
    table,
)
from evals.qa_plot import QA_PLOT, is_qa_report, plot_qa_f1_vs_llm_calls
from evals.qa_scoring import current_names

logger = logging.getLogger(__name__)

README_NAME = "README.md"
QA_ACCURACY_PLOT = "qa_accuracy.png"
LATENCY_PLOT = "latency_per_node.png"
RETRIEVAL_PLOT = "retrieval_ndcg.png"
#: Retrieval metrics shown first, in this order; others follow alphabetically.
RETRIEVAL_METRIC_ORDER = ("ndcg@10", "recall@1", "recall@5", "recall@10", "recall@100", "mrr@10")
RETRIEVAL_TIMING_KEYS = ("p50_ms", "p95_ms")


@dataclass
class Results:
    """The JSON reports of a results folder, by kind; each entry is (file stem, report)."""

    retrieval: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    latency: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    qa: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    router: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    graders: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def report_kind(report: Mapping[str, Any]) -> str | None:
    """qa | router | latency | retrieval | graders, from the report's keys; None for any other JSON."""
    if is_qa_report(report):
        return "qa"
    if "confusion" in report and "heuristic_accuracy" in report:
        return "router"
    if "per_node_ms" in report and "overhead_fraction" in report:
        return "latency"
    if isinstance(report.get("modes"), dict):
        return "retrieval"
    if isinstance(report.get("graders"), dict) and "base_rate" in report:
        return "graders"
    return None


def load_results(results_dir: Path) -> Results:
    """Every recognised report among `results_dir/*.json`; unreadable or unknown files are skipped."""
    results = Results()
    for path in sorted(Path(results_dir).glob("*.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            logger.warning("skipping %s: %s", path, error)
            continue
        kind = report_kind(report) if isinstance(report, dict) else None
        if kind is None:
            logger.info("skipping %s: not a benchmark report", path)
            continue
        if kind == "qa":
            report = current_names(report)  # older QA reports say "accuracy"
        getattr(results, kind).append((path.stem, report))
    return results


def _provenance(reports: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per distinct (machine, model) the reports were measured with."""
    seen = dict.fromkeys(
        (
            str(report.get("machine") or MISSING),
            str(report.get("model") or report.get("embedding") or MISSING),
        )
        for report in reports
    )
    return [f"_Measured on {machine}; model {model}._" for machine, model in seen]


def _image(name: str, alt: str, written: set[str]) -> list[str]:
    return [f"![{alt}]({name})", ""] if name in written else []


# --------------------------------------------------------------------------------------------------------
# Sections


def retrieval_section(results: Results, written: set[str]) -> list[str]:
    """Quality and speed per search mode, one table per dataset."""
    lines = ["## Retrieval", ""]
    if not results.retrieval:
        return [
            *lines,
            "No retrieval report yet: `rag eval retrieval --dataset DIR --json results/retrieval_NAME.json`.",
            "",
        ]
    for _stem, report in results.retrieval:
        modes: dict[str, dict[str, Any]] = report["modes"]
        metrics = list(dict.fromkeys(name for values in modes.values() for name in values))
        ordered = [name for name in RETRIEVAL_METRIC_ORDER if name in metrics]
        ordered += sorted(
            name for name in metrics if name not in ordered and name not in RETRIEVAL_TIMING_KEYS
        )
        lines += [
            f"### {report.get('dataset')} ({report.get('queries')} queries, {report.get('embedding')})",
            "",
        ]
        lines += table(
            ["mode", *ordered, "p50 ms", "p95 ms"],
            [
                [mode, *[values.get(name) for name in ordered], values.get("p50_ms"), values.get("p95_ms")]
                for mode, values in modes.items()
            ],
        )
        lines += [
            "",
            f"Ingest: {fmt(report.get('chunks'))} chunks at {fmt(report.get('ingest_chunks_per_s'))} "
            f"chunks/s; unchanged re-ingest {fmt(report.get('reingest_seconds'), 4)} s.",
            "",
        ]
    lines += _image(RETRIEVAL_PLOT, "nDCG@10 per search mode", written)
    return [*lines, *_provenance(report for _stem, report in results.retrieval), ""]


def qa_section(results: Results, written: set[str]) -> list[str]:
    """Answer quality and cost per run (file) and pipeline, then the breakdowns by strategy and type.

    Rows are labelled by file name, not by dataset: a results folder holds several runs of one dataset
    (another model, an earlier rule, another corpus), and rows that differ only in numbers cannot be told
    apart."""
    lines = ["## Question answering", ""]
    if not results.qa:
        return [
            *lines,
            "No QA report yet: `rag eval qa --dataset FILE --pipeline agentic --json results/qa_NAME.json`.",
            "",
        ]
    runs = sorted(
        ((run_label(stem, report), report) for stem, report in results.qa),
        key=lambda run: (run[0], PIPELINE_ORDER.get(str(run[1].get("pipeline")), len(PIPELINE_ORDER))),
    )
    lines += qa_table(runs)
    lines += [
        "",
        "Datasets: " + ", ".join(f"{label} = {report.get('dataset')}" for label, report in runs) + ".",
    ]
    lines += ["", *_image(QA_ACCURACY_PLOT, "gold contained in the answer and model calls per run", written)]
    lines += _image(QA_PLOT, "F1 against LLM calls per question", written)
    breakdown_rows = [
        [
            label,
            report.get("pipeline"),
            by,
            group,
            *[values.get(key) for key in ("n", "em", "f1", "llm_calls", "support_recall@5")],
        ]
        for label, report in runs
        for by, key in (("strategy", "by_strategy"), ("type", "by_type"))
        for group, values in (report.get(key) or {}).items()
    ]
    if breakdown_rows:
        lines += ["### By strategy and by HotpotQA type", ""]
        lines += table(
            ["run", "pipeline", "by", "group", "n", "EM", "F1", "LLM calls", "support R@5"],
            breakdown_rows,
        )
        lines.append("")
    return [*lines, *_provenance(report for _label, report in runs), ""]


def graders_section(results: Results) -> list[str]:
    """Score grader against LLM grader: agreement with the gold supporting passages, and cost."""
    lines = ["## Retrieval graders", ""]
    if not results.graders:
        return [
            *lines,
            "No graders report yet: "
            "`python -m benchmarks graders --dataset FILE --json results/graders_NAME.json`.",
            "",
        ]
    reports = sorted((report for _stem, report in results.graders), key=lambda r: str(r.get("dataset")))
    lines += table(
        [
            "dataset",
            "questions",
            "passages",
            "base rate",
            "grader",
            "accuracy",
            "precision",
            "recall",
            "F1",
            "judged relevant",
            "AUC",
            "LLM calls",
            "ms/question",
            "failed replies",
        ],
        [
            [
                report.get("dataset"),
                report.get("questions"),
                report.get("passages"),
                report.get("base_rate"),
                grader,
                *[
                    values.get(key)
                    for key in (
                        "accuracy",
                        "precision",
                        "recall",
                        "f1",
                        "judged_relevant",
                        "auc",
                        "llm_calls",
                        "mean_ms_per_question",
                        "failed_replies",
                    )
                ],
            ]
            for report in reports
            for grader, values in (report.get("graders") or {}).items()
        ],
    )
    lines += [
        "",
        "Gold: a passage is relevant when it is one of the question's supporting passages. AUC ranks by the "
        "score grader's continuous score (0.5 = chance); the LLM grader keeps the score grader's verdict "
        "where its reply was unusable, as the engine does.",
        "",
    ]
    lines += [
        f"- {report.get('dataset')}: top {fmt(report.get('top_k'))} passages per question, relevance "
        f"threshold {fmt(report.get('relevance_threshold'), 2)}; the engine's default grader under these "
        f"settings: {fmt(report.get('default_grader'))}."
        for report in reports
    ]
    return [*lines, "", *_provenance(reports), ""]


def router_section(results: Results) -> list[str]:
    """Single- vs multi-hop accuracy of each analyzer, confusion matrices and per-source accuracy."""
    lines = ["## Query routing (single- vs multi-hop)", ""]
    if not results.router:
        return [*lines, "No router report yet: `rag eval router --json results/router.json`.", ""]
    for stem, report in results.router:
        lines += [f"### {stem}: {report.get('n')} labelled questions ({report.get('mapping', '')})", ""]
        lines += table(
            ["analyzer", "n", "accuracy", "note"],
            [
                [
                    f"default ({report.get('default_analyzer')})",
                    report.get("accuracy_n", report.get("n")),
                    report.get("accuracy"),
                    "what the engine uses under `auto`",
                ],
                ["heuristic", report.get("n"), report.get("heuristic_accuracy"), "all questions"],
                [
                    "heuristic, LLM subset",
                    report.get("llm_n"),
                    report.get("heuristic_accuracy_on_llm_subset"),
                    "same questions as the LLM row",
                ],
                [
                    "LLM",
                    report.get("llm_n"),
                    report.get("llm_accuracy"),
                    f"fallback rate {fmt(report.get('llm_fallback_rate'))}, "
                    f"{fmt(report.get('llm_seconds_per_question'))} s/question",
                ],
            ],
        )
        lines.append("")
        for analyzer, matrix in (report.get("confusion") or {}).items():
            predicted = list(dict.fromkeys(guess for row in matrix.values() for guess in row))
            lines += [f"Confusion, {analyzer} (rows: true label, columns: predicted):", ""]
            lines += table(
                ["true \\ predicted", *predicted],
                [[true, *[row.get(guess, 0) for guess in predicted]] for true, row in matrix.items()],
            )
            lines.append("")
        per_source_rows = []
        for analyzer in ("heuristic", "llm"):
            for source, values in ((report.get(analyzer) or {}).get("per_source") or {}).items():
                per_source_rows.append(
                    [analyzer, source, values.get("label"), values.get("n"), values.get("accuracy")]
                )
        if per_source_rows:
            lines += table(["analyzer", "source", "label", "n", "accuracy"], per_source_rows)
            lines.append("")
    return [*lines, *_provenance(report for _stem, report in results.router), ""]


def latency_section(results: Results, written: set[str]) -> list[str]:
    """Where a question's time goes: per-node means and the graph's own overhead."""
    lines = ["## Latency per node", ""]
    if not results.latency:
        return [*lines, "No latency report yet: `rag eval latency --json results/latency.json`.", ""]
    for stem, report in results.latency:
        lines += [
            f"### {stem}: {report.get('questions')} questions",
            "",
            f"Wall p50 {fmt(report.get('wall_ms_p50'), 1)} ms, p95 {fmt(report.get('wall_ms_p95'), 1)} ms; "
            f"graph overhead {fmt((report.get('overhead_fraction') or 0.0) * 100, 2)}% of wall time "
            f"({fmt(report.get('overhead_ms_per_question'), 2)} ms/question); "
            f"{fmt(report.get('llm_calls_per_question'), 2)} LLM calls/question.",
            "",
        ]
        lines += table(["node", "mean ms per question"], sorted((report.get("per_node_ms") or {}).items()))
        lines.append("")
    lines += _image(LATENCY_PLOT, "mean time per node", written)
    return [*lines, *_provenance(report for _stem, report in results.latency), ""]


# --------------------------------------------------------------------------------------------------------
# Entry points


def write_report(results_dir: Path) -> dict[str, Any]:
    """Write README.md and the plots into `results_dir`; returns the paths written and the report counts."""
    results_dir = Path(results_dir)
    results = load_results(results_dir)
    plots = [
        plot_qa_f1_vs_llm_calls([report for _stem, report in results.qa], results_dir / QA_PLOT),
        plot_qa_accuracy(
            [(run_label(stem, report), report) for stem, report in results.qa], results_dir / QA_ACCURACY_PLOT
        ),
        plot_latency_per_node(dict(results.latency), results_dir / LATENCY_PLOT),
        plot_retrieval_ndcg([report for _stem, report in results.retrieval], results_dir / RETRIEVAL_PLOT),
    ]
    written = {path.name for path in plots if path is not None}
    lines = [
        "# Evaluation results",
        "",
        "Generated by `python -m benchmarks report` from the JSON reports in this folder; rerun it after a "
        "benchmark. "
        "Plots: " + (", ".join(f"[{name}]({name})" for name in sorted(written)) or "none yet") + ".",
        "",
        *retrieval_section(results, written),
        *qa_section(results, written),
        *graders_section(results),
        *router_section(results),
        *latency_section(results, written),
    ]
    readme = results_dir / README_NAME
    results_dir.mkdir(parents=True, exist_ok=True)
    readme.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return {
        "readme": str(readme),
        "plots": [str(path) for path in plots if path is not None],
        "reports": {
            kind: len(getattr(results, kind)) for kind in ("retrieval", "qa", "graders", "router", "latency")
        },
    }
