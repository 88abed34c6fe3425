"""Running the graph for HTTP requests: the project's runner in a bounded pool of worker threads (it drives
the graph synchronously), its items streamed to the request's event loop, which enforces the limits.

Limits bound work, not waiting: the waits for the tenant's turn (service.api.tenant_runs), a worker and the
model (service.api.gate) end at `api_queue_timeout_s` (503); the run's own work, one model call and one
retrieval at their limits (service.api.limits, 504). A Python thread cannot be interrupted inside a model
call, so past a limit that call finishes in the background, discarded, and the run's later calls fail at once.
A run that ends without its result is rolled back from its thread (service.api.turns).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from config.settings import Settings
from graphs.runner import Session
from nodes.resources import get_resources
from service.api.errors import QueueTimeout, RunTimeout
from service.api.gate import TENANT_MODEL_PLACES, ModelGates, RunMonitor
from service.api.limits import LimitPolicy, RunShape, TimeLimits, measured_policy, unmeasured_policy
from service.api.tenant_runs import TenantRuns
from service.api.turns import guarded_turn
from state.context import Context

logger = logging.getLogger(__name__)

#: How often (s) the request checks the run's limits while nothing arrives from it.
POLL_S = 0.1
#: Retry-After (s) of a 503 for a full queue: about one short run's time.
API_RETRY_AFTER_S = 10

T = TypeVar("T")


class SlotRelease:
    """Gives a tenant's slot back exactly once, whichever of the worker and the request gets there first."""

    def __init__(self, tenant_runs: TenantRuns, tenant: str) -> None:
        self._tenant_runs, self._tenant = tenant_runs, tenant
        self._done = False
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._tenant_runs.release(self._tenant)


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
        self._session_factory = session_factory or (lambda s: Session(s, interface="api"))
        self._session: Session | None = None
        self._lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=settings.api_workers, thread_name_prefix="rag-run")
        self.gates = ModelGates(settings.api_model_concurrency, TENANT_MODEL_PLACES)
        self.tenant_runs = TenantRuns(settings.api_tenant_runs)
        self.policy: LimitPolicy = unmeasured_policy(settings, "not measured yet (the API has not warmed up)")

    def session(self) -> Session:
        """The runner (its checkpointer file is opened on the first request, not at import)."""
        with self._lock:
            if self._session is None:
                self._session = self._session_factory(self.settings)
            return self._session

    def warm_up(self) -> float:
        """Open the runner, stores and models and set the auto limits now; return seconds. Otherwise the first
        request loads them inside its own run limit (a 504 under load); failures are logged, not raised, and
        show in the health route."""
        started = time.monotonic()
        try:
            self.session()
            resources = get_resources()
            if resources.uses_store():  # with retrieval off (RAG_RETRIEVAL=false) no store is opened
                resources.kb().embeddings.embed_query("warm-up")
            generator = resources.model("generate")
            resources.model("grade")
            self.policy = measured_policy(self.settings, generator)
        except Exception as error:  # noqa: BLE001 - reported by health and by the requests themselves
            logger.warning("warm-up incomplete (%s: %s)", type(error).__name__, error)
            self.policy = unmeasured_policy(self.settings, f"warm-up failed ({type(error).__name__})")
        return time.monotonic() - started

    def limits_for(self, context: Context) -> TimeLimits:
        """The limits of a run with `context` (its window, completion cap and loop bound size them)."""
        shape = RunShape(context.model_context_tokens, context.generation_reserve, context.max_iterations)
        return self.policy.limits(shape)

    def close(self) -> None:
        """Stop accepting runs (running ones finish in the background)."""
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def run(self, spec: RunSpec) -> AsyncGenerator[tuple[str, Any], None]:
        """Yield ("event", ...), ("token", text), then ("result", state); raise the run's error."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancelled = threading.Event()
        started = threading.Event()
        tenant = spec.context.tenant
        monitor = RunMonitor(self.gates, cancelled.is_set, tenant)
        limits = self.limits_for(spec.context)
        waiting_since = time.monotonic()
        await self._tenant_turn(tenant)
        release = SlotRelease(self.tenant_runs, tenant)

        def put(item: tuple[str, Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the request's loop is gone (server shutting down)
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            started.set()
            if cancelled.is_set():  # the request stopped waiting before a slot came free
                release()
                return
            monitor.admit()
            put(("started", None))
            try:
                session = self.session()
                with guarded_turn(session, spec.thread_id, spec.context, spec.inputs) as turn:
                    stream = session.stream(
                        spec.question,
                        thread_id=spec.thread_id,
                        context=spec.context,
                        events=True,
                        callbacks=[monitor],
                        **spec.inputs,
                    )
                    for item in stream:
                        if item[0] == "result":
                            turn.finished = True  # the turn is whole: kept, read or not
                        if cancelled.is_set():
                            stream.close()  # stops the graph at its next step (the turn is rolled back)
                            return
                        put(item)
            except BaseException as error:  # noqa: BLE001 - handed to the request, which maps it
                put(("failed", error))
            finally:
                monitor.release_all()
                release()  # the worker is free: the tenant's next request may take it
                put(("end", None))

        try:
            future = loop.run_in_executor(self.executor, work)
            await self._admitted(queue, future, time.monotonic() - waiting_since)
            async for item in self._watch(queue, monitor, limits):
                yield item
        finally:
            cancelled.set()
            if not started.is_set():  # the run never reached a worker: its slot is freed here
                release()

    async def _tenant_turn(self, tenant: str) -> None:
        """Wait until `tenant` runs fewer than `api_tenant_runs`, at most `api_queue_timeout_s`."""
        settings = self.settings
        if not await self.tenant_runs.acquire(tenant, settings.api_queue_timeout_s):
            raise QueueTimeout(
                f"the server is busy with this tenant's other requests: no run slot of tenant {tenant!r} "
                f"came free within {settings.api_queue_timeout_s:g} s (RAG_API_QUEUE_TIMEOUT_S, "
                f"RAG_API_TENANT_RUNS={settings.api_tenant_runs}); retry later",
                API_RETRY_AFTER_S,
            )

    async def in_worker(self, tenant: str, work: Callable[[], T]) -> T:
        """`work()` in the run pool, counted against `tenant`'s runs (a search's rerank holds a worker)."""
        loop = asyncio.get_running_loop()
        await self._tenant_turn(tenant)
        release = SlotRelease(self.tenant_runs, tenant)
        started, cancelled = threading.Event(), threading.Event()

        def counted() -> T:
            started.set()
            try:
                if cancelled.is_set():  # its request stopped waiting before a worker took it
                    raise asyncio.CancelledError
                return work()
            finally:
                release()

        try:
            return await loop.run_in_executor(self.executor, counted)
        finally:
            cancelled.set()
            if not started.is_set():  # cancelled before a worker took it; a started one frees it as it ends
                release()

    async def _admitted(
        self, queue: asyncio.Queue[tuple[str, Any]], future: asyncio.Future[None], waited_s: float
    ) -> None:
        """Wait for the run's worker slot, at most what `waited_s` left of `api_queue_timeout_s`."""
        limit = self.settings.api_queue_timeout_s
        try:
            kind, _payload = await asyncio.wait_for(queue.get(), timeout=max(0.0, limit - waited_s))
        except TimeoutError:
            future.cancel()  # still queued: it never starts
            raise QueueTimeout(
                f"the server is busy: no run slot came free within {limit:g} s "
                f"(RAG_API_QUEUE_TIMEOUT_S, RAG_API_WORKERS={self.settings.api_workers}); retry later",
                API_RETRY_AFTER_S,
            ) from None
        if kind != "started":  # pragma: no cover - work() always announces itself first
            raise RuntimeError(f"run did not start ({kind})")

    async def _watch(
        self, queue: asyncio.Queue[tuple[str, Any]], monitor: RunMonitor, limits: TimeLimits
    ) -> AsyncIterator[tuple[str, Any]]:
        """The run's items until it ends, enforcing the limits of its work and of its waits."""
        settings = self.settings
        while True:
            if monitor.longest_wait_s() > settings.api_queue_timeout_s:
                raise QueueTimeout(
                    f"the server is busy: the model was not free within {settings.api_queue_timeout_s:g} s "
                    "(RAG_API_QUEUE_TIMEOUT_S); retry later",
                    API_RETRY_AFTER_S,
                )
            if monitor.worked_s() > limits.run_s:
                raise RunTimeout(
                    f"the run took longer than {limits.run_s:g} s "
                    f"(RAG_API_RUN_TIMEOUT_S, {limits.run_source})"
                )
            overdue = monitor.overdue(limits.model_s, limits.retrieval_s, limits.model_source)
            if overdue:
                raise RunTimeout(overdue)
            try:
                kind, payload = await asyncio.wait_for(queue.get(), timeout=POLL_S)
            except TimeoutError:
                continue
            if kind == "end":
                return
            if kind == "failed":
                raise payload
            yield kind, payload

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
