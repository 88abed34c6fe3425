"""start_turn: check the caller may use the thread, validate the turn's question and filters, and reset the
per-turn state.

The run's context is the one source of truth for the tenant: the first turn records it as the thread's owner,
another tenant's turn raises ThreadAccessError, a differing input `tenant` InvalidQuestionError. The
runner checks the same first; this node is the check every run passes, whatever runs the graph (another
checkpointer, the LangGraph server). Every field the state declares per-turn (`PerTurn`, state.graph_state) is
reset; bad input fails before any model call.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from core.questions import InvalidQuestionError, check_question
from persistence.threads import check_thread_access, thread_owner
from retrieval.conversation_summary import InvalidConversationMetadataError, conversation_metadata
from retrieval.directory_scope import DirectoryError, normalize_directory
from retrieval.filters import FilterError, parse_filter
from state.context import Context, run_config, run_context
from state.graph_state import State, turn_reset


def turn_question(state: State) -> tuple[str, bool]:
    """The question of this turn and whether it must be appended to `messages` as a new human turn."""
    messages = state.get("messages") or []
    question = (state.get("question") or "").strip()
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and (not question or question == last.text.strip()):
        return last.text.strip(), False
    return question, True


def check_input_tenant(input_tenant: str | None, context_tenant: str) -> None:
    """Refuse a graph input `tenant` that differs from the run's context, the one source of truth."""
    if input_tenant and input_tenant != context_tenant:
        raise InvalidQuestionError(
            f"input tenant {input_tenant!r} differs from the run's context tenant {context_tenant!r}: the "
            "tenant comes from the context only (pass context={'tenant': ...}, or leave it out of the input)"
        )


def thread_id_of(config: RunnableConfig | None) -> str:
    """The run's thread id ('' for a run without a checkpointer)."""
    return str(((config or {}).get("configurable") or {}).get("thread_id") or "")


def start_turn(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Check the caller may use the thread, validate the input and reset the per-turn state."""
    context = run_context(runtime)
    owner = thread_owner(state, legacy=False)  # state holds this run's input already
    check_thread_access(thread_id_of(run_config()), owner, context.tenant)
    check_input_tenant(state.get("tenant"), context.tenant)
    question, append = turn_question(state)
    check_question(question, context.max_query_chars)
    try:
        parse_filter(state.get("filters") or None)
    except FilterError as error:
        raise InvalidQuestionError(f"invalid filters: {error}") from None
    try:
        normalize_directory(context.directory)
    except DirectoryError as error:
        raise InvalidQuestionError(f"invalid directory scope: {error}") from None
    try:
        conversation_metadata(state.get("conversation_metadata"))
    except InvalidConversationMetadataError as error:
        raise InvalidQuestionError(f"invalid conversation_metadata: {error}") from None
    update: dict[str, Any] = {
        "question": question,
        "standalone_question": question,
        "tenant": context.tenant,
        "filters": state.get("filters") or {},
        "conversation_id": state.get("conversation_id") or "",
        **turn_reset(),  # every PerTurn field of the state schema (state.graph_state)
    }
    if append:
        update["messages"] = [HumanMessage(question)]
    if owner is None:
        update["owner_tenant"] = context.tenant  # the first turn claims the thread, once
    return update
