"""recall_memories: the tenant's memories nearest this turn's question, as evidence of the answer.

A node before the evidence is judged, because a memory can answer a question no document does: it runs once
per turn, before analysis, so every answering path gets the same memories (rules: nodes.memory_recall).
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
