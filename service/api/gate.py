"""Waiting for the model in our code: a per-model concurrency gate, fair between tenants, and the per-run
monitor (a LangChain callback) that separates a run's own work from its waiting.

Why: the embedded model computes one answer at a time; concurrent calls queued invisibly inside llama.cpp and
the time limits counted that queueing (19 of 32 requests were 504 at 16 clients). Here the model limit starts
when a call gets the model, the run limit leaves the waits out, and a wait is bounded by
`api_queue_timeout_s` (503). A freed place goes to the waiting tenant holding the fewest places, then the
least recently served; within a tenant, the oldest run first.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from models.local_catalog import LOCAL_ALIASES

#: How often (s) a waiting call re-checks whether its run was abandoned.
WAIT_POLL_S = 0.1
#: Node whose tasks count as retrievals for `api_retrieval_timeout_s`.
RETRIEVAL_NODE = "retrieve"
#: Gate key of a model that reports no name.
UNNAMED_MODEL = "model"


class RunAbandoned(RuntimeError):
    """The request stopped waiting for this run (its limit passed, or the client left): skip the model."""


@dataclass(frozen=True, eq=False)
class Ticket:
    """One call waiting for the model: its tenant, its run's priority and its arrival order."""

    tenant: str
    priority: float
    order: int


class ModelGate:
    """At most `size` calls into one model at once, at most `tenant_places` (0 = no bound) per tenant."""

    def __init__(self, size: int, tenant_places: int = 0) -> None:
        self.size = size
        self.tenant_places = tenant_places
        self._busy = 0
        self._waiting: list[Ticket] = []
        self._held: dict[str, int] = {}  # places held now, per tenant
        self._served: dict[str, int] = {}  # tenant -> number of its latest grant (least recently served)
        self._order = itertools.count()
        self._grants = itertools.count()
        self._condition = threading.Condition()

    @property
    def busy(self) -> int:
        """Calls holding the model now."""
        with self._condition:
            return self._busy

    @property
    def waiting(self) -> int:
        """Calls waiting for the model now."""
        with self._condition:
            return len(self._waiting)

    def _next(self) -> Ticket | None:
        """The waiter the next free place goes to (None when every waiter's tenant holds its bound)."""
        eligible = [
            ticket
            for ticket in self._waiting
            if not self.tenant_places or self._held.get(ticket.tenant, 0) < self.tenant_places
        ]
        return min(
            eligible,
            key=lambda t: (self._held.get(t.tenant, 0), self._served.get(t.tenant, -1), t.priority, t.order),
            default=None,
        )

    def acquire(self, priority: float, give_up: Callable[[], bool], tenant: str = "") -> None:
        """Wait for the model for `tenant`; RunAbandoned (holding nothing) as soon as `give_up()` is true."""
        with self._condition:
            ticket = Ticket(tenant, priority, next(self._order))
            self._waiting.append(ticket)
            try:
                # asked before taking the model too: a request that just gave up must not call it
                while not give_up():
                    if self._busy < self.size and self._next() is ticket:
                        self._busy += 1
                        self._held[tenant] = self._held.get(tenant, 0) + 1
                        self._served[tenant] = next(self._grants)
                        return
                    self._condition.wait(WAIT_POLL_S)
                raise RunAbandoned("the request no longer waits for this run")
            finally:
                self._waiting.remove(ticket)
                self._condition.notify_all()

    def release(self, tenant: str = "") -> None:
        """Give `tenant`'s place to the next waiter."""
        with self._condition:
            self._busy = max(0, self._busy - 1)
            left = self._held.get(tenant, 0) - 1
            if left > 0:
                self._held[tenant] = left
            else:
                self._held.pop(tenant, None)
            self._condition.notify_all()


#: Calls the embedded model takes at once on auto. Two: with one place a tenant's next call always waits a
#: whole call of a flooding tenant (benchmarks/fairness.py); llama.cpp batches two slots at little cost.
EMBEDDED_MODEL_PLACES = 2
#: Places at a gated model one tenant may hold at once (a lone tenant too).
TENANT_MODEL_PLACES = 1


class ModelGates:
    """One gate per model name, sized by `api_model_concurrency` (0 = auto: none for an endpoint)."""

    def __init__(self, concurrency: int, tenant_places: int = 0) -> None:
        self.concurrency = concurrency
        self.tenant_places = tenant_places
        self._gates: dict[str, ModelGate | None] = {}
        self._lock = threading.Lock()

    def size_for(self, model: str) -> int:
        """How many calls `model` takes at once (0 = no gate)."""
        if self.concurrency:
            return self.concurrency
        return EMBEDDED_MODEL_PLACES if model in LOCAL_ALIASES else 0

    def gate(self, model: str) -> ModelGate | None:
        """The gate of `model` (None when it has none)."""
        with self._lock:
            if model not in self._gates:
                size = self.size_for(model)
                self._gates[model] = ModelGate(size, self.tenant_places) if size else None
            return self._gates[model]


def model_name(serialized: Any, kwargs: dict[str, Any]) -> str:
    """The model a call goes to, from LangChain's callback arguments."""
    metadata = kwargs.get("metadata") or {}
    params = kwargs.get("invocation_params") or {}
    name = metadata.get("ls_model_name") or params.get("model") or params.get("model_name")
    if not name and isinstance(serialized, dict):
        name = serialized.get("name")
    return str(name or UNNAMED_MODEL)


class RunMonitor(BaseCallbackHandler):
    """One run's model calls and retrievals: gates each model call and times calls, retrievals and waits.
    Its callbacks run inline in the thread about to call the model (the graph runs synchronously), so blocking
    in `on_chat_model_start` holds exactly that call."""

    run_inline = True
    raise_error = True  # RunAbandoned must reach the model call (it then fails instead of waiting)

    def __init__(self, gates: ModelGates, abandoned: Callable[[], bool], tenant: str = "") -> None:
        self.gates = gates
        self.abandoned = abandoned
        self.tenant = tenant  # whose places at the model gates the run's calls take
        self.admitted = time.monotonic()
        self._lock = threading.Lock()
        self.models: dict[uuid.UUID, float] = {}
        self.retrievals: dict[uuid.UUID, float] = {}
        self._held: dict[uuid.UUID, ModelGate] = {}
        self._waiting: dict[uuid.UUID, float] = {}  # call -> since when it waits for the model
        self._waited = 0.0  # finished waits, merged (parallel waits of one run count once)
        self._idle_since: float | None = None  # when the run's first current waiter started waiting
        self.graph_started: float | None = None  # when the graph began (after the thread's lock was taken)

    def admit(self) -> None:
        """The run got its worker slot now (its priority at the model gates)."""
        self.admitted = time.monotonic()

    def worked_s(self) -> float:
        """Seconds of the run's own work so far: since its graph started, less its waits for the model."""
        if self.graph_started is None:
            return 0.0
        return time.monotonic() - self.graph_started - self.waited_s()

    def _start_model(self, run_id: uuid.UUID, serialized: Any, kwargs: dict[str, Any]) -> None:
        if self.abandoned():
            raise RunAbandoned("the request no longer waits for this run")
        gate = self.gates.gate(model_name(serialized, kwargs))
        if gate is not None:
            self._begin_wait(run_id)
            try:
                gate.acquire(self.admitted, self.abandoned, self.tenant)
            finally:
                self._end_wait(run_id)
        with self._lock:
            if gate is not None:
                self._held[run_id] = gate
            self.models[run_id] = time.monotonic()

    def _begin_wait(self, run_id: uuid.UUID) -> None:
        with self._lock:
            now = time.monotonic()
            if not self._waiting:
                self._idle_since = now
            self._waiting[run_id] = now

    def _end_wait(self, run_id: uuid.UUID) -> None:
        with self._lock:
            self._waiting.pop(run_id, None)
            if not self._waiting and self._idle_since is not None:
                self._waited += time.monotonic() - self._idle_since
                self._idle_since = None

    def _end_model(self, run_id: uuid.UUID) -> None:
        with self._lock:
            self.models.pop(run_id, None)
            gate = self._held.pop(run_id, None)
        if gate is not None:
            gate.release(self.tenant)

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: uuid.UUID, **kwargs: Any
    ) -> None:
        self._start_model(run_id, serialized, kwargs)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._start_model(run_id, serialized, kwargs)

    def on_llm_end(self, response: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._end_model(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        self._end_model(run_id)

    def release_all(self) -> None:
        """Give back every permit the run still holds (its stream was closed during a model call)."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
            self.models.clear()
        for gate in held:
            gate.release(self.tenant)

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        if kwargs.get("parent_run_id") is None and self.graph_started is None:
            self.graph_started = time.monotonic()
        metadata = kwargs.get("metadata") or {}
        if kwargs.get("name") == RETRIEVAL_NODE and metadata.get("langgraph_node") == RETRIEVAL_NODE:
            with self._lock:
                self.retrievals[run_id] = time.monotonic()

    def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        with self._lock:
            self.retrievals.pop(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        with self._lock:
            self.retrievals.pop(run_id, None)

    def waited_s(self) -> float:
        """Seconds the run has spent waiting for the model so far (including a wait in progress)."""
        with self._lock:
            current = time.monotonic() - self._idle_since if self._idle_since is not None else 0.0
            return self._waited + current

    def longest_wait_s(self) -> float:
        """How long the run's oldest waiting call has waited (0 when none waits)."""
        with self._lock:
            oldest = min(self._waiting.values(), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def overdue(self, model_s: float, retrieval_s: float, model_source: str = "") -> str | None:
        """Why the run must stop now (a model call or a retrieval past its limit), or None."""
        now = time.monotonic()
        with self._lock:
            oldest_model = min(self.models.values(), default=now)
            oldest_retrieval = min(self.retrievals.values(), default=now)
        if now - oldest_model > model_s:
            origin = f", {model_source}" if model_source else ""
            return f"a model call took longer than {model_s:g} s (RAG_API_MODEL_TIMEOUT_S{origin})"
        if now - oldest_retrieval > retrieval_s:
            return f"a retrieval took longer than {retrieval_s:g} s (RAG_API_RETRIEVAL_TIMEOUT_S)"
        return None
