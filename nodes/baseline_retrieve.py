"""baseline_retrieve: the naive pipeline's retrieval — the question as is, one hybrid search, no grading."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.instrumentation import timed
from nodes.retrieve import retrieve
from state.context import Context, run_context
from state.graph_state import RetrieveTask, State, retrieval_conversation
from state.schemas import SearchQuery


@timed("retrieve")
def baseline_retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Search once with the question; the same scoping and search as the agentic graph."""
    question = state.get("question", "")
    task = RetrieveTask(
        query=SearchQuery(text=question, dense_text=question, purpose="original"),
        tenant=state.get("tenant") or run_context(runtime).tenant,
        filters=state.get("filters") or {},
        conversation_id=retrieval_conversation(state),
        wants_details=False,
    )
    update = retrieve.__wrapped__(task, runtime)  # timed once, as this node
    update["queries_run"] = [question]
    update["retrieval_rounds"] = 1
    update["strategy"] = "NAIVE"
    return update
