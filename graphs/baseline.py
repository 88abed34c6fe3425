"""The naive RAG baseline: recall_memories -> retrieve -> compress_evidence -> budgeted prompt -> generate
-> cite (-> record_turn, which writes the turn into the SQL tables), on the same parts as the agentic graph
(same memories as evidence, same search, same evidence compression, same prompt budgeting, same citation
handling), so comparisons isolate the agentic parts."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from graphs.direct import Step, pipeline_graph
from graphs.types import GraphType
from nodes.baseline_retrieve import baseline_retrieve
from nodes.cite import cite
from nodes.compress_evidence import compress_evidence
from nodes.generate import generate
from nodes.recall_memories import recall_memories
from nodes.record_turn import record_turn_node
from nodes.start_turn import start_turn

GRAPH_NAME = "baseline"


def build_baseline_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> GraphType:
    """Assemble and compile the baseline graph."""
    steps: list[Step] = [
        ("start_turn", start_turn),
        ("recall_memories", recall_memories),
        ("retrieve", baseline_retrieve),
        ("compress_evidence", compress_evidence),
        ("generate", generate),
        ("cite", cite),
        ("record_turn", record_turn_node(GRAPH_NAME)),
    ]
    return pipeline_graph(GRAPH_NAME, steps, checkpointer)


#: The graph langgraph.json names: compiled without a checkpointer.
graph = build_baseline_graph()
