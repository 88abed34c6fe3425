"""The agentic RAG graph (the design card's shape):

START -> start_turn -> contextualize -> cache_lookup -> recall_memories -> analyze -> select_strategy
      -> rewrite -> retrieve (fan-out) -> grade_retrieval -> compress_evidence -> generate
                                                           | reformulate -> retrieve | not_found
generate -> grade_answer -> cite | reformulate | generate (regenerate)
cite -> record_turn -> END;  not_found -> record_turn -> END;  cache_lookup (hit) -> record_turn -> END
analyze says no retrieval is needed -> generate directly.
Recalled memories count as evidence in grade_retrieval, so "nothing retrieved -> not_found" means no passage
and no memory. Every loop is bounded by counters in state checked against the context; `recursion_limit` is
a backstop.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from graphs.routing import (
    fan_out_queries,
    route_after_analyze,
    route_after_answer_grade,
    route_after_cache_lookup,
    route_after_retrieval_grade,
)
from graphs.types import GraphType
from nodes.analyze import analyze
from nodes.cache_lookup import cache_lookup
from nodes.cite import cite
from nodes.compress_evidence import compress_evidence
from nodes.contextualize import contextualize
from nodes.generate import generate
from nodes.grade_answer import grade_answer
from nodes.grade_retrieval import grade_retrieval
from nodes.not_found import not_found
from nodes.recall_memories import recall_memories
from nodes.record_turn import record_turn
from nodes.reformulate import reformulate
from nodes.retrieve import retrieve
from nodes.rewrite import rewrite
from nodes.select_strategy import select_strategy
from nodes.start_turn import start_turn
from persistence.checkpointer import with_durability
from state.context import Context
from state.graph_state import InputState, OutputState, State

GRAPH_NAME = "rag"
#: Backstop only: the loops stop on state counters long before this.
RECURSION_LIMIT = 100


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None = None) -> GraphType:
    """Assemble and compile the agentic graph (with a checkpointer for conversations, or none)."""
    builder = StateGraph(State, context_schema=Context, input_schema=InputState, output_schema=OutputState)
    builder.add_node("start_turn", start_turn)
    builder.add_node("contextualize", contextualize)
    builder.add_node("cache_lookup", cache_lookup)
    builder.add_node("recall_memories", recall_memories)
    builder.add_node("analyze", analyze)
    builder.add_node("select_strategy", select_strategy)
    builder.add_node("rewrite", rewrite)
    builder.add_node("retrieve", retrieve)
    builder.add_node("grade_retrieval", grade_retrieval)
    builder.add_node("reformulate", reformulate)
    builder.add_node("compress_evidence", compress_evidence)
    builder.add_node("generate", generate)
    builder.add_node("grade_answer", grade_answer)
    builder.add_node("cite", cite)
    builder.add_node("not_found", not_found)
    builder.add_node("record_turn", record_turn)

    builder.add_edge(START, "start_turn")
    builder.add_edge("start_turn", "contextualize")
    builder.add_edge("contextualize", "cache_lookup")
    builder.add_conditional_edges("cache_lookup", route_after_cache_lookup)
    builder.add_edge("recall_memories", "analyze")
    builder.add_conditional_edges("analyze", route_after_analyze)
    builder.add_edge("select_strategy", "rewrite")
    builder.add_conditional_edges("rewrite", fan_out_queries, ["retrieve"])
    builder.add_edge("retrieve", "grade_retrieval")
    builder.add_conditional_edges("grade_retrieval", route_after_retrieval_grade)
    builder.add_conditional_edges("reformulate", fan_out_queries, ["retrieve"])
    builder.add_edge("compress_evidence", "generate")
    builder.add_edge("generate", "grade_answer")
    builder.add_conditional_edges("grade_answer", route_after_answer_grade)
    builder.add_edge("cite", "record_turn")
    builder.add_edge("not_found", "record_turn")
    builder.add_edge("record_turn", END)
    compiled = builder.compile(checkpointer=checkpointer, name=GRAPH_NAME)
    return with_durability(compiled, checkpointer).with_config({"recursion_limit": RECURSION_LIMIT})


#: The graph langgraph.json names: compiled without a checkpointer (the server brings its own).
graph = build_graph()
