"""What a retrieval retry searches: the notes assistant's `retryStrategy` (expand | rewrite | both,
RAG_RETRY_STRATEGY).

A retry is a retrieval round after the first that is not a planned hop: grade_retrieval found too few
relevant passages, or grade_answer sent an answer that needs improvement back to retrieval. Both go through
reformulate, which follows `plan_retry`:
- expand: the previous round's queries again, searched deeper: the round's `retrieval_depth` (a factor on
  each query's k, carried by fan-out into every RetrieveTask) grows by RETRY_EXPAND_FACTOR. Passages
  found before merge by chunk id, so the round adds the next ranks. No model call; the query that found the
  right neighbourhood keeps it.
- rewrite: reformulated queries (nodes.reformulate: missing terms, sub-questions, the grader's suggestions)
  at the previous round's depth. The default: what the engine did before the setting existed.
- both: the previous queries and the reformulated ones in one round, at the grown depth.
When k cannot grow any more (top_k x depth already reaches CANDIDATE_K, what a retriever hands to
fusion), expanding would search exactly what was searched: the retry rewrites instead.
An ITERATIVE question's next hop is not a retry: reformulate writes it whatever the strategy.
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

    same_queries: bool
    """Search the previous round's queries again (deeper)."""
    rewrite: bool
    """Add reformulated queries."""
    depth: int

    @property
    def name(self) -> RetryStrategy:
        """What the round does, as a strategy name (an expand that could not grow is a rewrite)."""
        if self.same_queries and self.rewrite:
            return "both"
        return "expand" if self.same_queries else "rewrite"


def deeper(depth: int, factor: int, top_k: int, max_k: int) -> int | None:
    """The next depth of an expanding retry, or None when k already reaches `max_k`."""
    if top_k * depth >= max_k:
        return None
    return depth * factor


def plan_retry(strategy: RetryStrategy, depth: int, factor: int, top_k: int, max_k: int) -> RetryPlan:
    """The retry round of `strategy` after a round searched at `depth` (see the module docstring)."""
    depth = max(1, depth)
    grown = deeper(depth, factor, top_k, max_k) if strategy in ("expand", "both") else None
    if grown is None:
        return RetryPlan(same_queries=False, rewrite=True, depth=depth)
    return RetryPlan(same_queries=True, rewrite=strategy == "both", depth=grown)


def search_k(k: int, depth: int, max_k: int) -> int:
    """The k a query searches at `depth`: k x depth, at most `max_k` (never below k itself)."""
    return max(k, min(k * max(1, depth), max_k))
