"""The type of the compiled graphs, for the builders and the runner (mypy strict on graphs/)."""

from __future__ import annotations

from typing import TypeAlias

from langgraph.graph.state import CompiledStateGraph

from state.context import Context
from state.graph_state import InputState, OutputState, State

#: A compiled graph of this project: State inside, Context as the run context, InputState in, OutputState out.
GraphType: TypeAlias = CompiledStateGraph[State, Context, InputState, OutputState]
