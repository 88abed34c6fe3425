"""The naive RAG baseline: recall_memories -> retrieve -> compress_evidence -> budgeted prompt -> generate
-> cite (-> record_turn, which writes the turn into the SQL tables), on the same parts as the agentic graph
(same memories as evidence, same search, same evidence compression, same prompt budgeting, same citation
handling), so comparisons isolate the agentic parts."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from graphs.types import GraphType
from nodes.baseline_retrieve import baseline_retrieve
from nodes.cite import cite
from nodes.compress_evidence import compress_evidence
from nodes.generate import generate
from nodes.recall_memories import recall_memories
from nodes.record_turn import record_turn_node
from nodes.start_turn import start_turn
from persistence.checkpointer import with_durability
from state.context import Context
from state.graph_state import InputState, OutputState, State

GRAPH_NAME = "baseline"


def build_baseline_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> GraphType:
    """Assemble and compile the baseline graph."""
    builder = StateGraph(State, context_schema=Context, input_schema=InputState, output_schema=OutputState)
    builder.add_node("start_turn", start_turn)
    builder.add_node("recall_memories", recall_memories)
    builder.add_node("retrieve", baseline_retrieve)
    builder.add_node("compress_evidence", compress_evidence)
    builder.add_node("generate", generate)
    builder.add_node("cite", cite)
    builder.add_node("record_turn", record_turn_node(GRAPH_NAME))
    builder.add_edge(START, "start_turn")
    builder.add_edge("start_turn", "recall_memories")
    builder.add_edge("recall_memories", "retrieve")
    builder.add_edge("retrieve", "compress_evidence")
    builder.add_edge("compress_evidence", "generate")
    builder.add_edge("generate", "cite")
    builder.add_edge("cite", "record_turn")
    builder.add_edge("record_turn", END)
    return with_durability(builder.compile(checkpointer=checkpointer, name=GRAPH_NAME), checkpointer)


#: The graph langgraph.json names: compiled without a checkpointer.
graph = build_baseline_graph()
