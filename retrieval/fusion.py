"""Combining rankings: weighted reciprocal rank fusion (ranks, since dense and BM25 scores live on unrelated
scales), deduplication by chunk id, and MMR.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.types import SearchHit


def dedupe_best(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """One hit per chunk id, keeping the best-scored one, ordered by score (descending)."""
    best: dict[str, SearchHit] = {}
    for hit in hits:
        kept = best.get(hit.chunk_id)
        if kept is None or hit.score > kept.score:
            best[hit.chunk_id] = hit
    return sorted(best.values(), key=lambda hit: hit.score, reverse=True)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[SearchHit]], weights: Sequence[float], k: int = 60
) -> list[SearchHit]:
    """Fuse rankings: score(d) = sum_i w_i / (k + rank_i(d)), ranks from 1; per-retriever scores are kept."""
    if len(rankings) != len(weights):
        raise ValueError("one weight per ranking is needed")
    fused: dict[str, SearchHit] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, hit in enumerate(dedupe_best(ranking), start=1):
            contribution = weight / (k + rank)
            kept = fused.get(hit.chunk_id)
            if kept is None:
                fused[hit.chunk_id] = SearchHit(
                    hit.chunk_id, hit.text, hit.metadata, contribution, hit.dense_score, hit.bm25_score
                )
            else:
                kept.score += contribution
                kept.dense_score = kept.dense_score if hit.dense_score is None else hit.dense_score
                kept.bm25_score = kept.bm25_score if hit.bm25_score is None else hit.bm25_score
    return sorted(fused.values(), key=lambda hit: hit.score, reverse=True)


def maximal_marginal_relevance(
    query_vector: Sequence[float],
    candidate_vectors: Sequence[Sequence[float]],
    k: int,
    lambda_mult: float = 0.7,
    relevance: Sequence[float] | None = None,
) -> list[int]:
    """Indices of `k` candidates chosen by MMR: lambda * relevance - (1 - lambda) * max similarity to chosen
    (relevance: cosine to the query unless given)."""
    if not candidate_vectors or k <= 0:
        return []
    matrix = np.asarray(candidate_vectors, dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    query = np.asarray(query_vector, dtype=np.float32)
    query /= max(float(np.linalg.norm(query)), 1e-12)
    scores = np.asarray(relevance, dtype=np.float32) if relevance is not None else matrix @ query
    chosen: list[int] = []
    max_similarity = np.full(len(matrix), -np.inf, dtype=np.float32)
    for _ in range(min(k, len(matrix))):
        redundancy = np.where(np.isinf(max_similarity), 0.0, max_similarity)
        objective = lambda_mult * scores - (1.0 - lambda_mult) * redundancy
        objective[chosen] = -np.inf
        pick = int(np.argmax(objective))
        chosen.append(pick)
        max_similarity = np.maximum(max_similarity, matrix @ matrix[pick])
    return chosen
