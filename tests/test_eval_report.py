"""`python -m benchmarks report`: README tables and PNG plots from small JSON fixtures; junk files are
tolerated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from benchmarks.commands import app
from benchmarks.report import (
    LATENCY_PLOT,
    QA_ACCURACY_PLOT,
    README_NAME,
    RETRIEVAL_PLOT,
    load_results,
    report_kind,
    write_report,
)
from evals.qa_plot import QA_PLOT, write_qa_plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MACHINE = "Test CPU, 2 cores"

RETRIEVAL = {
    "dataset": "scifact",
    "kind": "beir",
    "queries": 300,
    "machine": MACHINE,
    "embedding": "minilm",
    "modes": {
        "bm25": {
            "ndcg@10": 0.6651,
            "mrr@10": 0.63,
            "recall@10": 0.79,
            "recall@100": 0.9,
            "p50_ms": 2.1,
            "p95_ms": 4.0,
        },
        "hybrid": {
            "ndcg@10": 0.6912,
            "mrr@10": 0.65,
            "recall@10": 0.82,
            "recall@100": 0.95,
            "p50_ms": 9.5,
            "p95_ms": 15.0,
        },
    },
    "chunks": 5400,
    "ingest_chunks_per_s": 120.5,
    "reingest_seconds": 0.0123,
}
LATENCY = {
    "questions": 50,
    "machine": MACHINE,
    "model": "SmolLM2 (embedded)",
    "wall_ms_p50": 2500.0,
    "wall_ms_p95": 4100.0,
    "overhead_fraction": 0.0123,
    "overhead_ms_per_question": 31.0,
    "llm_calls_per_question": 1.4,
    "per_node_ms": {"analyze": 0.4, "generate": 2100.0, "retrieve": 45.2},
}


def qa(
    pipeline: str, f1: float, calls: float, dataset: str = "hotpot_sample", accuracy: float | None = None
) -> dict[str, Any]:
    return {
        "pipeline": pipeline,
        "dataset": dataset,
        "n": 100,
        "em": 0.1,
        "f1": f1,
        "accuracy": accuracy,
        "support_recall@5": None if pipeline == "no-retrieval" else 0.61,
        "citation_precision": 0.5,
        "not_found_rate": 0.05,
        "llm_calls_per_question": calls,
        "tokens_per_question": 1234.5,
        "latency_p50_s": 2.5,
        "by_strategy": {
            "ITERATIVE": {"n": 60, "em": 0.1, "f1": 0.3, "llm_calls": 2.0, "support_recall@5": 0.7}
        },
        "by_type": {"bridge": {"n": 80, "em": 0.1, "f1": 0.25, "llm_calls": 1.5, "support_recall@5": 0.6}},
        "machine": MACHINE,
        "model": "SmolLM2 (embedded)",
    }


ROUTER = {
    "n": 1100,
    "accuracy": 0.9664,
    "accuracy_n": 1100,
    "default_analyzer": "heuristic",
    "heuristic_accuracy": 0.9664,
    "llm_accuracy": 0.6667,
    "llm_n": 30,
    "heuristic_accuracy_on_llm_subset": 0.9667,
    "llm_fallback_rate": 0.0,
    "llm_seconds_per_question": 1.2,
    "mapping": "query type",
    "confusion": {
        "heuristic": {"single": {"single": 600, "multi": 0}, "multi": {"single": 37, "multi": 463}},
        "llm": {"single": {"single": 20, "multi": 0}, "multi": {"single": 10, "multi": 0}},
    },
    "heuristic": {"per_source": {"hotpotqa": {"n": 500, "label": "multi", "accuracy": 0.926}}},
    "machine": MACHINE,
    "model": "SmolLM2 (embedded)",
}


def write_fixtures(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "retrieval_scifact.json": RETRIEVAL,
        "latency.json": LATENCY,
        "qa_hotpot_agentic.json": qa("agentic", 0.31, 2.4, accuracy=0.4),
        "qa_hotpot_naive.json": qa("naive", 0.27, 1.0, accuracy=0.35),
        "qa_older-model_hotpot_naive.json": qa("naive", 0.12, 1.0),
        "router.json": ROUTER,
        "unrelated.json": {"hello": "world"},
    }
    for name, payload in files.items():
        (folder / name).write_text(json.dumps(payload), encoding="utf-8")
    (folder / "broken.json").write_text("{not json", encoding="utf-8")


def assert_png(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 0
    assert path.read_bytes()[: len(PNG_MAGIC)] == PNG_MAGIC


def test_reports_are_recognised_by_content(tmp_path: Path) -> None:
    assert [report_kind(r) for r in (RETRIEVAL, LATENCY, qa("naive", 0.1, 1.0), ROUTER, {"x": 1})] == [
        "retrieval",
        "latency",
        "qa",
        "router",
        None,
    ]
    write_fixtures(tmp_path)
    results = load_results(tmp_path)
    assert (len(results.retrieval), len(results.latency), len(results.qa), len(results.router)) == (
        1,
        1,
        3,
        1,
    )


def test_report_writes_tables_and_plots(tmp_path: Path) -> None:
    write_fixtures(tmp_path)
    written = write_report(tmp_path)
    readme = (tmp_path / README_NAME).read_text(encoding="utf-8")
    assert written["readme"] == str(tmp_path / README_NAME)
    for name in (QA_PLOT, QA_ACCURACY_PLOT, LATENCY_PLOT, RETRIEVAL_PLOT):
        assert_png(tmp_path / name)
        assert f"]({name})" in readme
    # QA rows per run (file name) and pipeline, naive before agentic; None shown as a dash
    qa_rows = [
        line for line in readme.splitlines() if line.startswith(("| hotpot |", "| older-model_hotpot |"))
    ]
    assert qa_rows[:3] == [
        "| hotpot | naive | 100 | 0.100 | 0.270 | 0.350 | – | 0.610 | 0.500 | 0.050 | 1.00 | 1234 | 2.5 |",
        "| hotpot | agentic | 100 | 0.100 | 0.310 | 0.400 | – | 0.610 | 0.500 | 0.050 | 2.40 | 1234 | 2.5 |",
        "| older-model_hotpot | naive | 100 | 0.100 | 0.120 | – | – | 0.610 | 0.500 | 0.050 | 1.00 | 1234 "
        "| 2.5 |",
    ]
    assert "hotpot = hotpot_sample" in readme
    assert "| hotpot | agentic | strategy | ITERATIVE | 60 |" in readme
    assert "| older-model_hotpot | naive | type | bridge | 80 |" in readme
    # retrieval per mode, router accuracy and confusion, latency per node
    assert "| hybrid | 0.691 |" in readme and "| bm25 | 0.665 |" in readme
    assert "| heuristic | 1100 | 0.966 |" in readme and "| LLM | 30 | 0.667 |" in readme
    assert "| multi | 37 | 463 |" in readme
    assert "| generate | 2100 |" in readme
    assert MACHINE in readme


def test_accuracy_plot_needs_a_run_with_answer_accuracy(tmp_path: Path) -> None:
    (tmp_path / "qa_old_naive.json").write_text(json.dumps(qa("naive", 0.2, 1.0)), encoding="utf-8")
    written = write_report(tmp_path)
    assert str(tmp_path / QA_ACCURACY_PLOT) not in written["plots"]
    assert str(tmp_path / QA_PLOT) in written["plots"]
    assert f"]({QA_ACCURACY_PLOT})" not in (tmp_path / README_NAME).read_text(encoding="utf-8")


def test_report_without_results_explains_how_to_get_them(tmp_path: Path) -> None:
    written = write_report(tmp_path)
    readme = (tmp_path / README_NAME).read_text(encoding="utf-8")
    assert written["plots"] == []
    assert "No QA report yet" in readme and "No router report yet" in readme
    assert "No latency report yet" in readme and "No retrieval report yet" in readme
    assert ".png" not in readme


def test_qa_plot_includes_the_current_run(tmp_path: Path) -> None:
    assert write_qa_plot(tmp_path) is None
    path = write_qa_plot(tmp_path, extra=[qa("no-retrieval", 0.05, 1.0)])
    assert path == tmp_path / QA_PLOT
    assert_png(path)


def test_cli_report(tmp_path: Path) -> None:
    write_fixtures(tmp_path)
    result = CliRunner().invoke(app, ["report", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / README_NAME).is_file()
    missing = CliRunner().invoke(app, ["report", "--results-dir", str(tmp_path / "none")])
    assert missing.exit_code == 2
