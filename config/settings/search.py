"""Settings of search: retrievers, fusion weights, keyword-index pruning, reranking and the query limit.
One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import AliasChoices, BaseModel, Field, model_validator

SearchMode = Literal["dense", "bm25", "hybrid"]
#: Where searches find passages: the knowledge base, or canned passages (retrieval/mock_retriever.py).
RetrieverKind = Literal["store", "mock"]


class SearchSettings(BaseModel):
    """How a query finds passages."""

    top_k: int = Field(
        5,
        ge=1,
        le=100,
        description="Results of a search, and passages the graph retrieves per query (one default for both; "
        "benchmarks that need deeper lists pass k explicitly).",
    )
    candidate_k: int = Field(100, ge=1, le=5000, description="Candidates each retriever hands to fusion.")
    hybrid_search_threads: int = Field(
        8,
        ge=0,
        le=64,
        description="Threads that run the keyword half of hybrid searches while the dense half runs in the "
        "caller's (0 = one after the other); shared by the process.",
    )
    search_mode: SearchMode = Field("hybrid", description="dense | bm25 | hybrid.")
    directory_max_documents: int = Field(
        1000,
        ge=1,
        le=10_000,
        description="Documents a directory scope may hold (its sources become one `$in` condition of the "
        "search); a larger directory is refused with this name: scope a deeper directory or raise it.",
    )
    filter_max_conditions: int = Field(
        100,
        ge=1,
        # Chroma and SQLite refuse an expression about 1,000 levels deep ("Expression tree is too large"),
        # which a $or of ~985 members already is; 500 leaves room for the search's own clauses.
        le=500,
        description="Conditions a metadata filter may hold in all: every $and / $or (an object of several "
        "fields is one $and) and every field condition, at any depth. A larger filter is refused as bad "
        "input (422, CLI error) before any store sees it (retrieval/filters.py).",
    )
    retriever: RetrieverKind = Field(
        "store",
        description="store = the knowledge base (Chroma and the keyword index) | mock = deterministic canned "
        "passages, no store opened (retrieval/mock_retriever.py: the built-in set, or RAG_MOCK_PASSAGES), "
        "for the graph, `rag search` and the API's search, scoped by tenant, filters and conversation.",
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
    rrf_k: int = Field(60, ge=1, description="Reciprocal rank fusion constant.")
    dense_weight: float = Field(1.0, ge=0.0, description="Weight of the dense ranking in fusion.")
    bm25_weight: float = Field(1.0, ge=0.0, description="Weight of the BM25 ranking in fusion.")
    precise_dense_weight: float = Field(
        0.8, ge=0.0, description="Weight of the dense ranking in fusion for mode=precise runs (seed 001)."
    )
    precise_bm25_weight: float = Field(
        0.2, ge=0.0, description="Weight of the BM25 ranking in fusion for mode=precise runs (seed 001)."
    )
    advanced_queries: int = Field(
        3,
        ge=1,
        le=10,
        description="Search queries of a mode=advanced run's first round (the question, then rewrites), each "
        "taking top_k / this many results (rounded up); merged by chunk id, best score first (seed 001).",
    )
    rerank: bool = Field(
        False,
        description="Rerank every search of a graph run (RAG_RERANK; per request `rerank`): each takes "
        "RAG_RERANK_CANDIDATES fused candidates, the generation model scores them in one call "
        "(retrieval/rerank.py) and the best top_k go on to grading and the answer, in the model's "
        "order. Off by default: see docs/api-seed.md's measurement of what it costs and gains.",
    )
    search_rerank: bool = Field(
        False,
        description="Default of /api/v1/search's `rerank`: the fused candidates reordered by the generation "
        "model in one batched scoring call (retrieval/rerank.py; off: see docs/api-seed.md's measurement).",
    )
    rerank_candidates: int = Field(
        20, ge=2, le=100, description="Fused candidates a rerank sends to the model in its one prompt."
    )
    rerank_passage_chars: int = Field(
        500, ge=50, le=4000, description="Characters of each candidate a rerank prompt shows the model."
    )
    cjk_dense_weight_factor: float = Field(
        0.2,
        ge=0.0,
        description="Factor on the dense fusion weight for Chinese/Japanese queries when the embedding model "
        "is English-only (minilm): its vectors barely rank CJK text (CMRC 2018 Recall@5 0.39 vs BM25 0.995).",
    )
    bm25_title_weight: float = Field(1.0, ge=0.0, description="BM25 weight of the title field vs the body.")
    bm25_prune_min_chunks: int = Field(
        20_000,
        ge=0,
        description="Keyword index size (chunks) from which queries drop their most common terms (SQLite "
        "FTS5 and Postgres BM25; smaller indexes rank with every term). See persistence/keyword_pruning.py, "
        "`rag eval scale`, `rag eval keyword-pruning`.",
    )
    bm25_max_df_fraction: float = Field(
        0.1,
        gt=0.0,
        le=1.0,
        description="On a pruned index, query terms found in more than this share of the chunks are dropped "
        "(1 = never): their posting lists are the cost of a query, their IDF is low.",
    )
    bm25_min_query_terms: int = Field(
        2, ge=1, description="Rarest query terms kept when pruning would leave fewer."
    )
    bm25_max_query_postings: int = Field(
        10_000,
        ge=0,
        description="On a pruned index, the kept query terms' document frequencies add up to at most this "
        "(rarest first; 0 = no budget): it bounds one keyword query's work at any corpus size.",
    )
    bm25_rescore_pool: int = Field(
        200,
        ge=0,
        le=5000,
        description="When pruning dropped query terms, this many best candidates get their exact BM25 score "
        "with every term (0 = rank by the kept terms only). See persistence/bm25.py.",
    )
    mmr_enabled: bool = Field(False, description="Re-rank fused results with maximal marginal relevance.")
    mmr_lambda: float = Field(0.7, ge=0.0, le=1.0, description="MMR trade-off: 1 = relevance only.")
    similarity_threshold: float = Field(
        0.0, ge=-1.0, le=1.0, description="Dense hits below this cosine similarity are dropped."
    )
    max_query_chars: int = Field(
        4000,
        ge=1,
        # The one owner of the limit: search, start_turn (the context's max_question_chars), the CLI and
        # the API's routes all read it, so no interface accepts a question another part refuses.
        # RAG_MAX_QUESTION_CHARS is the name the graph's context always read and RAG_API_MAX_QUERY_CHARS the
        # API's former limit of its own (5000, which let 4001-5000 character questions fail inside the graph).
        validation_alias=AliasChoices(
            "max_query_chars", "RAG_MAX_QUERY_CHARS", "RAG_MAX_QUESTION_CHARS", "RAG_API_MAX_QUERY_CHARS"
        ),
        description="Longer queries and questions are refused with a clear error, by every interface "
        "(RAG_MAX_QUERY_CHARS; also read as RAG_MAX_QUESTION_CHARS or RAG_API_MAX_QUERY_CHARS).",
    )

    @model_validator(mode="after")
    def _disabled_means_mock(self) -> Self:
        """RAG_ENABLED=false selects the mock retriever, whatever RAG_RETRIEVER says: the one place that
        decides which searcher a process uses (nodes.resources) reads `retriever`."""
        if not self.enabled:
            object.__setattr__(self, "retriever", "mock")
        return self
