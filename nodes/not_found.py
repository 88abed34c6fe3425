"""not_found: the honest answer when retrieval found nothing (or the store could not be searched)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from core.text import contains_cjk
from nodes.events import emit
from nodes.instrumentation import timed
from prompts.not_found import (
    NOT_FOUND_ANSWER_EN,
    NOT_FOUND_ANSWER_ZH,
    STORE_DOWN_ANSWER_EN,
    STORE_DOWN_ANSWER_ZH,
)
from state.context import Context
from state.graph_state import State

#: Why this node answers "not found" (state `not_found_reason`).
REASON_STORE_DOWN = "the document store could not be searched"
REASON_NOTHING_RETRIEVED = "nothing was retrieved"
REASON_NOTHING_RELEVANT = (
    "no retrieved passage is relevant and the question names something none of them mentions"
)


@timed("not_found")
def not_found(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer plainly that the documents do not cover the question, in the question's language."""
    chinese = contains_cjk(state.get("question", ""))
    if state.get("error"):
        answer = STORE_DOWN_ANSWER_ZH if chinese else STORE_DOWN_ANSWER_EN  # the cause is in the log only
        reason = REASON_STORE_DOWN
    else:
        answer = NOT_FOUND_ANSWER_ZH if chinese else NOT_FOUND_ANSWER_EN
        reason = REASON_NOTHING_RELEVANT if state.get("documents") else REASON_NOTHING_RETRIEVED
    emit(
        "generation_complete",
        {"answer": answer, "citations": [], "sources": [], "not_found": True, "band": "not_found"},
    )
    return {
        "answer": answer,
        "short_answer": "",
        "not_found": True,
        "not_found_reason": reason,
        "band": "not_found",
        "confidence": None,
        "answer_record": None,  # a draft generate judged in an earlier round is not this answer's
        "citations": [],
        "sources": [],
        "renderings": {"markdown": answer, "html": f"<p>{answer}</p>", "plain": answer},
        "messages": [AIMessage(answer)],
    }
