"""Routers of the agentic graph. Each is typed `-> Literal[...]`, so the edge map is the type.

Decisions that need the run's context (budgets, thresholds) are made by the nodes and stored in state
(`retrieval_decision`, `next_action`); routers only read them, which keeps them trivially testable.
"""

from __future__ import annotations

from typing import Literal

from langgraph.types import Send

from state.graph_state import RetrieveTask, State, retrieval_conversation
from state.schemas import SearchQuery


def route_after_analyze(state: State) -> Literal["select_strategy", "generate"]:
    """Questions that need no documents (greetings, arithmetic) go straight to generation."""
    analysis = state.get("analysis") or {}
    return "select_strategy" if analysis.get("needs_retrieval", True) else "generate"


def fan_out_queries(state: State) -> list[Send]:
    """One `retrieve` task per query of this round, at the round's depth; results merge by chunk id."""
    queries = state.get("queries") or []
    if not queries:
        question = state.get("standalone_question") or state.get("question", "")
        queries = [SearchQuery(text=question, dense_text=question, purpose="original")]
    analysis = state.get("analysis") or {}
    depth = max(1, int(state.get("retrieval_depth") or 1))
    return [
        Send(
            "retrieve",
            RetrieveTask(
                query=query,
                tenant=state.get("tenant") or "",
                filters=state.get("filters") or {},
                conversation_id=retrieval_conversation(state),
                wants_details=bool(analysis.get("wants_details", False)),
                depth=depth,
            ),
        )
        for query in queries
    ]


def route_after_retrieval_grade(state: State) -> Literal["compress_evidence", "reformulate", "not_found"]:
    """Follow grade_retrieval's decision; "generate" goes through evidence compression first."""
    decision = state.get("retrieval_decision") or "generate"
    return "compress_evidence" if decision == "generate" else decision


def route_after_answer_grade(state: State) -> Literal["cite", "reformulate", "generate"]:
    """accept / give_up -> cite (the best answer so far); retrieve -> reformulate; regenerate -> generate."""
    action = state.get("next_action") or "accept"
    if action == "retrieve":
        return "reformulate"
    if action == "regenerate":
        return "generate"
    return "cite"


def route_after_cache_lookup(state: State) -> Literal["record_turn", "recall_memories"]:
    """A semantic cache hit is the answer (record it and end); a miss recalls the turn's memories."""
    return "record_turn" if state.get("cache_hit") else "recall_memories"
