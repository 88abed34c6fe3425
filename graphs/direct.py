"""The no-retrieval pipeline: the model answers from its own knowledge and the tenant's memories
(start_turn -> recall_memories -> generate -> cite).

It is the floor the evaluation compares both RAG pipelines against, and what the agentic graph does when
analysis says a question needs no documents.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from graphs.types import GraphType
from nodes.cite import cite
from nodes.generate import generate
from nodes.recall_memories import recall_memories
from nodes.start_turn import start_turn
from persistence.checkpointer import with_durability
from state.context import Context
from state.graph_state import InputState, OutputState, State

GRAPH_NAME = "direct"


def build_direct_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> GraphType:
    """Assemble and compile the no-retrieval graph."""
    builder = StateGraph(State, context_schema=Context, input_schema=InputState, output_schema=OutputState)
    builder.add_node("start_turn", start_turn)
    builder.add_node("recall_memories", recall_memories)
    builder.add_node("generate", generate)
    builder.add_node("cite", cite)
    builder.add_edge(START, "start_turn")
    builder.add_edge("start_turn", "recall_memories")
    builder.add_edge("recall_memories", "generate")
    builder.add_edge("generate", "cite")
    builder.add_edge("cite", END)
    return with_durability(builder.compile(checkpointer=checkpointer, name=GRAPH_NAME), checkpointer)


graph = build_direct_graph()
