"""BM25 as SQLite FTS5 computes it, for the Postgres index's ranking and the rescoring of a pruned query's
candidates: score = sum of idf x f x (k1 + 1) / (f + k1 x (1 - b + b x D / avgdl)), idf = ln((N - n + 0.5) /
(n + 0.5)) floored at 1e-6, f = title weight x title count + body count, D = the row's tokens in every column.

Rescoring adds the dropped terms' share back for the best BM25_RESCORE_POOL candidates of a pruned query, so
the ranking inside the pool is the unpruned query's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: FTS5's constants.
K1 = 1.2
B = 0.75
#: FTS5's floor for the idf of a term found in more than half of the rows.
MIN_IDF = 1e-6


def idf(n_docs: float, df: int) -> float:
    """FTS5's inverse document frequency of a term in `df` of `n_docs` rows (floored at MIN_IDF)."""
    return max(math.log((n_docs - df + 0.5) / (df + 0.5)), MIN_IDF)


def term_score(weight: float, frequency: float, length: float, avgdl: float) -> float:
    """One term's share of a row's score: `weight` its idf, `frequency` its weighted count in the row."""
    if frequency <= 0:
        return 0.0
    return weight * frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * length / max(avgdl, 1.0)))


@dataclass(frozen=True)
class Candidate:
    """A row found by a pruned query: its score over the kept terms and its length (tokens, all columns)."""

    row: int
    score: float
    length: float


def rescore(
    candidates: Sequence[Candidate],
    counts: Mapping[int, Mapping[str, float]],
    weights: Mapping[str, float],
    avgdl: float,
) -> list[tuple[int, float]]:
    """(row, exact score) best first (ties by row id): each candidate's score plus the dropped terms' shares,
    from `counts` (row -> dropped term -> weighted count) and `weights` (dropped term -> idf)."""
    scored = []
    for candidate in candidates:
        found = counts.get(candidate.row, {})
        extra = sum(
            term_score(weight, found.get(term, 0.0), candidate.length, avgdl)
            for term, weight in weights.items()
        )
        scored.append((candidate.row, candidate.score + extra))
    return sorted(scored, key=lambda item: (-item[1], item[0]))
