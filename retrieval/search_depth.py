"""How deep and how wide a search goes: constants the graph's retrieve node and the searcher share.

A module of its own, free of heavy imports, so the graph can read them without loading the stores.
"""

from __future__ import annotations

#: Candidates each retriever (dense, keyword) hands to fusion: deep enough for RRF to find agreement below
#: the top few, bounded so one query's work stays small.
CANDIDATE_K = 100
#: (dense, BM25) fusion weights of mode=precise runs: the RAG engine design's precise mode leans on the
#: embedding match and keeps BM25 as a tie-breaker.
PRECISE_WEIGHTS = (0.8, 0.2)
#: Search queries of a mode=advanced run's first round (the question, then rewrites), each taking
#: top_k / this many results (rounded up); merged by chunk id, best score first (the design's 3 queries).
ADVANCED_QUERIES = 3
