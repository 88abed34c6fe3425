"""benchmarks/graph_overhead.py: the overhead accounting (no timing is asserted: the figures depend on the
machine and its load)."""

from __future__ import annotations

import pytest

from benchmarks.graph_overhead import (
    INTERVALS,
    HashedEmbeddings,
    forget_seen_texts,
    question_costs,
    run_graph_overhead,
    union_ms,
)
from retrieval.tokens import count_tokens


def test_overlapping_calls_are_subtracted_once() -> None:
    """Two retrievals in parallel (0-2 s and 1-3 s) and a model call after (4-5 s): 4 s inside calls."""
    spans = [("search", 1.0, 3.0), ("model", 4.0, 5.0), ("search", 0.0, 2.0), ("embed_query", 1.5, 1.6)]
    assert union_ms(spans) == pytest.approx(4000.0)
    assert union_ms([]) == 0.0


def test_a_question_costs_its_wall_time_less_the_calls_and_each_node_less_its_own_calls() -> None:
    spans = [("search", 0.0, 0.010), ("model", 0.020, 0.050), ("embed_documents", 0.015, 0.017)]
    timings = {"retrieve": 12.0, "retrieval": 10.0, "generate": 33.0, "model": 30.0, "compress_evidence": 5.0}
    overhead, nodes = question_costs(60.0, timings, spans)
    assert overhead == pytest.approx(60.0 - 42.0)
    assert nodes == pytest.approx({"retrieve": 2.0, "generate": 3.0, "compress_evidence": 3.0})


def test_the_fakes_record_their_calls() -> None:
    INTERVALS.take()
    embeddings = HashedEmbeddings()
    assert len(embeddings.embed_query("tea")) == len(embeddings.embed_documents(["tea", "coffee"])[1])
    assert [kind for kind, _, _ in INTERVALS.take()] == ["embed_query", "embed_documents"]


def test_forgetting_seen_texts_empties_the_per_text_caches() -> None:
    count_tokens("a text counted once")
    assert count_tokens.cache_info().currsize > 0
    forget_seen_texts()
    assert count_tokens.cache_info().currsize == 0


def test_the_report_has_the_campaign_fields_for_every_question() -> None:
    report = run_graph_overhead(questions=2)
    assert report["questions"] == 2
    assert {"machine", "load", "p50_ms", "p95_ms", "per_node_ms", "new_texts"} <= set(report)
    assert report["model_calls_per_question"] >= 1
    for figures in (report, report["new_texts"]):
        assert {"generate", "cite", "record_turn", "retrieve"} <= set(figures["per_node_ms"])
        assert figures["p50_ms"] <= figures["p95_ms"]
