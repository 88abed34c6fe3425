"""A per-tenant bound on the API's worker pool: at most `api_tenant_runs` runs (and searches) of one tenant
hold a worker at once; the tenant's further requests wait on the event loop, holding no thread, so a
flooding tenant queues behind itself only. Thread-safe and not tied to one event loop (the app's engine
outlives a test client's loop): each waiter is a future of its own loop, settled by `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Waiter:
    """One request waiting for its tenant's slot; `granted` (set under the lock) means the slot is its own."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = False


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@dataclass
class TenantRuns:
    """Slots of the worker pool per tenant: `per_tenant` at once (0 = no bound); waiters in arrival order."""

    per_tenant: int
    _running: dict[str, int] = field(default_factory=dict)
    _waiting: dict[str, deque[_Waiter]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def acquire(self, tenant: str, timeout_s: float) -> bool:
        """Take one of `tenant`'s slots within `timeout_s` (False if none); True must be released once."""
        if not self.per_tenant:
            return True
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._running.get(tenant, 0) < self.per_tenant:
                self._running[tenant] = self._running.get(tenant, 0) + 1
                return True
            waiter = _Waiter(loop, loop.create_future())
            self._waiting.setdefault(tenant, deque()).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), timeout_s)
            return True
        except BaseException as error:
            with self._lock:
                if waiter.granted:  # handed over as the wait ended: pass it on
                    self._release_locked(tenant)
                else:
                    self._remove_locked(tenant, waiter)
            if isinstance(error, TimeoutError):
                return False
            raise

    def release(self, tenant: str) -> None:
        """Give one of `tenant`'s slots to its oldest waiter, or free it."""
        if not self.per_tenant:
            return
        with self._lock:
            self._release_locked(tenant)

    def _release_locked(self, tenant: str) -> None:
        queue = self._waiting.get(tenant)
        while queue:
            waiter = queue.popleft()
            try:
                waiter.loop.call_soon_threadsafe(_settle, waiter.future)
            except RuntimeError:  # its event loop is closed: nobody waits there any more
                continue
            waiter.granted = True  # the slot changes hands: the count stays
            return
        left = self._running.get(tenant, 0) - 1
        if left > 0:
            self._running[tenant] = left
        else:
            self._running.pop(tenant, None)
            self._waiting.pop(tenant, None)

    def _remove_locked(self, tenant: str, waiter: _Waiter) -> None:
        queue = self._waiting.get(tenant)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
