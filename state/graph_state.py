"""The graph's typed state: what callers pass (InputState), what nodes share (State), what comes out
(OutputState), and the named reducers that merge node updates.

Per-turn fields are declared once, here, with `PerTurn(empty)` in their Annotated type; `start_turn` sets each
to its empty value at the start of every turn (`turn_reset`), so a new per-turn field needs no edit there (the
checkpointer keeps a thread's state between turns, and only `messages`, the thread's owner and the
conversation's ids should carry over). Reducer-managed fields are reset with LangGraph's `Overwrite`
(`reset(value)`), which bypasses the reducer: no placeholder value ever reaches a channel, a streamed update
or a checkpoint. `PerTurn` goes before a reducer in the metadata: LangGraph takes the last item as the
reducer.
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

#: The placeholder that older versions wrote to reset a field; threads checkpointed by them may still hold
#: it, so reducers read it as "empty". Nothing writes it any more.
LEGACY_RESET = "__reset__"


def reset(value: Any) -> Overwrite:
    """An update that sets a reducer-managed field to `value`, bypassing its reducer (start_turn's reset).

    Only for fields whose type has an empty value (list, dict, int): LangGraph stores a channel's very first
    write as is, so on a field that starts unset (`best_answer`) the wrapper itself would be stored; that one
    is cleared by writing None, which its reducer understands."""
    return Overwrite(value)


@dataclass(frozen=True)
class PerTurn:
    """Annotated metadata of a per-turn field: `start_turn` sets it to (a copy of) `empty` every turn.

    Why metadata on the field rather than a list in start_turn: the schema is where a field is added, so the
    decision "reset each turn or carry over" is made there, once (a hand-kept list of ~37 names drifted)."""

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
    """The update that resets every per-turn field of `schema` (default State) to its empty value: reducer
    fields through `reset` (Overwrite), except an empty of None, which a reducer reads as "clear"
    (`keep_best_answer`; an unset channel would store the Overwrite wrapper itself, see `reset`)."""
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
    """Per-key update (a conversation's ids: a turn that gives `character_id` keeps the earlier
    `background_id`)."""
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
    """Conversation so far; the checkpointer keeps it per thread."""
    conversation_id: str
    """The turn's conversation: its memories and the tenant-wide ones are recalled, it summarizes itself
    (RAG_SUMMARY_EVERY_TURNS) and the director reads its events; and retrieval is scoped to its documents
    (plus a minority share from elsewhere) unless `conversation_scopes_retrieval` is False."""
    conversation_scopes_retrieval: bool
    """Whether `conversation_id` also scopes retrieval to the conversation's documents (absent: True).
    False for a conversation that is the thread's memory only, whose questions search the whole corpus
    (the seed API's /query). Kept between turns like `conversation_id`; a turn that gives it replaces it."""
    tenant: str
    """Optional, and never an override: the run's context (`Context.tenant`) is the one source of truth for
    the tenant. An input `tenant` equal to the context's is accepted; one that differs is refused
    (start_turn raises InvalidQuestionError naming both), so a caller cannot reach another tenant's documents
    or threads by putting a tenant in the input."""
    filters: dict[str, Any]
    """Metadata filter in the Chroma-like language of retrieval.filters."""
    conversation_metadata: Annotated[dict[str, Any], merge_metadata]
    """The conversation's ids (`character_id`, `background_id`, `related_plot_id`), kept on its memory chunks
    when it is summarized into the store (retrieval.conversation_index). Kept between turns; a turn that
    gives one replaces that one only."""


class OutputState(TypedDict, total=False):
    """What a run returns."""

    question: str
    standalone_question: str
    answer: Annotated[str, PerTurn("")]
    short_answer: Annotated[str, PerTurn("")]
    """The short answer `answer` starts with (a name, a number, a date, a few words, yes/no), without
    citation markers; "" when the answer is "not found" or opens with a sentence (retrieval.answer_text)."""
    citations: Annotated[list[Citation], PerTurn([])]
    sources: Annotated[list[RetrievedDoc], PerTurn([])]
    """The passages the answer cites, renumbered to match its [n] markers."""
    retrieved: Annotated[list[RetrievedDoc], PerTurn([])]
    """Every passage retrieved this turn, best first (what retrieval found, cited or not)."""
    renderings: Annotated[dict[str, str], PerTurn({})]
    """The cited answer rendered as markdown, html and plain text."""
    unsupported_sentences: Annotated[list[str], PerTurn([])]
    strategy: Annotated[str, PerTurn("")]
    analysis: Annotated[dict[str, Any], PerTurn({})]
    not_found: Annotated[bool, PerTurn(False)]
    not_found_reason: Annotated[str, PerTurn("")]
    """Why the answer is "not found", in plain words ("" when answered): nothing retrieved, nothing relevant,
    the store down, or the judgement's reason (answering.decision)."""
    confidence: Annotated[float | None, PerTurn(None)]
    """Calibrated probability (0-1) that the answer's short answer is right (answering.calibrator); None
    when no answer was judged (nothing retrieved, the store down, a cache hit of an unjudged answer)."""
    band: Annotated[Band, PerTurn("not_found")]
    """What the user is shown: confident (bold short answer and cited explanation), tentative ("not sure",
    the closest sentence of the sources) or not_found (with `not_found_reason`)."""
    answer_record: Annotated[AnswerRecord | None, PerTurn(None)]
    """The judged record of the answer shown: each reader's candidate, the signals, the probability."""
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
    """True when the answer came from the semantic cache (nodes.cache_lookup): no retrieval, no model."""
    answer_id: Annotated[str, PerTurn("")]
    """The id the answer was recorded under (the audit row's `answer_id`, nodes.record_turn): what a caller
    rates it by (`rag feedback`, POST /api/v1/feedback); "" when the turn was not recorded."""


class State(InputState, OutputState, total=False):
    """Everything nodes share during a run."""

    queries: Annotated[list[SearchQuery], PerTurn([])]
    """Queries of the current retrieval round (fanned out with Send)."""
    retrieval_depth: Annotated[int, PerTurn(1)]
    """Factor on each query's k in the current round: 1, grown by expanding retries (RAG_RETRY_STRATEGY
    expand | both, nodes.retry_strategy); start_turn resets it to 1."""
    queries_run: Annotated[list[str], PerTurn([]), extend_or_reset]
    documents: Annotated[list[RetrievedDoc], PerTurn([]), merge_documents]
    """All passages retrieved this turn, deduplicated by chunk id."""
    hops: Annotated[int, PerTurn(0), add_count]
    retrieval_score: Annotated[float, PerTurn(0.0)]
    missing_terms: Annotated[list[str], PerTurn([])]
    retrieval_decision: Annotated[RetrievalDecision, PerTurn("generate")]
    """What grade_retrieval decided (the router only reads it)."""
    evidence: Annotated[list[RetrievedDoc], PerTurn([])]
    """The sentences of the graded passages the reader gets (retrieval.evidence), one entry per chunk, best
    first; empty when compression is off (RAG_EVIDENCE_TOKEN_BUDGET=0): the reader then gets whole chunks."""
    recalled_memories: Annotated[list[RetrievedDoc] | None, PerTurn(None)]
    """The tenant's memories recalled for this turn's question (nodes.recall_memories): evidence that
    grade_retrieval counts with the relevant passages, given to the answer prompt after the sources'
    numbers; None until the node looks (start_turn resets it), so a turn searches once."""
    director_events: Annotated[list[RetrievedDoc] | None, PerTurn(None)]
    """The events the director recalled for this turn (nodes.director_recall: this conversation's, then the
    tenant's other conversations'), given to the answer prompt in their own section; [] when the conversation
    is not stalled; None until generate first looks (start_turn resets it)."""
    draft: Annotated[str, PerTurn("")]
    """The latest generated answer (before grading)."""
    best_answer: Annotated[AnswerCandidate | None, PerTurn(None), keep_best_answer]
    answer_score: float
    stalled_revisions: Annotated[int, PerTurn(0)]
    """Answer attempts in a row, up to the latest, that scored no better than the best one before them
    (grade_answer gives up once they exceed `Context.revision_patience`)."""
    next_action: Annotated[AnswerAction, PerTurn("accept")]
    """What grade_answer decided (the router only reads it)."""
    owner_tenant: str
    """Tenant of the thread's first turn, which owns the thread: set once by start_turn, never reset; a turn
    or replay by another tenant is refused (persistence.threads). Not an input: callers cannot set it."""
    cache_key: dict[str, Any]
    """What cache_lookup looked up on a miss (question, scope, documents version): record_turn stores the
    answer under it; empty on a hit, a bypass, or in graphs without the cache."""
    turn_started_at: float
    """Epoch seconds at which the turn started (set by cache_lookup): record_turn measures the latency."""


def retrieval_conversation(state: State) -> str:
    """The conversation id retrieval is scoped to: the turn's `conversation_id`, or '' when the caller said
    the conversation does not scope retrieval (`conversation_scopes_retrieval` False)."""
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
    depth: NotRequired[int]
    """Factor on the query's k (State.retrieval_depth; 1 when absent)."""
