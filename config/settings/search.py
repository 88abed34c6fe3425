"""Settings of search: retrievers, fusion weights, keyword-index pruning, reranking and the query limit.
One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, Field, model_validator

SearchMode = Literal["dense", "bm25", "hybrid"]
#: Where searches find passages: the knowledge base, or canned passages (retrieval/mock_retriever.py).
RetrieverKind = Literal["store", "mock"]


class SearchSettings(BaseModel):
    """How a query finds passages."""

    top_k: int = Field(
        5,
        ge=1,
        le=100,
        description="Results of a search, and passages the graph retrieves per query.",
    )
    search_mode: SearchMode = Field("hybrid", description="dense | bm25 | hybrid.")
    filter_max_conditions: int = Field(
        100,
        ge=1,
        # Chroma and SQLite refuse an expression about 1,000 levels deep; 500 leaves room for the search's.
        le=500,
        description="Conditions a metadata filter may hold in all ($and / $or and field conditions, at any "
        "depth); a larger filter is refused as bad input (retrieval/filters.py).",
    )
    retriever: RetrieverKind = Field(
        "store",
        description="store = the knowledge base | mock = deterministic canned passages, no store opened "
        "(retrieval/mock_retriever.py: the built-in set, or RAG_MOCK_PASSAGES).",
    )
    enabled: bool = Field(
        True,
        description="Retrieval from the knowledge base (RAG_ENABLED). false: every "
        "search goes to the mock retriever (as RAG_RETRIEVER=mock: its passages ranked by similarity "
        "to the query, no store, no embedding model) and the graph answers from them. To answer from the "
        "model alone, with no passages at all, set RAG_RETRIEVAL=false.",
    )
    retrieval: bool = Field(
        True,
        description="Retrieval-augmented generation on (RAG_RETRIEVAL). false: every graph answers from the "
        "model alone, opening no store (no search, no memories, no semantic cache), and the answer says "
        "that no documents were consulted; the run's context field `retrieval`.",
    )
    mock_passages: Path | None = Field(
        None,
        description="JSON list of the mock retriever's passages ({text, source, title, section, tenant, "
        "conversation_id, metadata, ...}); unset = its built-in set. Read on the first search.",
    )
    rerank: bool = Field(
        False,
        description="Rerank every search of a graph run (per request `rerank`): the generation model scores "
        "RERANK_CANDIDATES fused candidates in one call and the best top_k go on (retrieval/rerank.py; "
        "docs/api-seed.md measures it).",
    )
    search_rerank: bool = Field(
        False,
        description="Default of /api/v1/search's `rerank` (as RAG_RERANK, for the search route).",
    )
    bm25_prune_min_chunks: int = Field(
        20_000,
        ge=0,
        description="Keyword index size (chunks) from which queries drop their most common terms "
        "(persistence/keyword_pruning.py; `python -m benchmarks keyword-pruning`).",
    )
    mmr_enabled: bool = Field(False, description="Re-rank fused results with maximal marginal relevance.")
    mmr_lambda: float = Field(0.7, ge=0.0, le=1.0, description="MMR trade-off: 1 = relevance only.")
    similarity_threshold: float = Field(
        0.0, ge=-1.0, le=1.0, description="Dense hits below this cosine similarity are dropped."
    )
    max_query_chars: int = Field(
        4000,
        ge=1,
        # Every interface reads this one limit, so none accepts a question another part refuses.
        description="Longer queries and questions are refused with a clear error, by every interface "
        "(search, graph runs, the CLI and the API).",
    )

    @model_validator(mode="after")
    def _disabled_means_mock(self) -> Self:
        """RAG_ENABLED=false selects the mock retriever, whatever RAG_RETRIEVER says: the one place that
        decides which searcher a process uses (nodes.resources) reads `retriever`."""
        if not self.enabled:
            object.__setattr__(self, "retriever", "mock")
        return self
