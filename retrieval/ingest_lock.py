"""One ingest at a time per tenant and collection, across processes and across threads of one process.

Why: two `rag ingest` runs of the same file (or two uploads of it) both found it unknown, both embedded it,
and the second catalog insert died on the unique source with an unhandled database error and a stack
trace; two processes also wrote the same embedded Chroma collection at once, which its persistent index does
not support. So an ingest holds its collection for the whole run: the second one waits (saying so in one
line) and then finds the file unchanged and skips it, so the file is indexed exactly once. It gives up with
IngestBusyError after INGEST_LOCK_TIMEOUT_S (timeout 0: at once), one line, CLI exit 1 / HTTP 409, like a
busy thread.

How: the lock of persistence.thread_lock under a name of its own (a lock file under `<data_dir>/locks`,
or a PostgreSQL advisory lock when RAG_DATABASE_URL names one), so it has the same guarantees: released by
the kernel (or the server) when a process dies, re-entrant in the thread that holds it. Why not the
`filelock` package here (persistence/database.py's migration lock uses it): this module writes no lock file
of its own, and one lock with one wait and one message for both stores is what keeps an ingest exclusive
across the hosts of a PostgreSQL deployment, where a lock file excludes nobody.
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
#: Seconds an ingest waits for another ingest into the same tenant and collection (another process, or
#: another request) before it gives up with 'ingest busy' (CLI exit 1, HTTP 409); 0 = skip at once. Long
#: enough for a typical folder's ingest to finish, short enough that a stuck one is reported.
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
    """Hold the ingest lock of one tenant's collection (defaults: the settings') for the block.

    Taken at once when free; otherwise `on_wait` (default: a logging warning) gets one line saying what it
    waits for, and the wait lasts up to `timeout_s` (default INGEST_LOCK_TIMEOUT_S) before
    IngestBusyError. Re-entrant: a caller that holds it (the CLI, to say it is waiting) may call
    `ingest_paths`, which takes it too, without waiting on itself."""
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
