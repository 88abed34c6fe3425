"""record_turn: the last node of every answer. Writes the turn into the SQL tables (session, conversation
rows, an audit row), stores a good answer in the semantic cache and queues a due conversation summary.

A graph node so every interface that runs the graph records its answers. A failure to record or to cache is
logged and the answer goes out unchanged (the node only returns `answer_id` when the rows were written).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from nodes.conversation_memory import schedule_summary
from nodes.instrumentation import NodeFunction, timed
from nodes.memory_recall import is_memory_doc
from nodes.resources import get_resources
from nodes.start_turn import thread_id_of
from nodes.turn import answer_mode
from persistence.threads import visible_thread_id
from state.context import Context, run_config, run_context
from state.graph_state import State

if TYPE_CHECKING:
    # sqlalchemy and numpy: imported when a turn is recorded, not with the graph.
    from persistence.audit import TurnRecord

logger = logging.getLogger(__name__)

#: Keys of `timings_ms` that time parts of a node (already inside that node's own time).
SUB_TIMINGS = frozenset({"model", "retrieval"})
#: Metadata keys the LangGraph server puts on its runs.
SERVER_METADATA = ("assistant_id", "graph_id")
#: The cached part of an answer (the analysis too, so a hit is recorded with the answer mode it was made in).
CACHED_FIELDS = (
    "answer",
    "citations",
    "sources",
    "renderings",
    "unsupported_sentences",
    "strategy",
    "analysis",
)


def thread_of(config: RunnableConfig) -> str:
    """The run's thread id; a run without one (no checkpointer) gets a session of its own."""
    thread = str((config.get("configurable") or {}).get("thread_id") or "")
    return thread or f"run-{uuid.uuid4().hex[:12]}"


def interface_of(config: RunnableConfig) -> str:
    """Who ran the graph: `metadata.interface` (cli, api...), 'langgraph-server' or 'python'."""
    metadata = config.get("metadata") or {}
    if metadata.get("interface"):
        return str(metadata["interface"])[:32]
    if any(key in metadata for key in SERVER_METADATA):
        return "langgraph-server"
    return "python"


def turn_latency_ms(state: State) -> float:
    """Milliseconds since the turn started (cache_lookup's mark), else the sum of the nodes' own times."""
    started = state.get("turn_started_at")
    if started:
        return max(0.0, (time.time() - float(started)) * 1000)
    timings = state.get("timings_ms") or {}
    return float(sum(value for key, value in timings.items() if key not in SUB_TIMINGS))


def cacheable(state: State) -> bool:
    """Whether to cache the answer: a miss this turn, grounded, answering, with sources (no memory)."""
    if state.get("cache_hit") or not state.get("cache_key"):
        return False
    if state.get("not_found") or state.get("error") or not str(state.get("answer") or "").strip():
        return False
    if any(is_memory_doc(doc) for doc in state.get("sources") or []):
        return False  # a memory can be deleted or changed: an answer resting on one is not kept for later
    grade = state.get("answer_grade") or {}
    return bool(state.get("sources")) and bool(grade.get("grounded")) and bool(grade.get("answers_question"))


def _tokens(usage: dict[str, float], kind: str) -> int:
    return int(usage.get(kind, 0) or 0)


def turn_record(
    state: State, context: Context, config: RunnableConfig, graph: str, default_model: str
) -> TurnRecord:
    """The tables' view of this turn (`default_model`: the settings' model, when the context names none)."""
    from persistence.audit import TurnRecord

    analysis = state.get("analysis") or {}
    tenant = state.get("tenant") or context.tenant
    usage = state.get("usage") or {}
    confidence = state.get("confidence")
    return TurnRecord(
        tenant=tenant,
        thread_id=visible_thread_id(thread_of(config), tenant),
        conversation_id=state.get("conversation_id") or "",
        user_id=context.user_id,
        question=state.get("question") or "",
        answer=state.get("answer") or "",
        source_ids=[doc["chunk_id"] for doc in state.get("sources") or [] if doc.get("chunk_id")],
        mode=answer_mode(context.mode) if analysis else context.mode,
        strategy=state.get("strategy") or "",
        latency_ms=round(turn_latency_ms(state), 2),
        cache_hit=bool(state.get("cache_hit")),
        not_found=bool(state.get("not_found")),
        interface=interface_of(config),
        graph=graph,
        error=state.get("error") or "",
        confidence=None if confidence is None else float(confidence),
        model=context.model or default_model,
        prompt_tokens=_tokens(usage, "prompt_tokens"),
        completion_tokens=_tokens(usage, "completion_tokens"),
    )


def store_answer(state: State) -> None:
    """Put this turn's answer in the semantic cache under the key cache_lookup missed."""
    from persistence.semantic_cache import get_semantic_cache
    from persistence.semantic_cache_backends import CacheScope

    key = state["cache_key"]
    payload = {name: state.get(name) for name in CACHED_FIELDS}
    get_semantic_cache().store(key["question"], CacheScope(**key["scope"]), key["docs_version"], payload)


def record_turn_node(graph: str) -> NodeFunction:
    """The record_turn node of the graph named `graph` (the name goes into the audit row)."""

    @timed("record_turn")
    def record_turn(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        """Record the turn and cache a good answer; never fails the run. Returns `answer_id` when recorded."""
        settings = get_resources().settings
        update: dict[str, Any] = {}
        if settings.record_turns:
            try:
                from persistence.audit import record_turn_rows
                from persistence.database import get_database

                record = turn_record(state, run_context(runtime), run_config(), graph, settings.llm_model)
                update["answer_id"] = record_turn_rows(record, get_database(settings))
            except Exception:  # recording must never cost the answer
                logger.warning("could not record the turn in the app database", exc_info=True)
        if settings.cache_enabled and cacheable(state):
            from persistence.semantic_cache import count

            try:
                store_answer(state)
            except Exception:  # a cache that is down must not cost the answer
                count("errors")
                logger.warning("could not store the answer in the semantic cache", exc_info=True)
        try:
            tenant = state.get("tenant") or run_context(runtime).tenant
            schedule_summary(state, tenant, thread_id_of(run_config()))
        except Exception:  # a summary is never worth the answer
            logger.warning("could not queue the conversation's summary", exc_info=True)
        return update

    return record_turn


#: The agentic graph's node.
record_turn = record_turn_node("rag")
