"""The seed API's request and response bodies (docs/api-seed.md), served beside the engine's own.

A contract of its own: seed clients bound `query` and `top_k` differently and read a differently shaped
answer. The notes assistant's camelCase reflection switches (`enableReflection`, ...) are aliases of the
engine's one knob of the same meaning.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from config.settings import RetryStrategy
from service.api.schemas import (
    ID_PATTERN,
    MAX_SYSTEM_PROMPT_CHARS,
    DirectoryScope,
    GenerateRequest,
    QueryChecks,
    RerankSwitch,
    TenantId,
)
from state.answer_record import Band

SeedMode = Literal["simple", "advanced", "precise"]
#: The seed's bounds. SEED_MAX_QUERY_CHARS is the seed contract's documented bound, not a second owner of
#: the query limit: the routes check RAG_MAX_QUERY_CHARS too (schemas.check_query_chars), so a lower engine
#: limit wins and this bound never lets through a question the engine refuses.
SEED_MAX_QUERY_CHARS = 2000
SEED_MAX_TOP_K = 20
MAX_MODEL_NAME_CHARS = 200


class QueryRequest(QueryChecks):
    """One question, the seed API's QueryRequest plus the engine's per-request switches (all optional)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=SEED_MAX_QUERY_CHARS, description="The question.")
    conversation_id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="The conversation: its history is used to rewrite the question and in the prompt (a new "
        "one when omitted; the response's metadata.conversation_id names it).",
    )
    tenant_id: TenantId = Field(None, description="Tenant whose documents are searched (the key's tenant).")
    mode: SeedMode = Field(
        "simple",
        description="simple: standard hybrid search; advanced: three rewritten queries, top_k/3 each; "
        "precise: hybrid weighted 0.8 dense / 0.2 BM25.",
    )
    top_k: int = Field(5, ge=1, le=SEED_MAX_TOP_K)
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="Sampling temperature of the answer.")
    include_sources: bool = Field(True, description="Return the sources (else `sources` is empty).")
    stream: bool = Field(False, description="Answer as Server-Sent Events (as /query-stream does).")
    model: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_MODEL_NAME_CHARS,
        description="Generation model: one of the configured ones (RAG_LLM_MODEL, RAG_GRADER_MODEL, "
        "RAG_API_MODELS).",
    )
    system_prompt: str | None = Field(None, max_length=MAX_SYSTEM_PROMPT_CHARS)
    enable_citations: bool = Field(True, description="Cite sources with [n] markers and `citations`.")
    enable_hallucination_detection: bool = Field(
        True, description="Report answer sentences their sources do not support (metadata.features)."
    )
    enable_self_rag: bool | None = Field(
        None,
        validation_alias=AliasChoices("enable_self_rag", "enableReflection"),
        description="Grade and revise the answer (default: RAG_SELF_RAG); each grade is reported. Seed "
        "003: enableReflection.",
    )
    enable_hyde: bool | None = Field(
        None,
        validation_alias=AliasChoices("enable_hyde", "enableHyDE"),
        description="true: search with a hypothetical answer passage; false: never; default: the strategy "
        "decides (RAG_HYDE). Also accepted as enableHyDE.",
    )
    enable_query_rewriting: bool | None = Field(
        None,
        validation_alias=AliasChoices("enable_query_rewriting", "enableQueryRewriting"),
        description="false: the first search is the question as asked (no rewritten queries); true: "
        "rewritten by strategy; default: RAG_REWRITE. Retries follow retry_strategy. Also "
        "accepted as enableQueryRewriting.",
    )
    max_reflection_rounds: int | None = Field(
        None,
        ge=1,
        le=10,
        validation_alias=AliasChoices("max_reflection_rounds", "maxReflectionRounds"),
        description="Answer attempts, each graded once, and retrieval rounds, at most (default: "
        "RAG_MAX_ITERATIONS). Also accepted as maxReflectionRounds.",
    )
    retry_strategy: RetryStrategy | None = Field(
        None,
        validation_alias=AliasChoices("retry_strategy", "retryStrategy"),
        description="What a retrieval retry does: expand (the same queries, a larger k) | rewrite (new "
        "queries) | both (default: RAG_RETRY_STRATEGY). Also accepted as retryStrategy.",
    )
    filters: dict[str, Any] | None = Field(
        None, description="Metadata filter (the engine's filter language)."
    )
    rerank: RerankSwitch = None
    directory: DirectoryScope = None


class SourceInfo(BaseModel):
    """A passage the answer rests on."""

    id: str
    title: str
    content: str
    score: float
    source: str
    citation_id: str = Field(description="The source's citation label, `[n]`: the answer's marker for it.")


class CitationInfo(BaseModel):
    """One citation marker of the answer."""

    citation_num: int
    source_id: str
    confidence: float = Field(
        description="The answer's calibrated confidence, 0-1: the probability that its short answer is "
        "right (the same value on every citation of one answer; `band` says what the engine made of it)."
    )


class QueryResponse(BaseModel):
    """The seed API's answer body."""

    answer: str
    sources: list[SourceInfo]
    query: str
    rewritten_query: str = Field(
        description="The question as it was searched (the question itself when it was not rewritten)."
    )
    retrieved_count: int
    generation_time: float = Field(description="Seconds from the request to the answer.")
    citations: list[CitationInfo]
    metadata: dict[str, Any] = Field(
        description="The run: conversation, answer id, mode, model, strategy, `not_found`, `confidence` (the "
        "answer's calibrated confidence, null when no answer was written), `not_found_reason`, features, "
        "timings, usage."
    )
    band: Band | None = Field(
        None,
        description="confident: the answer opens with its short answer; tentative: not sure, the answer is "
        "the closest sentence the sources support; not_found: no document holds the answer "
        "(metadata.not_found_reason says why).",
    )


class SearchRequest(QueryChecks):
    """POST /api/v1/search: retrieval only, no answer."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=SEED_MAX_QUERY_CHARS)
    tenant_id: TenantId = None
    mode: Literal["hybrid", "dense", "bm25", "simple", "advanced", "precise"] = Field(
        "hybrid",
        description="hybrid | dense | bm25 (the searcher's modes); simple = hybrid; precise = hybrid "
        "weighted 0.8 dense / 0.2 BM25; advanced = hybrid (one query: no model rewrite on this route).",
    )
    filters: dict[str, Any] | None = None
    top_k: int = Field(5, ge=1, le=SEED_MAX_TOP_K)
    rerank: bool | None = Field(
        None, description="Rerank the fused candidates with the generation model (default RAG_SEARCH_RERANK)."
    )
    collection: str | None = Field(None, max_length=64)
    directory: DirectoryScope = None


class RAGRequest(GenerateRequest):
    """POST /api/v1/rag/generate and /generate/stream: the engine's GenerateRequest plus `stream`."""

    stream: bool = Field(False, description="Answer as Server-Sent Events (as /generate/stream does).")


class RAGCitation(BaseModel):
    """One cited passage of a RAGResponse: its marker number and the passage it resolves to."""

    source_id: int = Field(description="The citation's number, the answer's [n] marker.")
    chunk_id: str
    content: str = Field(description="The passage's text.")
    score: float = Field(description="The passage's retrieval score.")
    document_id: str | None
    filename: str | None = Field(description="The source file's name (no directories).")
    page: int | None = Field(description="The page, when the source has pages (else null).")
    url: str | None = Field(description="The passage's `url` metadata, when it has one.")


class RAGMetadata(BaseModel):
    """A RAGResponse's metadata: per-stage seconds, passages found, the model and its token usage."""

    total_time: float = Field(description="Seconds from the request to the answer.")
    rewrite_time: float = Field(description="Seconds spent rewriting the question (rewrite, reformulate).")
    retrieve_time: float = Field(description="Seconds spent searching.")
    generate_time: float = Field(description="Seconds spent writing the answer.")
    chunks_found: int
    model: str
    usage: dict[str, int] = Field(description="prompt_tokens, completion_tokens, total_tokens.")
