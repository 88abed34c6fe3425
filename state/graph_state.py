"""The graph's typed state: what callers pass (InputState), what nodes share (State), what comes out
(OutputState), and the named reducers that merge node updates.

Per-turn fields carry `PerTurn(empty)` in their Annotated type (before any reducer: LangGraph takes the last
item as the reducer); `start_turn` resets each every turn (`turn_reset`), reducer fields through LangGraph's
`Overwrite`, so only the conversation, the owner and the conversation's ids carry over between turns.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, NotRequired, get_type_hints

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from langgraph.types import Overwrite
from typing_extensions import TypedDict  # not typing's: JSON schemas need it on Python < 3.12 (see schemas)

from state.answer_record import AnswerRecord, Band
from state.schemas import AnswerCandidate, Citation, RetrievedDoc, SearchQuery

RetrievalDecision = Literal["generate", "reformulate", "not_found"]
AnswerAction = Literal["accept", "retrieve", "regenerate", "give_up"]

#: A reset placeholder that checkpointed threads may still hold; reducers read it as "empty".
LEGACY_RESET = "__reset__"


def reset(value: Any) -> Overwrite:
    """An update that sets a reducer-managed field to `value`, bypassing its reducer. Not for a None empty:
    an unset channel would store the wrapper itself."""
    return Overwrite(value)


@dataclass(frozen=True)
class PerTurn:
    """Annotated metadata of a per-turn field: `start_turn` sets it to (a copy of) `empty` every turn:
    metadata on the field, not a list in start_turn, so a new field decides "reset or carry over" where it
    is added (a hand-kept list drifted)."""

    empty: Any


@cache
def per_turn_fields(schema: type) -> dict[str, tuple[Any, bool]]:
    """Each `PerTurn` field of a state schema: (its empty value, whether a reducer merges its updates)."""
    found: dict[str, tuple[Any, bool]] = {}
    for name, hint in get_type_hints(schema, include_extras=True).items():
        metadata: tuple[Any, ...] = getattr(hint, "__metadata__", ())
        marker = next((item for item in metadata if isinstance(item, PerTurn)), None)
        if marker is not None:
            found[name] = (marker.empty, callable(metadata[-1]) and not isinstance(metadata[-1], PerTurn))
    return found


def turn_reset(schema: type | None = None) -> dict[str, Any]:
    """The update that resets every per-turn field of `schema` (default State) to its empty value."""
    update: dict[str, Any] = {}
    for name, (empty, reduced) in per_turn_fields(schema or State).items():
        value = copy.deepcopy(empty)  # [] and {} must not be shared between turns
        update[name] = reset(value) if reduced and value is not None else value
    return update


def _value(current: Any, empty: Any) -> Any:
    """The channel's value, or `empty` when unset or holding a legacy reset placeholder."""
    return empty if current is None or (isinstance(current, str) and current == LEGACY_RESET) else current


def merge_documents(current: list[RetrievedDoc] | None, update: list[RetrievedDoc]) -> list[RetrievedDoc]:
    """Union by chunk id, keeping the better-scored copy. Fan-out retrievals merge here."""
    merged: dict[str, RetrievedDoc] = {doc["chunk_id"]: doc for doc in _value(current, [])}
    for doc in update:
        kept = merged.get(doc["chunk_id"])
        if kept is None or doc["score"] > kept["score"] or doc["relevance"] > kept["relevance"]:
            merged[doc["chunk_id"]] = doc
    return sorted(merged.values(), key=lambda doc: doc["score"], reverse=True)


def add_count(current: int | None, update: int) -> int:
    """Counter: adds increments. Loop bounds read these counters."""
    return int(_value(current, 0)) + int(update)


def add_numbers(current: dict[str, float] | None, update: dict[str, float]) -> dict[str, float]:
    """Per-key sums (timings in ms, token usage)."""
    merged = dict(_value(current, {}))
    for key, value in update.items():
        merged[key] = merged.get(key, 0) + value
    return merged


def extend_or_reset(current: list[Any] | None, update: list[Any]) -> list[Any]:
    """Append-only list (queries run, trace); start_turn resets it with `reset([])`."""
    return [*_value(current, []), *update]


def merge_metadata(current: dict[str, Any] | None, update: dict[str, Any] | None) -> dict[str, Any]:
    """Per-key update (a turn that gives `character_id` keeps the earlier `background_id`)."""
    return {**_value(current, {}), **(update or {})}


def keep_best_answer(
    current: AnswerCandidate | None, update: AnswerCandidate | None
) -> AnswerCandidate | None:
    """The best-graded answer so far (ties go to the later one); None clears."""
    if update is None:
        return None
    current = _value(current, None)
    if current is None or update["score"] >= current["score"]:
        return update
    return current


class InputState(TypedDict, total=False):
    """What a caller passes: a question (or messages), and optional scoping."""

    question: str
    """The user's question for this turn (or the last human message of `messages`)."""
    messages: Annotated[list[AnyMessage], add_messages]
    conversation_id: str
    """The turn's conversation: scopes memories, summaries, the director and (by default) retrieval."""
    conversation_scopes_retrieval: bool
    """Whether `conversation_id` also scopes retrieval (absent: True; False for the seed API's /query)."""
    tenant: str
    """Optional: must equal the run's context tenant, the one source of truth (else InvalidQuestionError),
    so no input reaches another tenant's documents or threads."""
    filters: dict[str, Any]
    """Metadata filter in the Chroma-like language of retrieval.filters."""
    conversation_metadata: Annotated[dict[str, Any], merge_metadata]
    """The conversation's ids (`character_id`, `background_id`, `related_plot_id`), kept on its memories."""


class OutputState(TypedDict, total=False):
    """What a run returns."""

    question: str
    standalone_question: str
    answer: Annotated[str, PerTurn("")]
    short_answer: Annotated[str, PerTurn("")]
    """The short answer `answer` starts with, without markers ("" when there is none)."""
    citations: Annotated[list[Citation], PerTurn([])]
    sources: Annotated[list[RetrievedDoc], PerTurn([])]
    """The passages the answer cites, renumbered to match its [n] markers."""
    retrieved: Annotated[list[RetrievedDoc], PerTurn([])]
    """Every passage retrieved this turn, best first, cited or not."""
    renderings: Annotated[dict[str, str], PerTurn({})]
    unsupported_sentences: Annotated[list[str], PerTurn([])]
    strategy: Annotated[str, PerTurn("")]
    analysis: Annotated[dict[str, Any], PerTurn({})]
    not_found: Annotated[bool, PerTurn(False)]
    not_found_reason: Annotated[str, PerTurn("")]
    """Why the answer is "not found", in plain words ("" when answered)."""
    confidence: Annotated[float | None, PerTurn(None)]
    """Calibrated probability that the short answer is right; None when no answer was judged."""
    band: Annotated[Band, PerTurn("not_found")]
    answer_record: Annotated[AnswerRecord | None, PerTurn(None)]
    """The shown answer's judged record (None when unjudged); before cite, the record generate judged its
    draft by when its read gate did (None otherwise), which grade_answer and cite then reuse."""
    answer_grade: Annotated[dict[str, Any], PerTurn({})]
    retrieval_rounds: Annotated[int, PerTurn(0), add_count]
    generation_rounds: Annotated[int, PerTurn(0), add_count]
    llm_calls: Annotated[int, PerTurn(0), add_count]
    timings_ms: Annotated[dict[str, float], PerTurn({}), add_numbers]
    usage: Annotated[dict[str, float], PerTurn({}), add_numbers]
    prompt_info: Annotated[dict[str, Any], PerTurn({})]
    error: Annotated[str, PerTurn("")]
    messages: Annotated[list[AnyMessage], add_messages]
    cache_hit: bool
    answer_id: Annotated[str, PerTurn("")]
    """The recorded answer's id, what a caller rates it by (`rag feedback`); "" when not recorded."""


class State(InputState, OutputState, total=False):
    """Everything nodes share during a run."""

    queries: Annotated[list[SearchQuery], PerTurn([])]
    """Queries of the current retrieval round (fanned out with Send)."""
    retrieval_depth: Annotated[int, PerTurn(1)]
    """Factor on each query's k in the current round, grown by expanding retries."""
    queries_run: Annotated[list[str], PerTurn([]), extend_or_reset]
    documents: Annotated[list[RetrievedDoc], PerTurn([]), merge_documents]
    hops: Annotated[int, PerTurn(0), add_count]
    retrieval_score: Annotated[float, PerTurn(0.0)]
    missing_terms: Annotated[list[str], PerTurn([])]
    retrieval_decision: Annotated[RetrievalDecision, PerTurn("generate")]
    """What grade_retrieval decided (the router only reads it)."""
    evidence: Annotated[list[RetrievedDoc], PerTurn([])]
    """The compressed sentences the reader gets, one entry per chunk; empty when compression is off."""
    recalled_memories: Annotated[list[RetrievedDoc] | None, PerTurn(None)]
    """The memories recalled for this turn; None until nodes.recall_memories looks."""
    director_events: Annotated[list[RetrievedDoc] | None, PerTurn(None)]
    """The director's events for this turn; None until generate first looks."""
    draft: Annotated[str, PerTurn("")]
    best_answer: Annotated[AnswerCandidate | None, PerTurn(None), keep_best_answer]
    answer_score: float
    stalled_revisions: Annotated[int, PerTurn(0)]
    """Answer attempts in a row that scored no better than the best one before them."""
    next_action: Annotated[AnswerAction, PerTurn("accept")]
    """What grade_answer decided (the router only reads it)."""
    owner_tenant: str
    """Tenant of the thread's first turn, which owns the thread: set once by start_turn, never reset;
    not an input, so callers cannot set it."""
    cache_key: dict[str, Any]
    """What cache_lookup looked up on a miss: record_turn stores the answer under it."""
    turn_started_at: float
    """Epoch seconds at which the turn started (set by cache_lookup)."""


def retrieval_conversation(state: State) -> str:
    """The conversation id retrieval is scoped to ('' when `conversation_scopes_retrieval` is False)."""
    if state.get("conversation_scopes_retrieval") is False:
        return ""
    return state.get("conversation_id") or ""


class RetrieveTask(TypedDict):
    """The input of one fanned-out retrieval (sent with `Send("retrieve", task)`)."""

    query: SearchQuery
    tenant: str
    filters: dict[str, Any]
    conversation_id: str
    wants_details: bool
    depth: NotRequired[int]  # State.retrieval_depth; 1 when absent
