"""One ingest at a time per tenant and collection, across processes and threads: two concurrent ingests of a
file would both embed it and the second catalog insert would fail. The second one waits (saying so), then
finds the file unchanged; it gives up with IngestBusyError after INGEST_LOCK_TIMEOUT_S (CLI exit 1 / 409).
The lock is persistence.thread_lock's (a lock file, or a PostgreSQL advisory lock that also excludes other
hosts), released when a process dies and re-entrant in its thread.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, ParamSpec, TypeVar, cast

from config.settings import Settings
from persistence.thread_lock import ThreadBusyError, thread_lock
from persistence.vector_store import DEFAULT_COLLECTION

if TYPE_CHECKING:
    from retrieval.knowledge_base import KnowledgeBase  # retrieval.ingest imports this module

logger = logging.getLogger(__name__)

#: Prefix of the lock name: keeps an ingest's lock apart from any thread's (thread ids hold no NUL).
LOCK_NAME_PREFIX = "\x00ingest\x1f"
#: Seconds an ingest waits for another ingest into the same tenant and collection before 'ingest busy'
#: (long enough for a typical folder's ingest, short enough that a stuck one is reported).
INGEST_LOCK_TIMEOUT_S = 600.0

P = ParamSpec("P")
R = TypeVar("R")


class IngestBusyError(ThreadBusyError):
    """Another ingest into the same tenant and collection did not finish within the wait allowed.

    A ThreadBusyError so every caller maps it as a busy resource the user can retry (CLI exit 1, HTTP 409)."""


def scope_name(tenant: str, collection: str) -> str:
    """How a message names the locked scope."""
    return f"collection {collection!r} of tenant {tenant!r}"


@contextmanager
def ingest_lock(
    settings: Settings,
    tenant: str | None = None,
    collection: str | None = None,
    *,
    on_wait: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
) -> Iterator[None]:
    """Hold the ingest lock of one tenant's collection for the block: `on_wait` hears one line when it must
    wait, up to `timeout_s` (default INGEST_LOCK_TIMEOUT_S) before IngestBusyError. Re-entrant."""
    tenant = tenant or settings.default_tenant
    collection = collection or DEFAULT_COLLECTION
    name = f"{LOCK_NAME_PREFIX}{tenant}\x1f{collection}"
    wait = INGEST_LOCK_TIMEOUT_S if timeout_s is None else timeout_s
    scope = scope_name(tenant, collection)
    with ExitStack() as stack:
        try:
            stack.enter_context(thread_lock(settings, name, 0))
        except ThreadBusyError:
            if wait <= 0:
                raise IngestBusyError(
                    f"another ingest into {scope} is running; skipped (no wait allowed): "
                    "run it again when that one has finished"
                ) from None
            (on_wait or logger.warning)(
                f"waiting for another ingest into {scope} to finish (up to {wait:g} s, INGEST_LOCK_TIMEOUT_S)"
            )
            try:
                stack.enter_context(thread_lock(settings, name, wait))
            except ThreadBusyError:
                raise IngestBusyError(
                    f"another ingest into {scope} is still running (waited {wait:g} s, "
                    "INGEST_LOCK_TIMEOUT_S); run it again when that one has finished"
                ) from None
        yield


def one_ingest_per_collection(function: Callable[P, R]) -> Callable[P, R]:
    """Run `function(kb, ..., tenant=..., collection=...)` (`ingest_paths`) under the ingest lock of that
    scope, the settings' defaults when not given. A decorator, so the ingestion code stays as it was."""

    @functools.wraps(function)
    def locked(*args: P.args, **kwargs: P.kwargs) -> R:
        settings = cast("KnowledgeBase", args[0] if args else kwargs["kb"]).settings
        tenant, collection = kwargs.get("tenant"), kwargs.get("collection")
        with ingest_lock(
            settings,
            tenant if isinstance(tenant, str) else None,
            collection if isinstance(collection, str) else None,
        ):
            return function(*args, **kwargs)

    return locked
