"""Request and response bodies of the HTTP API: static bounds here (a 422 naming the field before any work);
the limits an operator tunes are settings, checked in the routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from persistence.vector_store import validate_collection_name
from retrieval.conversation_summary import conversation_metadata as checked_ids
from retrieval.directory_scope import DirectoryError, normalize_directory
from retrieval.filters import FilterError, parse_filter
from service.api.errors import ApiError
from state.answer_record import Band

AnswerMode = Literal["auto", "simple", "advanced", "precise"]
RewriteMethod = Literal["auto", "multi", "hyde", "decomposition", "decompose", "expand", "none"]
#: Ids of threads and conversations: what a URL, a log line and a SQLite key can all carry.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$"
#: Static bounds of a request: top_k, completion tokens, system prompt and questions of one batch (the
#: query's one limit is RAG_MAX_QUERY_CHARS, checked by `check_query_chars`).
MAX_TOP_K = 50
MAX_COMPLETION_TOKENS = 4096
MAX_SYSTEM_PROMPT_CHARS = 4000
MAX_BATCH = 50
#: Questions of one batch answered at once: a batch shares the worker pool with single requests.
BATCH_CONCURRENCY = 4


def check_query_chars(query: str, max_chars: int) -> None:
    """Refuse (422 naming `query`) a query longer than RAG_MAX_QUERY_CHARS, the graph's own limit."""
    if len(query) > max_chars:
        raise ApiError(
            422, "ValidationError", f"query: at most {max_chars} characters (RAG_MAX_QUERY_CHARS)", "query"
        )


def _tenant(value: str | None) -> str | None:
    return None if value is None else validate_collection_name(value, "tenant")


#: A tenant named in a request body: checked like every tenant name (letters, digits, `._-`).
TenantId = Annotated[str | None, AfterValidator(_tenant)]
#: A run's directory scope (normalised by QueryChecks).
DirectoryScope = Annotated[
    str | None,
    Field(
        max_length=4096,
        description="Search only documents whose source path is this absolute directory or lies under it "
        "(whole path components, no '..'; the paths GET /api/v1/documents lists).",
    ),
]
#: A run's rerank switch.
RerankSwitch = Annotated[
    bool | None,
    Field(
        description="Rerank every search of this run with the generation model before grading and the "
        "answer: RERANK_CANDIDATES fused candidates scored in one call, the top_k best kept in its order "
        "(default: RAG_RERANK, off)."
    ),
]


class QueryChecks(BaseModel):
    """The checks of every request that carries a question, a filter or a directory (422 before any run)."""

    @field_validator("query", check_fields=False)
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is blank")
        return value

    @field_validator("filters", check_fields=False)
    @classmethod
    def _valid_filters(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        try:
            parse_filter(value)
        except FilterError as error:
            raise ValueError(str(error)) from None
        return value

    @field_validator("directory", check_fields=False)
    @classmethod
    def _valid_directory(cls, value: str | None) -> str | None:
        """The directory scope normalised (retrieval.directory_scope), or a 422 naming what is wrong."""
        if value is None:
            return None
        try:
            return normalize_directory(value) or None
        except DirectoryError as error:
            raise ValueError(str(error)) from None


class GenerateRequest(QueryChecks):
    """One question and how to answer it."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1, description="The question (at most RAG_MAX_QUERY_CHARS characters, 4000 by default)."
    )
    tenant_id: TenantId = Field(None, description="Tenant whose documents are searched (the key's tenant).")
    thread_id: str | None = Field(
        None, pattern=ID_PATTERN, description="Conversation thread (new if omitted)."
    )
    conversation_id: str | None = Field(None, pattern=ID_PATTERN, description="Scope retrieval to it.")
    user_id: str | None = Field(
        None,
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f]*$",
        description="Who asks, recorded beside the tenant in the tables (default: RAG_DEFAULT_USER).",
    )
    mode: AnswerMode = "auto"
    rewrite_method: RewriteMethod = "auto"
    top_k: int = Field(5, ge=1, le=MAX_TOP_K)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=16, le=MAX_COMPLETION_TOKENS)
    system_prompt: str | None = Field(None, max_length=MAX_SYSTEM_PROMPT_CHARS)
    include_citations: bool = True
    filters: dict[str, Any] | None = None
    directory: DirectoryScope = None
    use_cache: bool = True
    rerank: RerankSwitch = None
    conversation_metadata: dict[str, str | int | None] | None = Field(
        None,
        description="The conversation's ids (character_id, background_id, related_plot_id): kept on its "
        "memory chunks when it is summarized into the store; a later turn replaces only the ids it gives.",
    )

    @field_validator("conversation_metadata")
    @classmethod
    def _known_ids(cls, value: dict[str, str | int | None] | None) -> dict[str, str | int | None] | None:
        checked_ids(value)  # InvalidConversationMetadataError is a ValueError: 422 naming it
        return value


class AnswerJudgement(BaseModel):
    """How sure the engine is of an answer, carried by every answer response."""

    confidence: float | None = Field(
        description="Calibrated probability, 0-1, that the answer's short answer is right (the answering "
        "package's calibrator over the run's signals); null when the run wrote no answer at all."
    )
    band: Band = Field(
        description="confident: the short answer is shown, first, with its cited explanation; tentative: "
        "not sure, the answer shows only the closest sentence the sources support; not_found: the documents "
        "hold no answer (`not_found` is true and `not_found_reason` says why)."
    )
    not_found_reason: str = Field(
        description='Why the answer is "not found", in plain words ("" unless band is not_found).'
    )


class BatchRequest(BaseModel):
    """Up to 50 questions: `requests` (GenerateRequests) or `queries` (the seed API's), not both."""

    model_config = ConfigDict(extra="forbid")

    requests: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_BATCH)
    queries: list[dict[str, Any] | str] | None = Field(None, min_length=1, max_length=MAX_BATCH)

    @model_validator(mode="after")
    def _one_body(self) -> BatchRequest:
        if self.queries is not None and self.requests:
            raise ValueError("give either requests or queries, not both")
        if self.queries is None and not self.requests:
            raise ValueError("requests: give at least one question (or the seed API's queries)")
        return self


class TextDocument(BaseModel):
    """Raw text (a note, a message, an event) indexed with explicit metadata."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=1_000_000)
    tenant_id: TenantId = None
    collection: str | None = None
    title: str = Field("", max_length=500)
    doc_id: str | None = Field(None, pattern=ID_PATTERN)
    event: bool = Field(False, description="Index as one unchunked chunk (a single event).")
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @field_validator("collection")
    @classmethod
    def _valid_collection(cls, value: str | None) -> str | None:
        return None if value is None else validate_collection_name(value)


class MemoryRequest(BaseModel):
    """A memory to keep for a tenant (and optionally a conversation); `content` is an alias of `text`."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=20_000, validation_alias=AliasChoices("text", "content"))
    tenant_id: TenantId = None
    conversation_id: str | None = Field(None, pattern=ID_PATTERN)
    kind: str = Field("note", max_length=64)
    metadata: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


class FeedbackRequest(BaseModel):
    """POST /api/v1/feedback: thumbs up or down on a recorded answer, with an optional comment."""

    model_config = ConfigDict(extra="forbid")

    answer_id: str = Field(
        pattern=r"^[A-Za-z0-9_-]{1,64}$", description="The answer's id (generate's `answer_id`)."
    )
    rating: Literal["up", "down"]
    comment: str = Field("", max_length=100_000)
    tenant_id: TenantId = None
    user_id: str | None = Field(
        None,
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f]*$",
        description="Who rates (default: RAG_DEFAULT_USER).",
    )


#: An id the conversation's memory chunks may carry (a string or an integer; "" / null = not given).
ConversationId = str | int | None


class SummarizeRequest(BaseModel):
    """POST /api/v1/conversations/{thread_id}/summarize: the tenant and the ids the memory carries."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: TenantId = None
    conversation_id: str | None = Field(
        None, pattern=ID_PATTERN, description="Conversation id of the memory (default: the thread's own)."
    )
    character_id: ConversationId = None
    background_id: ConversationId = None
    related_plot_id: ConversationId = None

    @model_validator(mode="after")
    def _valid_ids(self) -> SummarizeRequest:
        checked_ids(self.ids())
        return self

    def ids(self) -> dict[str, str | int | None]:
        """The ids given (the others are left to the thread's)."""
        values = {
            "character_id": self.character_id,
            "background_id": self.background_id,
            "related_plot_id": self.related_plot_id,
        }
        return {key: value for key, value in values.items() if value is not None}
