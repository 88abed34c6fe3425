"""Threads (conversations) of the checkpoint store: list / delete / prune them per tenant, on the SQLite file
or PostgreSQL alike through LangGraph's saver of that location; SQL on the saver's tables only where there
is no public API (naming threads, keeping a thread's latest checkpoint, VACUUM).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver

from persistence.saver_mixins import PRUNE_STATEMENTS, prune_parameters
from persistence.thread_access import THREAD_SCOPE_SEPARATOR as THREAD_SCOPE_SEPARATOR
from persistence.thread_access import CheckpointLookup as CheckpointLookup
from persistence.thread_access import ThreadAccessError as ThreadAccessError
from persistence.thread_access import check_thread_access as check_thread_access
from persistence.thread_access import checkpoint_values
from persistence.thread_access import resolve_thread_id as resolve_thread_id
from persistence.thread_access import root_config as root_config
from persistence.thread_access import scoped_thread_id as scoped_thread_id
from persistence.thread_access import thread_owner as thread_owner
from persistence.thread_access import visible_thread_id as visible_thread_id

if TYPE_CHECKING:
    from persistence.postgres_checkpoints import PostgresLocation

#: Where a deployment's conversations live: the SQLite checkpoint file, or (RAG_DATABASE_URL=postgresql://)
#: the PostgreSQL database; persistence.checkpointer.checkpoint_location(settings) says which.
CheckpointLocation: TypeAlias = "Path | PostgresLocation"

#: Seconds a housekeeping command waits for a turn's write transaction on the file.
SQLITE_BUSY_TIMEOUT_S = 30.0

#: Holds a thread while it is deleted or pruned (the CLI passes the thread lock, so no turn is cut).
ThreadGuard = Callable[[str], AbstractContextManager[object]]


def _unguarded(_thread_id: str) -> AbstractContextManager[object]:
    return nullcontext()


@dataclass(frozen=True)
class ThreadSummary:
    """One conversation in the checkpoint file."""

    thread_id: str
    checkpoints: int
    latest_checkpoint_id: str
    owner: str | None = None
    """Tenant of the thread's first turn (None: no turn has completed its start yet)."""
    first_question: str = ""
    """The conversation's first question, as stored (what a person recognises a thread by)."""
    turns: int = 0
    """Questions asked on the thread (human messages of its latest checkpoint)."""
    last_activity: str = ""
    """When its latest checkpoint was written (ISO 8601, UTC)."""


def thread_summary(
    thread_id: str, checkpoints: int, latest: str, saved: CheckpointTuple | None
) -> ThreadSummary:
    """A thread's summary: owner, first question, turn count and last activity from its latest root
    checkpoint."""
    values = checkpoint_values(saved)
    questions = [m for m in values.get("messages") or [] if getattr(m, "type", "") == "human"]
    first = str(questions[0].content) if questions else ""
    return ThreadSummary(
        thread_id,
        checkpoints,
        latest,
        owner=thread_owner(values),
        first_question=" ".join(first.split()),
        turns=len(questions),
        last_activity=str(saved.checkpoint.get("ts") or "") if saved is not None else "",
    )


def require_checkpoints(location: CheckpointLocation) -> None:
    """FileNotFoundError when no conversation was ever stored at a SQLite location (a database server
    always has a place for them: an empty one just holds no thread)."""
    if isinstance(location, Path) and not location.exists():
        raise FileNotFoundError(f"no checkpoint file at {location} (no conversation yet)")


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to an existing checkpoint file (looking never creates one), committed and closed."""
    require_checkpoints(path)
    connection = sqlite3.connect(str(path), timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False)
    try:
        with connection:
            yield connection
    finally:
        connection.close()


@contextmanager
def _saver(location: CheckpointLocation) -> Iterator[BaseCheckpointSaver[Any]]:
    """LangGraph's saver of a location, outside any run (so not owner-checked itself: callers check)."""
    if not isinstance(location, Path):
        yield location.saver()
        return
    with _connect(location) as connection:
        yield SqliteSaver(connection)


def _thread_config(thread_id: str) -> RunnableConfig:
    """The config that lists a thread's checkpoints in every namespace."""
    return {"configurable": {"thread_id": str(thread_id)}}


def stored_thread_id(location: CheckpointLocation, tenant: str, thread_id: str) -> str:
    """resolve_thread_id against a checkpoint location (the CLI's `rag threads` and `rag summarize`)."""
    if isinstance(location, Path) and not location.exists():
        return scoped_thread_id(tenant, thread_id)
    with _saver(location) as saver:
        return resolve_thread_id(tenant, thread_id, lambda stored: saver.get_tuple(root_config(stored)))


#: Threads with their checkpoint counts, most recently active first (ids are time-ordered).
THREADS_SQL = (
    "SELECT thread_id, COUNT(*), MAX(checkpoint_id) FROM checkpoints "
    "GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC"
)


def _thread_rows(location: CheckpointLocation) -> list[tuple[str, int, str]]:
    """(thread id, checkpoints, latest checkpoint id) of every thread, most recently active first: one query
    on the saver's table (the public `list(None)` deserializes every checkpoint, 8x slower)."""
    if not isinstance(location, Path):
        return location.saver().thread_rows()
    with _connect(location) as connection:
        return [(str(t), int(n), str(latest)) for t, n, latest in connection.execute(THREADS_SQL)]


def list_threads(location: CheckpointLocation, tenant: str | None = None) -> list[ThreadSummary]:
    """Threads, most recently active first (checkpoint ids are time-ordered); with `tenant`, only that
    tenant's threads (threads nobody owns yet are nobody's to list). Facts from each thread's latest root
    checkpoint, read with the saver's `get_tuple`."""
    rows = _thread_rows(location)
    with _saver(location) as saver:
        summaries = [
            thread_summary(thread, count, latest, saver.get_tuple(root_config(thread)))
            for thread, count, latest in rows
        ]
    if tenant is None:
        return summaries
    return [summary for summary in summaries if summary.owner == tenant]


def delete_thread(location: CheckpointLocation, thread_id: str, tenant: str | None = None) -> bool:
    """Remove a thread's checkpoints and writes (the saver's own delete_thread); False when it did not
    exist. With `tenant`, a thread of another tenant raises ThreadAccessError and is left intact; an unowned
    thread may be deleted."""
    with _saver(location) as saver:
        if next(iter(saver.list(_thread_config(thread_id), limit=1)), None) is None:
            return False
        if tenant is not None:
            saved = saver.get_tuple(root_config(thread_id))
            check_thread_access(thread_id, thread_owner(checkpoint_values(saved)), tenant)
        saver.delete_thread(str(thread_id))
    return True


def _keep_latest_checkpoint(location: CheckpointLocation, thread_id: str) -> int:
    """Drop all but the thread's newest checkpoint; returns how many checkpoints went. The savers' own
    keep-newest (what bounds a thread after each save), not the public `prune`: that one says nothing of
    how many went, and SqliteSaver has none."""
    if not isinstance(location, Path):
        return location.saver().keep_newest(thread_id, 1)
    with _connect(location) as connection:
        writes, checkpoints = PRUNE_STATEMENTS
        connection.execute(writes, prune_parameters(thread_id, 1))
        return int(connection.execute(checkpoints, prune_parameters(thread_id, 1)).rowcount)


def prune_threads(
    location: CheckpointLocation, keep: int, tenant: str | None = None, guard: ThreadGuard = _unguarded
) -> dict[str, int]:
    """Keep the `keep` newest threads (each with only its latest checkpoint); return what was removed.
    With `tenant`, only that tenant's threads are counted, kept and removed. Each thread is handled inside
    `guard(thread_id)` (the thread lock: a turn running on it finishes first). A SQLite file is compacted
    at the end (VACUUM, no saver API for it); PostgreSQL reclaims the space by its own autovacuum."""
    if keep < 0:
        raise ValueError(f"--keep must be >= 0, got {keep}")
    threads = list_threads(location, tenant)
    removed_threads = 0
    for summary in threads[keep:]:
        with guard(summary.thread_id):
            removed_threads += int(delete_thread(location, summary.thread_id))
    removed_checkpoints = 0
    for summary in threads[:keep]:
        with guard(summary.thread_id):
            removed_checkpoints += _keep_latest_checkpoint(location, summary.thread_id)
    if isinstance(location, Path):
        with _connect(location) as connection:
            connection.execute("VACUUM")
    return {"threads_removed": removed_threads, "checkpoints_removed": removed_checkpoints}
