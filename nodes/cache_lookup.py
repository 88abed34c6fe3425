"""cache_lookup: answer a question asked before from the semantic cache (persistence.semantic_cache).

After contextualize (the key is the standalone question) and before analyze (a hit skips all the work). A
hit goes to record_turn with `cache_hit: True`; a miss keeps `cache_key` for record_turn to store under. A
failing cache is logged and counted, and the turn goes on as a miss.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from nodes.events import emit, source_summary
from nodes.instrumentation import timed
from nodes.resources import get_resources
from retrieval.answer_text import short_answer_of
from state.context import Context, run_context
from state.graph_state import State

if TYPE_CHECKING:
    # numpy and sqlalchemy: imported on the first lookup, not with the graph.
    from persistence.semantic_cache_backends import CacheScope

logger = logging.getLogger(__name__)


def cache_scope(state: State, context: Context) -> CacheScope:
    """Everything besides the question that changes the answer (the models too, so switching the model never
    serves an answer another model wrote), matched exactly."""
    from persistence.semantic_cache_backends import CacheScope

    resources = get_resources()
    generator, grader = (resources.model_identity(role, context) for role in ("generate", "grade"))
    return CacheScope(
        tenant=context.tenant,
        collection=context.collection,
        directory=context.directory,
        conversation_id=state.get("conversation_id") or "",
        filters=dict(state.get("filters") or {}),
        mode=context.mode,
        model=f"{generator}; grader {grader}",
        answer_source=context.answer_source,
        system_prompt=context.system_prompt,
    )


def hit_update(payload: dict[str, Any]) -> dict[str, Any]:
    """The state update of a cache hit: the cached answer as this turn's answer and AI message."""
    answer = str(payload.get("answer") or "")
    sources = list(payload.get("sources") or [])
    analysis = {"analysis": dict(payload["analysis"])} if payload.get("analysis") else {}
    return {
        **analysis,
        "answer": answer,
        "short_answer": short_answer_of(answer),
        "citations": list(payload.get("citations") or []),
        "sources": sources,
        "retrieved": sources,
        "renderings": dict(payload.get("renderings") or {}),
        "unsupported_sentences": list(payload.get("unsupported_sentences") or []),
        "strategy": str(payload.get("strategy") or ""),
        "not_found": False,
        "cache_hit": True,
        "messages": [AIMessage(answer)],
    }


@timed("cache_lookup")
def cache_lookup(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Look the standalone question up; on a hit, answer with the cached answer."""
    context = run_context(runtime)
    # The turn began before start_turn and contextualize (only contextualize is timed; start_turn is cheap).
    started = time.time() - float((state.get("timings_ms") or {}).get("contextualize", 0.0)) / 1000
    update: dict[str, Any] = {"cache_hit": False, "cache_key": {}, "turn_started_at": started}
    if not get_resources().settings.cache_enabled:
        return update
    if not get_resources().uses_store(context):  # its key holds the store's documents version: none here
        return update
    from persistence.semantic_cache import count, documents_version, get_semantic_cache

    if not context.use_cache:
        count("bypassed")
        return update
    question = (state.get("standalone_question") or state.get("question") or "").strip()
    if not question:
        return update
    scope = cache_scope(state, context)
    try:
        version = documents_version(scope.tenant)
        hit = get_semantic_cache().lookup(question, scope, version)
    except Exception:  # a cache that is down must not cost the answer
        count("errors")
        logger.warning("semantic cache lookup failed; answering without it", exc_info=True)
        return update
    if hit is None:
        return {
            **update,
            "cache_key": {"question": question, "scope": asdict(scope), "docs_version": version},
        }
    answer = hit_update(hit.payload)
    emit(
        "generation_complete",
        {
            "answer": answer["answer"],
            "citations": answer["citations"],
            "sources": [source_summary(dict(doc)) for doc in answer["sources"]],
            "cache_hit": True,
        },
    )
    return {**update, **answer}
