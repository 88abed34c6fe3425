"""analyze: what kind of question this is (type, complexity 1-10, needs retrieval, wants details).

`auto` uses the heuristic when the grade model is weak (a small model classifies at chance); the heuristic is
also the model call's default. The model's "no retrieval" counts only when the heuristic agrees (greetings,
chit-chat, arithmetic): models skip retrieval for questions the corpus answers.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from nodes.instrumentation import merge_updates, structured_call, timed
from nodes.resources import get_resources
from prompts.query import ANALYZE_PROMPT, ANALYZE_SYSTEM
from query.classification import heuristic_analysis
from state.context import Context, run_context
from state.graph_state import State
from state.schemas import QueryAnalysis

logger = logging.getLogger(__name__)

#: Completion cap of the analysis: a small JSON object.
ANALYZE_MAX_TOKENS = 96


def use_llm_analyzer(context: Context) -> bool:
    """Whether this run analyzes with the model (explicitly, or `auto` with a strong grading model)."""
    if context.analyzer == "llm":
        return True
    return context.analyzer == "auto" and get_resources().strength("grade", context) == "strong"


def llm_analysis(
    question: str, default: QueryAnalysis, context: Context
) -> tuple[QueryAnalysis, dict[str, Any]]:
    """The model's analysis (source "llm"), or `default` when its reply is unusable; plus the accounting."""
    resources = get_resources()
    messages = [SystemMessage(ANALYZE_SYSTEM), HumanMessage(ANALYZE_PROMPT.format(question=question))]
    result, accounting = structured_call(
        resources.model("grade", context),
        QueryAnalysis,
        messages,
        default,
        json_schema=resources.supports_json_schema("grade"),
        max_tokens=ANALYZE_MAX_TOKENS,
    )
    if not result.ok:
        return default, accounting
    return result.value.model_copy(update={"source": "llm"}), accounting


def guard_retrieval(analysis: QueryAnalysis, heuristic: QueryAnalysis) -> QueryAnalysis:
    """The model's analysis, retrieving unless the heuristic also finds nothing to look up."""
    if analysis.needs_retrieval or not heuristic.needs_retrieval:
        return analysis
    logger.info("analysis: the model skipped retrieval where the heuristic retrieves; retrieving")
    return analysis.model_copy(update={"needs_retrieval": True})


@timed("analyze")
def analyze(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Set `analysis` (a QueryAnalysis as a dict) for the standalone question."""
    context = run_context(runtime)
    question = state.get("standalone_question") or state.get("question") or ""
    heuristic = heuristic_analysis(question)
    if not context.retrieval:  # RAG_RETRIEVAL=false: straight to generate, no analysis call to pay for
        return {"analysis": heuristic.model_copy(update={"needs_retrieval": False}).model_dump()}
    if not use_llm_analyzer(context):
        return {"analysis": heuristic.model_dump()}
    analysis, accounting = llm_analysis(question, heuristic, context)
    return merge_updates({"analysis": guard_retrieval(analysis, heuristic).model_dump()}, accounting)
