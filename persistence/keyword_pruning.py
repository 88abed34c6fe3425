"""Query-term pruning for the keyword index: drop the query's most common terms on large corpora.

Why: a BM25 query ORs its terms, so its cost grows with their posting lists, and the longest lists belong to
the terms that matter least. From RAG_BM25_PRUNE_MIN_CHUNKS chunks on, terms in more than
BM25_MAX_DF_FRACTION of the chunks are dropped (at 50k chunks p50 140 -> 49 ms, SciFact nDCG@10 0.697 ->
0.684), and the kept terms share a posting budget (BM25_MAX_QUERY_POSTINGS) that caps one query's work at any
corpus size; the best BM25_RESCORE_POOL candidates are then rescored with every term (persistence/bm25.py;
`python -m benchmarks keyword-pruning`, results/keyword_pruning.json). The index that prunes supplies the
document frequencies (FTS5's over the whole index, all tenants: a term common in the index is expensive
whatever the tenant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from config.settings import Settings

#: On a pruned index, query terms found in more than this share of the chunks are dropped (1 = never): their
#: posting lists are the cost of a query, their IDF is low. 0.1 by the measurement above.
BM25_MAX_DF_FRACTION = 0.1
#: Rarest query terms kept when pruning would leave fewer.
BM25_MIN_QUERY_TERMS = 2
#: On a pruned index, the kept query terms' document frequencies add up to at most this (rarest first): it
#: bounds one keyword query's work at any corpus size (~25 ms at FTS5's ~2.5 us per posting).
BM25_MAX_QUERY_POSTINGS = 10_000
#: When pruning dropped query terms, this many best candidates get their exact BM25 score with every term.
BM25_RESCORE_POOL = 200


@dataclass(frozen=True)
class PruningPolicy:
    """When and how much to prune (RAG_BM25_PRUNE_MIN_CHUNKS and this module's constants); `max_df_fraction =
    1` with no posting budget prunes nothing."""

    min_chunks: int
    max_df_fraction: float
    min_terms: int
    max_postings: int | None = None
    #: Best candidates of a pruned query rescored with every term (persistence/bm25.py); 0 = none.
    rescore_pool: int = 0

    def applies(self, total_chunks: int) -> bool:
        """Whether a corpus of this size is pruned at all."""
        prunes = self.max_df_fraction < 1.0 or self.max_postings is not None
        return prunes and total_chunks >= self.min_chunks


def pruning_policy(settings: Settings) -> PruningPolicy:
    """The pruning policy: from RAG_BM25_PRUNE_MIN_CHUNKS chunks on, this module's constants."""
    return PruningPolicy(
        settings.bm25_prune_min_chunks,
        BM25_MAX_DF_FRACTION,
        BM25_MIN_QUERY_TERMS,
        BM25_MAX_QUERY_POSTINGS,
        BM25_RESCORE_POOL,
    )


def prune_terms(
    terms: Sequence[str], frequencies: Mapping[str, int], total: int, policy: PruningPolicy
) -> list[str]:
    """The terms to search, in their query order: those in at most `max_df_fraction` of `total` chunks whose
    frequencies, rarest first, fit in `max_postings`; at least the `min_terms` rarest. A term absent from
    `frequencies` counts as unseen (df 0)."""
    if not terms or total <= 0:
        return list(terms)

    def df(term: str) -> int:
        return frequencies.get(term, 0)

    rarest = sorted(terms, key=lambda term: (df(term), terms.index(term)))
    limit = policy.max_df_fraction * total
    budget = policy.max_postings
    kept: set[str] = set()
    spent = 0
    for term in rarest:
        within = df(term) <= limit and (budget is None or spent + df(term) <= budget)
        if not within and len(kept) >= policy.min_terms:
            break
        kept.add(term)
        spent += df(term)
    return [term for term in terms if term in kept]
