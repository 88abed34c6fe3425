"""How deep and how wide a search goes: constants the retrieve node and the searcher share (no heavy
imports).
"""

from __future__ import annotations

#: Candidates each retriever (dense, keyword) hands to fusion.
CANDIDATE_K = 100
#: (dense, BM25) fusion weights of mode=precise runs: BM25 as a tie-breaker.
PRECISE_WEIGHTS = (0.8, 0.2)
#: Search queries of a mode=advanced run's first round, each taking top_k / this many results (rounded up).
ADVANCED_QUERIES = 3
