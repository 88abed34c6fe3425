"""recall_memories: the tenant's memories nearest this turn's question, as evidence of the answer.

Why a node before the evidence is judged: a memory ("the user's project is codenamed HERON-7") can answer a
question that no document does. grade_retrieval counts the recalled memories with the relevant passages, so
a turn whose documents hold nothing relevant (or whose scope holds no document at all) is answered from its
memories and cites them, instead of stopping at "not found" before they were read. In the agentic graph it
runs once per turn after a semantic-cache miss, before analysis, so every path that answers (retrieval, the
no-retrieval path, chat mode) gets the same memories; the baseline graph runs it before its one search.

What is recalled, and the rules of scope and cost, are nodes.memory_recall's (`recalled_memories`): the
turn's tenant, its conversation's memories plus the tenant-wide ones (never another conversation's or
tenant's), at most RAG_MEMORY_RECALL_K, each at least MEMORY_RECALL_MIN_SCORE similar to the question;
none when the run does not read the knowledge base; a failing store is logged and recalls none.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from nodes.instrumentation import timed
from nodes.memory_recall import recalled_memories
from nodes.turn import current_question
from state.context import Context, run_context
from state.graph_state import State


@timed("recall_memories")
def recall_memories(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Recall this turn's memories into state (`recalled_memories`; [] when none apply)."""
    return {"recalled_memories": recalled_memories(state, run_context(runtime), current_question(state))}
