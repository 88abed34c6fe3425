"""What a retrieval retry searches (RAG_RETRY_STRATEGY): expand = the previous queries again with each k
grown by RETRY_EXPAND_FACTOR (`retrieval_depth`), rewrite = reformulated queries at the same depth, both =
the two in one round. When k already reaches CANDIDATE_K, expanding would search the same: the retry rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.settings import RetryStrategy

#: Factor on the k of each expanding retry (RAG_RETRY_STRATEGY expand or both): top_k, then top_k x 2,
#: x 4...; doubling reaches the candidate depth within the few rounds RAG_MAX_ITERATIONS allows.
RETRY_EXPAND_FACTOR = 2


@dataclass(frozen=True)
class RetryPlan:
    """One retry round: which queries it searches, and its depth (the factor on each query's k)."""

    same_queries: bool  # search the previous round's queries again (deeper)
    rewrite: bool  # add reformulated queries
    depth: int

    @property
    def name(self) -> RetryStrategy:
        """What the round does, as a strategy name (an expand that could not grow is a rewrite)."""
        if self.same_queries and self.rewrite:
            return "both"
        return "expand" if self.same_queries else "rewrite"


def plan_retry(strategy: RetryStrategy, depth: int, factor: int, top_k: int, max_k: int) -> RetryPlan:
    """The retry round of `strategy` after a round searched at `depth` (see the module docstring)."""
    depth = max(1, depth)
    if strategy == "rewrite" or top_k * depth >= max_k:
        return RetryPlan(same_queries=False, rewrite=True, depth=depth)
    return RetryPlan(same_queries=True, rewrite=strategy == "both", depth=depth * factor)


def search_k(k: int, depth: int, max_k: int) -> int:
    """The k a query searches at `depth`: k x depth, at most `max_k` (never below k itself)."""
    return max(k, min(k * max(1, depth), max_k))
