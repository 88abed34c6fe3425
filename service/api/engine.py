"""Running the agentic graph for HTTP requests: through the project's runner (service.runner.Session), in a
bounded pool of worker threads, with the API's time limits and the graph's events streamed live.

Why threads: the runner drives the graph synchronously with the SQLite checkpointer (sync and async savers
are separate classes), and the embedded model and the stores block. Each run streams in a worker thread and
hands its items to the request's event loop, which enforces the limits:
- the whole run: `api_run_timeout_s`;
- one model call: `api_model_timeout_s`; one retrieval: `api_retrieval_timeout_s` (watched through LangChain
  callbacks on the run's model calls and `retrieve` tasks).
Past a limit the request gets 504 at once, and the worker stops the graph at its next step (a Python thread
cannot be interrupted inside a model call, so that call finishes in the background and is discarded).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from config.settings import Settings
from service.api.errors import RunTimeout
from service.runner import Session
from state.context import Context

#: How often (s) the request checks the run's limits while nothing arrives from it.
POLL_S = 0.1
#: Node whose tasks count as retrievals for `api_retrieval_timeout_s`.
RETRIEVAL_NODE = "retrieve"


class Watchdog(BaseCallbackHandler):
    """Start times of the run's open model calls and retrievals (callbacks run in the graph's threads)."""

    run_inline = True
    raise_error = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.models: dict[uuid.UUID, float] = {}
        self.retrievals: dict[uuid.UUID, float] = {}

    def _open(self, table: dict[uuid.UUID, float], run_id: uuid.UUID) -> None:
        with self._lock:
            table[run_id] = time.monotonic()

    def _close(self, run_id: uuid.UUID) -> None:
        with self._lock:
            self.models.pop(run_id, None)
            self.retrievals.pop(run_id, None)

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: uuid.UUID, **kwargs: Any
    ) -> None:
        self._open(self.models, run_id)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._open(self.models, run_id)

    def on_llm_end(self, response: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        metadata = kwargs.get("metadata") or {}
        if kwargs.get("name") == RETRIEVAL_NODE and metadata.get("langgraph_node") == RETRIEVAL_NODE:
            self._open(self.retrievals, run_id)

    def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def overdue(self, model_s: float, retrieval_s: float) -> str | None:
        """Why the run must stop now (a model call or a retrieval past its limit), or None."""
        now = time.monotonic()
        with self._lock:
            oldest_model = min(self.models.values(), default=now)
            oldest_retrieval = min(self.retrievals.values(), default=now)
        if now - oldest_model > model_s:
            return f"a model call took longer than {model_s:g} s (RAG_API_MODEL_TIMEOUT_S)"
        if now - oldest_retrieval > retrieval_s:
            return f"a retrieval took longer than {retrieval_s:g} s (RAG_API_RETRIEVAL_TIMEOUT_S)"
        return None


@dataclass
class RunSpec:
    """One question to run: the thread, the run's context and the graph's other inputs."""

    question: str
    thread_id: str
    context: Context
    inputs: dict[str, Any] = field(default_factory=dict)


class Engine:
    """The graph runner of one app: a lazily opened Session and a bounded pool of worker threads."""

    def __init__(
        self, settings: Settings, session_factory: Callable[[Settings], Session] | None = None
    ) -> None:
        self.settings = settings
        self._session_factory = session_factory or (lambda s: Session(s))
        self._session: Session | None = None
        self._lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=settings.api_workers, thread_name_prefix="rag-run")

    def session(self) -> Session:
        """The runner (its checkpointer file is opened on the first request, not at import)."""
        with self._lock:
            if self._session is None:
                self._session = self._session_factory(self.settings)
            return self._session

    def close(self) -> None:
        """Stop accepting runs (running ones finish in the background)."""
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def run(self, spec: RunSpec) -> AsyncIterator[tuple[str, Any]]:
        """Yield ("event", {"event", "data"}), ("token", text) and finally ("result", output state); raise the
        run's error, or RunTimeout past a limit."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancelled = threading.Event()
        watchdog = Watchdog()
        settings = self.settings

        def put(item: tuple[str, Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the request's loop is gone (server shutting down)
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            try:
                stream = self.session().stream(
                    spec.question,
                    thread_id=spec.thread_id,
                    context=spec.context,
                    events=True,
                    callbacks=[watchdog],
                    **spec.inputs,
                )
                for item in stream:
                    if cancelled.is_set():
                        stream.close()  # stops the graph at its next step
                        return
                    put(item)
            except BaseException as error:  # noqa: BLE001 - handed to the request, which maps it
                put(("failed", error))
            finally:
                put(("end", None))

        loop.run_in_executor(self.executor, work)
        deadline = time.monotonic() + settings.api_run_timeout_s
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RunTimeout(
                        f"the run took longer than {settings.api_run_timeout_s:g} s (RAG_API_RUN_TIMEOUT_S)"
                    )
                overdue = watchdog.overdue(settings.api_model_timeout_s, settings.api_retrieval_timeout_s)
                if overdue:
                    raise RunTimeout(overdue)
                try:
                    kind, payload = await asyncio.wait_for(queue.get(), timeout=min(remaining, POLL_S))
                except TimeoutError:
                    continue
                if kind == "end":
                    return
                if kind == "failed":
                    raise payload
                yield kind, payload
        finally:
            cancelled.set()

    async def answer(self, spec: RunSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Run to the end: (output state, the custom events in order)."""
        events: list[dict[str, Any]] = []
        result: dict[str, Any] = {}
        async for kind, payload in self.run(spec):
            if kind == "event":
                events.append(payload)
            elif kind == "result":
                result = payload
        return result, events
