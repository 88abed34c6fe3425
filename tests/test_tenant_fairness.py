"""Fairness between tenants: the model gate's per-tenant places and order, and the per-tenant run slots
(service.api.gate.ModelGate, service.api.tenant_runs.TenantRuns).

The gate is driven by real threads, each blocked in `acquire` until the test frees a place; nothing here
depends on how long a call takes, only on which waiter gets a freed place.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from nodes.resources import Resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.api.app import create_app
from service.api.gate import ModelGate
from service.api.tenant_runs import TenantRuns
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app


def held_by(gate: ModelGate) -> dict[str, int]:
    """The gate's places held now, per tenant holding any."""
    with gate._condition:
        return dict(gate._held)


def running(runs: TenantRuns) -> dict[str, int]:
    """The worker slots held now, per tenant holding any."""
    with runs._lock:
        return dict(runs._running)


def waiting(runs: TenantRuns) -> dict[str, int]:
    """The requests waiting for a slot now, per tenant with any."""
    with runs._lock:
        return {tenant: len(queue) for tenant, queue in runs._waiting.items() if queue}


#: Seconds a test waits for a thread to reach the gate (or take a place) before it fails.
WAIT_LIMIT_S = 10.0


def until(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` until true (fails naming `what` after WAIT_LIMIT_S)."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


class Caller:
    """A thread that takes one place at `gate` for `tenant` and records the order it got it in."""

    def __init__(self, gate: ModelGate, tenant: str, priority: float, served: list[str]) -> None:
        self.gate, self.tenant, self.priority, self.served = gate, tenant, priority, served
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.gate.acquire(self.priority, lambda: False, self.tenant)
        self.served.append(self.tenant)

    def start(self) -> Caller:
        self.thread.start()
        return self


def start_waiters(gate: ModelGate, tenants: list[tuple[str, float]], served: list[str]) -> list[Caller]:
    """Start one caller per (tenant, priority), one after another, each queued before the next starts."""
    callers = []
    for tenant, priority in tenants:
        before = gate.waiting
        callers.append(Caller(gate, tenant, priority, served).start())
        until(lambda before=before: gate.waiting == before + 1 or len(served) > 0, f"{tenant} to queue")
    return callers


def test_a_flooding_tenant_holds_no_more_than_its_places() -> None:
    gate = ModelGate(size=4, tenant_places=1)
    served: list[str] = []
    callers = start_waiters(gate, [("alpha", float(i)) for i in range(5)], served)
    until(lambda: served == ["alpha"], "alpha's first call")
    time.sleep(0.3)  # several polls of the gate: three places stay free, still alpha gets no second one
    assert gate.busy == 1 and gate.waiting == 4 and held_by(gate) == {"alpha": 1}
    # Another tenant takes a free place at once, beside alpha's.
    bravo = Caller(gate, "bravo", 99.0, served).start()
    until(lambda: "bravo" in served, "bravo's call")
    assert held_by(gate) == {"alpha": 1, "bravo": 1}
    gate.release("alpha")
    until(lambda: served.count("alpha") == 2, "alpha's next call")
    assert held_by(gate) == {"alpha": 1, "bravo": 1}
    for count in (3, 4, 5):  # each of alpha's calls ends before its next one takes the place
        gate.release("alpha")
        until(lambda count=count: served.count("alpha") == count, f"alpha's call {count}")
        assert held_by(gate)["alpha"] == 1
    gate.release("alpha")
    gate.release("bravo")
    assert gate.busy == 0 and held_by(gate) == {}
    for caller in [*callers, bravo]:
        caller.thread.join(WAIT_LIMIT_S)
    assert served.count("alpha") == 5


def test_the_freed_place_goes_to_the_waiting_tenant_not_to_the_flooding_one() -> None:
    """One place (the embedded model): alpha holds it with older runs queued; bravo, newer than all of them,
    gets the place next because it holds none and was served least recently."""
    gate = ModelGate(size=1, tenant_places=1)
    gate.acquire(0.0, lambda: False, "alpha")
    served: list[str] = []
    start_waiters(gate, [("alpha", 1.0), ("alpha", 2.0), ("bravo", 50.0), ("alpha", 3.0)], served)
    gate.release("alpha")
    until(lambda: len(served) == 1, "the next call")
    assert served == ["bravo"]
    gate.release("bravo")
    until(lambda: len(served) == 2, "the call after")
    assert served == ["bravo", "alpha"]


def test_tenants_alternate_when_both_queue() -> None:
    gate = ModelGate(size=1, tenant_places=1)
    gate.acquire(0.0, lambda: False, "warm-up")
    served: list[str] = []
    queued = [("alpha", 1.0), ("alpha", 2.0), ("alpha", 3.0), ("bravo", 4.0), ("bravo", 5.0), ("bravo", 6.0)]
    start_waiters(gate, queued, served)
    owner = "warm-up"
    for count in range(1, 7):
        gate.release(owner)
        until(lambda count=count: len(served) == count, f"call {count}")
        owner = served[-1]
    gate.release(owner)
    assert served == ["alpha", "bravo", "alpha", "bravo", "alpha", "bravo"]


def test_within_one_tenant_the_oldest_run_goes_first_and_no_bound_means_all_places() -> None:
    gate = ModelGate(size=1, tenant_places=0)
    gate.acquire(0.0, lambda: False, "alpha")
    served_priorities: list[float] = []

    def wait(priority: float) -> None:
        gate.acquire(priority, lambda: False, "alpha")
        served_priorities.append(priority)
        gate.release("alpha")

    threads = [threading.Thread(target=wait, args=(p,), daemon=True) for p in (3.0, 1.0, 2.0)]
    for thread in threads:
        thread.start()
    until(lambda: gate.waiting == 3, "three waiters")
    gate.release("alpha")
    for thread in threads:
        thread.join(WAIT_LIMIT_S)
    assert served_priorities == [1.0, 2.0, 3.0]
    unbounded = ModelGate(size=3, tenant_places=0)
    for _ in range(3):
        unbounded.acquire(0.0, lambda: False, "alpha")
    assert held_by(unbounded) == {"alpha": 3}


# --- run slots per tenant ---------------------------------------------------------------------------------


def test_a_tenant_over_its_runs_waits_and_another_tenant_does_not() -> None:
    async def scenario() -> None:
        runs = TenantRuns(per_tenant=2)
        assert await runs.acquire("alpha", 1.0) and await runs.acquire("alpha", 1.0)
        third = asyncio.ensure_future(runs.acquire("alpha", 5.0))
        await asyncio.sleep(0.05)
        assert not third.done() and waiting(runs) == {"alpha": 1}
        assert await runs.acquire("bravo", 0.01)  # another tenant: a slot at once
        runs.release("alpha")  # the slot passes to alpha's waiter
        assert await asyncio.wait_for(third, 1.0) is True
        assert running(runs) == {"alpha": 2, "bravo": 1} and waiting(runs) == {}

    asyncio.run(scenario())


def test_a_wait_past_its_limit_holds_no_slot() -> None:
    async def scenario() -> None:
        runs = TenantRuns(per_tenant=1)
        assert await runs.acquire("alpha", 1.0)
        assert await runs.acquire("alpha", 0.05) is False
        runs.release("alpha")
        assert running(runs) == {} and waiting(runs) == {}
        assert await runs.acquire("alpha", 0.05)  # free again: the timed-out waiter took nothing

    asyncio.run(scenario())


def test_a_cancelled_waiter_passes_its_slot_on() -> None:
    async def scenario() -> None:
        runs = TenantRuns(per_tenant=1)
        assert await runs.acquire("alpha", 1.0)
        leaving = asyncio.ensure_future(runs.acquire("alpha", 5.0))
        staying = asyncio.ensure_future(runs.acquire("alpha", 5.0))
        await asyncio.sleep(0.05)
        leaving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        runs.release("alpha")
        assert await asyncio.wait_for(staying, 1.0) is True
        assert running(runs) == {"alpha": 1} and waiting(runs) == {}

    asyncio.run(scenario())


def test_a_slot_freed_from_a_worker_thread_wakes_the_waiter() -> None:
    async def scenario() -> None:
        runs = TenantRuns(per_tenant=1)
        assert await runs.acquire("alpha", 1.0)
        waiter = asyncio.ensure_future(runs.acquire("alpha", 5.0))
        await asyncio.sleep(0.05)
        threading.Thread(target=runs.release, args=("alpha",)).start()
        assert await asyncio.wait_for(waiter, 2.0) is True

    asyncio.run(scenario())


# --- over HTTP: a flooding tenant leaves workers to the others ---------------------------------------------

ALPHA_KEY, BRAVO_KEY = "key-alpha", "key-bravo"
HELD_QUESTION = "What is the largest planet in the Solar System?"


def test_a_tenant_waiting_for_its_runs_holds_no_worker(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> None:
    """Two workers, one run per tenant: alpha's first run holds the model, its second waits for alpha's
    turn without a worker, so bravo's question still finds the second worker and is answered."""
    release = threading.Event()
    entered = threading.Event()

    def generate(messages: list[BaseMessage]) -> str:
        if any(HELD_QUESTION in str(message.content) for message in messages):
            entered.set()
            release.wait(WAIT_LIMIT_S * 3)
        return "Jupiter is the largest planet [1]."

    resources = install(TaskChatModel(replies={"generate": generate}), strength="weak")
    resources.knowledge_base = make_kb(resources.settings)
    corpus = write_corpus(tmp_path / "corpus", {"jupiter.md": "# Jupiter\n\nJupiter is the largest planet."})
    ingest_paths(resources.knowledge_base, list(corpus.values()))
    settings = resources.settings.model_copy(
        update={"api_workers": 2, "api_tenant_runs": 1, "api_keys": f"{ALPHA_KEY}:default,{BRAVO_KEY}:bravo"}
    )
    app = create_app(settings)
    with serve_app(app) as client, ThreadPoolExecutor(2) as pool:
        alpha = [
            pool.submit(
                client.post,
                "/api/v1/rag/generate",
                json={"query": HELD_QUESTION},
                headers={"X-API-Key": ALPHA_KEY},
            )
            for _ in range(2)
        ]
        try:
            assert entered.wait(WAIT_LIMIT_S), "alpha's run never reached the model"
            tenant_runs = app.state.api.engine.tenant_runs
            until(lambda: waiting(tenant_runs) == {"default": 1}, "alpha's second request to wait")
            bravo = client.post(
                "/api/v1/rag/generate",
                json={"query": "Which tea is brewed at 90 degrees?"},
                headers={"X-API-Key": BRAVO_KEY},
                timeout=WAIT_LIMIT_S * 2,
            )
            assert bravo.status_code == 200, bravo.text
            assert not release.is_set() and running(tenant_runs) == {"default": 1}
        finally:
            release.set()
        assert [future.result(timeout=WAIT_LIMIT_S * 3).status_code for future in alpha] == [200, 200]
    assert running(app.state.api.engine.tenant_runs) == {}
