"""The no-retrieval pipeline: the model answers from its own knowledge and the tenant's memories
(start_turn -> recall_memories -> generate -> cite), the floor the evaluation compares both RAG pipelines
against; and `pipeline_graph`, which the baseline is built with too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
#: A node of a pipeline: its name and its function.
Step = tuple[str, Callable[..., Any]]


def pipeline_graph(
    name: str, steps: Sequence[Step], checkpointer: BaseCheckpointSaver[Any] | None
) -> GraphType:
    """A graph that runs `steps` (node name, node) one after another, from START to END."""
    builder = StateGraph(State, context_schema=Context, input_schema=InputState, output_schema=OutputState)
    previous = START
    for node_name, node in steps:
        builder.add_node(node_name, node)
        builder.add_edge(previous, node_name)
        previous = node_name
    builder.add_edge(previous, END)
    return with_durability(builder.compile(checkpointer=checkpointer, name=name), checkpointer)


def build_direct_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> GraphType:
    """Assemble and compile the no-retrieval graph."""
    steps: list[Step] = [
        ("start_turn", start_turn),
        ("recall_memories", recall_memories),
        ("generate", generate),
        ("cite", cite),
    ]
    return pipeline_graph(GRAPH_NAME, steps, checkpointer)


graph = build_direct_graph()
