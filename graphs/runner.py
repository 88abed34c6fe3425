"""Running the graphs for the CLI, notebooks and benchmarks: one place that wires the checkpointer,
the context and the output shape, so every entry point behaves the same.

Every turn on a persistent thread runs under the thread's lock, after the tenant checks: both run before the
graph, because LangGraph stores a run's input in the thread before its first node runs: a refused caller
must write nothing into another tenant's thread.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, Callbacks
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, GenerationChunk, LLMResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import TAG_NOSTREAM as NO_STREAM_TAG

from config.settings import Settings
from core.langgraph_compat import StreamingCallbackHandler
from graphs.types import GraphType
from nodes.events import EVENT_SINK
from nodes.start_turn import check_input_tenant
from persistence.checkpointer import checkpointer_for
from persistence.thread_lock import thread_lock
from persistence.threads import check_thread_access, resolve_thread_id, root_config, thread_owner
from state.context import Context
from state.graph_state import InputState

GraphName = Literal["rag", "baseline", "direct"]
#: Nodes whose model tokens are shown while streaming (the answer being written).
STREAMED_NODES = frozenset({"generate"})
#: What the worker of stream_on_worker puts last: the run's final state, or its error.
_DONE = "done"
_FAILED = "failed"
T = TypeVar("T")
#: What separates a subgraph's checkpoint namespace from its parent task's (LangGraph's NS_SEP).
SUBGRAPH_SEPARATOR = "|"


def new_thread_id() -> str:
    """A fresh conversation id."""
    return uuid.uuid4().hex[:12]


def compiled_graph(name: GraphName, checkpointer: BaseCheckpointSaver[Any] | None) -> GraphType:
    """The named graph compiled with `checkpointer`."""
    if name == "baseline":
        from graphs.baseline import build_baseline_graph

        return build_baseline_graph(checkpointer)
    if name == "direct":
        from graphs.direct import build_direct_graph

        return build_direct_graph(checkpointer)
    from graphs.rag import build_graph

    return build_graph(checkpointer)


def _input(question: str, inputs: dict[str, Any]) -> InputState:
    """The graph input of a turn: the question and the caller's other input fields (the graph validates)."""
    return cast(InputState, {"question": question, **inputs})


class TokenHandler(BaseCallbackHandler, StreamingCallbackHandler[Any]):
    """Puts ("token", text) for each chunk a model streams inside STREAMED_NODES of the root graph: what
    LangGraph's "messages" stream mode does, without NO_STREAM_TAG calls and subgraphs. A streaming handler
    (langchain_core's private base, via core.langgraph_compat, as LangGraph's own), so a model called with
    `invoke` inside the run streams too."""

    def __init__(self, put: Callable[[tuple[str, Any]], None]) -> None:
        self._put = put
        self._streamed: set[UUID] = set()

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Watch the call when it is a streamed node's, in the root graph, and not kept out of the stream."""
        if (
            not metadata
            or metadata.get("langgraph_node") not in STREAMED_NODES
            or NO_STREAM_TAG in (tags or ())
        ):
            return
        if SUBGRAPH_SEPARATOR in str(metadata.get("langgraph_checkpoint_ns") or ""):
            return  # a subgraph's node (its namespace nests under the root task's)
        self._streamed.add(run_id)

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Put a watched call's text chunk."""
        if run_id not in self._streamed or not isinstance(chunk, ChatGenerationChunk):
            return
        message = chunk.message
        if isinstance(message, AIMessageChunk) and isinstance(message.content, str) and message.content:
            self._put(("token", message.content))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget a finished call."""
        self._streamed.discard(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget a failed call."""
        self._streamed.discard(run_id)

    def tap_output_aiter(self, run_id: UUID, output: AsyncIterator[T]) -> AsyncIterator[T]:
        """Chunks pass unchanged (they are read in on_llm_new_token)."""
        return output

    def tap_output_iter(self, run_id: UUID, output: Iterator[T]) -> Iterator[T]:
        """Chunks pass unchanged (they are read in on_llm_new_token)."""
        return output


def with_handler(callbacks: Callbacks, handler: BaseCallbackHandler) -> Callbacks:
    """The run's callbacks (a list, a manager or none) with `handler` added, inherited by every node."""
    if callbacks is None or isinstance(callbacks, list):
        return [*(callbacks or []), handler]
    manager = callbacks.copy()
    manager.add_handler(handler, inherit=True)
    return manager


def stream_on_worker(
    graph: GraphType, graph_input: InputState, config: RunnableConfig, context: Context, events: bool
) -> Generator[tuple[str, Any], None, dict[str, Any]]:
    """Run the graph on one worker thread of its own and yield its ("token", text) and, with `events`,
    ("event", {"event", "data"}) items as they come; return the final state.

    LangGraph's "messages" and "custom" modes run every step on a per-run thread pool (benchmarks/
    graph_overhead.py measures the cost); here tokens and events reach this generator through a queue.
    Closing the generator stops the graph at its next step and waits for it (the thread lock stays held)."""
    items: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    stop = threading.Event()
    handler = TokenHandler(items.put)
    config = {**config, "callbacks": with_handler(config.get("callbacks"), handler)}

    def put_event(payload: dict[str, Any]) -> None:
        items.put(("event", payload))

    def run() -> None:
        if events:
            EVENT_SINK.set(put_event)
        last: dict[str, Any] = {}
        try:
            parts = graph.stream(graph_input, config=config, context=context, stream_mode="values")
            with closing(cast(Generator[Any, None, None], parts)):  # closed early: the graph stops here
                for part in parts:
                    last = cast(dict[str, Any], part)
                    if stop.is_set():
                        break
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, which raises it
            items.put((_FAILED, error))
        else:
            items.put((_DONE, last))

    worker = threading.Thread(
        target=contextvars.copy_context().run, args=(run,), name="graph-run", daemon=True
    )
    worker.start()
    try:
        while True:
            kind, payload = items.get()
            if kind == _DONE:
                return cast(dict[str, Any], payload)
            if kind == _FAILED:
                raise payload
            yield kind, payload
    finally:
        stop.set()
        worker.join()


@dataclass
class Session:
    """A graph with the settings' checkpointer (SQLite in the data directory, or RAG_DATABASE_URL)."""

    settings: Settings
    graph_name: GraphName = "rag"
    persistent: bool = True
    interface: str = "python"  # who runs the turns, recorded in the audit log

    def __post_init__(self) -> None:
        self.checkpointer = checkpointer_for(self.settings) if self.persistent else None
        self.graph = compiled_graph(self.graph_name, self.checkpointer)

    def _config(self, thread_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id}, "metadata": {"interface": self.interface}}

    def owner(self, thread_id: str) -> str | None:
        """The tenant that owns a stored thread (None: unknown thread, or not owned yet)."""
        if self.checkpointer is None:
            return None
        saved = self.checkpointer.get_tuple(root_config(thread_id))
        return thread_owner(saved.checkpoint.get("channel_values") if saved else None)

    def stored_id(self, thread_id: str, tenant: str) -> str:
        """The stored id of the tenant's thread `thread_id` (ids are scoped per tenant)."""
        checkpointer = self.checkpointer
        if checkpointer is None:
            return thread_id
        return resolve_thread_id(
            tenant, thread_id, lambda stored: checkpointer.get_tuple(root_config(stored))
        )

    def check_access(self, thread_id: str, tenant: str) -> None:
        """Raise ThreadAccessError when the thread belongs to another tenant than `tenant`."""
        check_thread_access(thread_id, self.owner(thread_id), tenant)

    @contextmanager
    def turn(self, thread_id: str, context: Context, inputs: dict[str, Any]) -> Iterator[RunnableConfig]:
        """Hold the tenant's thread for one turn (lock, then tenant checks) and give the run's config."""
        check_input_tenant(inputs.get("tenant"), context.tenant)
        stored = self.stored_id(thread_id, context.tenant)
        persistent = self.checkpointer is not None
        lock = thread_lock(self.settings, stored, shown_as=thread_id) if persistent else nullcontext()
        with lock:
            self.check_access(stored, context.tenant)
            yield self._config(stored)

    def ask(
        self, question: str, *, thread_id: str | None = None, context: Context | None = None, **inputs: Any
    ) -> dict[str, Any]:
        """Answer one question on a thread; returns the output state plus `thread_id`."""
        thread_id = thread_id or new_thread_id()
        context = context or Context()
        with self.turn(thread_id, context, inputs) as config:
            result = self.graph.invoke(_input(question, inputs), config=config, context=context)
        return {**result, "thread_id": thread_id}

    def stream(
        self,
        question: str,
        *,
        thread_id: str,
        context: Context | None = None,
        events: bool = False,
        callbacks: list[Any] | None = None,
        **inputs: Any,
    ) -> Generator[tuple[str, Any], None, None]:
        """Yield ("token", text) while the answer is generated (with `events`, ("event", ...) items too),
        then ("result", output state). The thread stays locked until the generator ends or is closed."""
        context = context or Context()
        with self.turn(thread_id, context, inputs) as config:
            if callbacks:
                config["callbacks"] = callbacks
            last = yield from stream_on_worker(self.graph, _input(question, inputs), config, context, events)
        yield "result", {**last, "thread_id": thread_id}

    def history(self, thread_id: str, tenant: str | None = None) -> dict[str, Any]:
        """The stored state of a thread ({} when unknown); ThreadAccessError when another tenant's."""
        tenant = tenant or Context().tenant
        stored = self.stored_id(thread_id, tenant)
        self.check_access(stored, tenant)
        snapshot = self.graph.get_state(self._config(stored))
        return dict(snapshot.values or {})
