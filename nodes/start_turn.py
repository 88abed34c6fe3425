"""start_turn: validate the turn's question and filters, and reset the per-turn state.

The checkpointer keeps a thread's whole state between turns; only the conversation (`messages`) should carry
over, so counters, documents, timings and answers are reset here through their reducers' RESET sentinel.
Bad input fails here, before any model or store is touched, with a message naming what is wrong.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage
from langgraph.runtime import Runtime

from retrieval.filters import FilterError, parse_filter
from state.context import Context, run_context
from state.graph_state import RESET, State


class InvalidQuestionError(ValueError):
    """The turn has no usable question (empty, too long, or filters that cannot be applied)."""


def _text(message: AnyMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content if isinstance(part, dict))


def turn_question(state: State) -> tuple[str, bool]:
    """The question of this turn and whether it must be appended to `messages` as a new human turn."""
    messages = state.get("messages") or []
    question = (state.get("question") or "").strip()
    last = messages[-1] if messages else None
    if isinstance(last, HumanMessage) and (not question or question == _text(last).strip()):
        return _text(last).strip(), False
    return question, True


def start_turn(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Validate and reset; raise InvalidQuestionError on bad input."""
    context = run_context(runtime)
    question, append = turn_question(state)
    if not question:
        raise InvalidQuestionError("empty question: pass {'question': '...'} or a human message")
    if len(question) > context.max_question_chars:
        raise InvalidQuestionError(
            f"question too long: {len(question)} characters > {context.max_question_chars} "
            "(RAG_MAX_QUESTION_CHARS)"
        )
    try:
        parse_filter(state.get("filters") or None)
    except FilterError as error:
        raise InvalidQuestionError(f"invalid filters: {error}") from None
    update: dict[str, Any] = {
        "question": question,
        "standalone_question": question,
        "tenant": state.get("tenant") or context.tenant,
        "filters": state.get("filters") or {},
        "conversation_id": state.get("conversation_id") or "",
        "documents": RESET,
        "queries_run": RESET,
        "hops": RESET,
        "retrieval_rounds": RESET,
        "generation_rounds": RESET,
        "llm_calls": RESET,
        "timings_ms": RESET,
        "usage": RESET,
        "best_answer": RESET,
        "queries": [],
        "sources": [],
        "retrieved": [],
        "citations": [],
        "renderings": {},
        "unsupported_sentences": [],
        "draft": "",
        "answer": "",
        "not_found": False,
        "error": "",
        "prompt_info": {},
        "answer_grade": {},
        "missing_terms": [],
        "retrieval_score": 0.0,
        "strategy": "",
        "analysis": {},
        "next_action": "accept",
        "retrieval_decision": "generate",
    }
    if append:
        update["messages"] = [HumanMessage(question)]
    return update
