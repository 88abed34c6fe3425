"""Conversations on PostgreSQL: LangGraph's Postgres savers (so the server, the CLI and the API read one
another's threads) with the SQLite savers' owner check and keep-last-N bound, one line
(CheckpointStoreUnavailableError) for a server that cannot be reached, and one process-wide connection
pool per URL used without the saver's one-connection lock (so the API's worker threads do not queue behind
each other), checking a connection before lending it (a restarted server costs no turn). Tables are set up
once per process under an advisory lock.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from persistence.advisory import advisory_lock
from persistence.errors import StoreUnavailableError
from persistence.saver_mixins import (
    KEEP_LATEST,
    AsyncKeepNewestSaver,
    KeepNewestSaver,
    OwnerCheckedSaver,
    prune_strategy,
)
from persistence.urls import connection_kwargs, libpq_url, pool_options, shown_url, unavailable_message

#: Advisory lock key held while the checkpoint tables are created or migrated ("rag_ckpt").
SETUP_ADVISORY_LOCK_KEY = 0x7261675F636B7074

# The oldest checkpoint kept in a namespace of a thread: the N-th newest (NULL when fewer); ids are uuid6.
_OLDEST_KEPT = (
    "(SELECT kept.checkpoint_id FROM checkpoints AS kept WHERE kept.thread_id = %(thread)s "
    "AND kept.checkpoint_ns = {table}.checkpoint_ns "
    "ORDER BY kept.checkpoint_id DESC LIMIT 1 OFFSET %(offset)s)"
)
#: Keep the newest N checkpoints of a thread: pending writes of the dropped checkpoints go first (the kept
#: ones' stay), then the checkpoints, returning the channel versions they referenced.
KEEP_WRITES_SQL = "DELETE FROM checkpoint_writes WHERE thread_id = %(thread)s AND checkpoint_id < " + (
    _OLDEST_KEPT.format(table="checkpoint_writes")
)
KEEP_CHECKPOINTS_SQL = (
    "DELETE FROM checkpoints WHERE thread_id = %(thread)s AND checkpoint_id < "
    + _OLDEST_KEPT.format(table="checkpoints")
    + " RETURNING checkpoint_ns, checkpoint -> 'channel_versions' AS versions"
)
#: Channel values (blobs) only dropped checkpoints referenced (never one a concurrent save just wrote).
KEEP_BLOBS_SQL = """
DELETE FROM checkpoint_blobs AS b
USING unnest(%(ns)s::text[], %(channels)s::text[], %(versions)s::text[]) AS freed(ns, channel, version)
WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = freed.ns AND b.channel = freed.channel
AND b.version = freed.version
AND NOT EXISTS (
    SELECT 1 FROM checkpoints AS c
    WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = freed.ns
    AND c.checkpoint -> 'channel_versions' ->> freed.channel = freed.version
)
"""
#: Cursors of the savers' own pooled connections: binary transfer and dict rows, as the native savers use.
CURSOR_OPTIONS: dict[str, Any] = {"binary": True, "row_factory": dict_row}
#: Threads, most recently active first, with their checkpoint counts (ids are time-ordered).
THREADS_SQL = (
    "SELECT thread_id, COUNT(*) AS checkpoints, MAX(checkpoint_id) AS latest FROM checkpoints "
    "GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC"
)


class CheckpointStoreUnavailableError(StoreUnavailableError):
    """The PostgreSQL server of the conversations cannot be reached or refused the work (CLI exit 1,
    HTTP 503); nothing was changed."""


@contextmanager
def reachable(url: str) -> Iterator[None]:
    """Turn a connection failure (refused, timed out, pool exhausted, server gone mid-query) into
    CheckpointStoreUnavailableError naming the server."""
    try:
        yield
    except psycopg.OperationalError as error:  # PoolTimeout is one
        raise CheckpointStoreUnavailableError(unavailable_message(url, error)) from error


_SET_UP: set[str] = set()
_SET_UP_GUARD = threading.Lock()


def setup_checkpoint_tables(url: str, connect_timeout_s: float) -> None:
    """Create or migrate the checkpoint tables once per process and URL, under an advisory lock (the
    saver's migrations are not safe to run twice at once)."""
    conninfo = libpq_url(url)
    with _SET_UP_GUARD:
        if conninfo in _SET_UP:
            return
        with reachable(url), psycopg.connect(conninfo, **connection_kwargs(connect_timeout_s)) as conn:
            with advisory_lock(conn, SETUP_ADVISORY_LOCK_KEY):
                PostgresSaver(conn).setup()
        _SET_UP.add(conninfo)


SyncPool = ConnectionPool[psycopg.Connection[DictRow]]
_POOLS: dict[tuple[str, int], SyncPool] = {}
_POOLS_GUARD = threading.Lock()


def shared_pool(
    url: str, *, size: int, connect_timeout_s: float
) -> ConnectionPool[psycopg.Connection[DictRow]]:
    """The process's connection pool to `url` (opened on first use, closed at exit)."""
    key = (libpq_url(url), size)
    with _POOLS_GUARD:
        pool = _POOLS.get(key)
        if pool is None or pool.closed:
            pool = ConnectionPool(
                key[0],
                max_size=size,
                check=ConnectionPool.check_connection,
                open=False,
                **pool_options(connect_timeout_s),
            )
            pool.open(wait=False)
            _POOLS[key] = pool
        return pool


def close_pools() -> None:
    """Close every pool this process opened (tests, shutdown); the next saver opens a new one."""
    with _POOLS_GUARD:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()


atexit.register(close_pools)


def keep_parameters(thread_id: str, keep: int) -> dict[str, Any]:
    """Parameters of KEEP_WRITES_SQL / KEEP_CHECKPOINTS_SQL: keep the `keep` newest checkpoints (>= 1)."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    return {"thread": str(thread_id), "offset": keep - 1}


def freed_blobs(thread_id: str, deleted: Sequence[DictRow]) -> dict[str, Any]:
    """Parameters of KEEP_BLOBS_SQL from the rows KEEP_CHECKPOINTS_SQL returned."""
    freed = sorted(
        {
            (row["checkpoint_ns"], channel, str(version))
            for row in deleted
            for channel, version in (row["versions"] or {}).items()
        }  # fmt: skip
    )
    return {
        "thread": str(thread_id),
        "ns": [ns for ns, _, _ in freed],
        "channels": [channel for _, channel, _ in freed],
        "versions": [version for _, _, version in freed],
    }


class PruningPostgresSaver(KeepNewestSaver, OwnerCheckedSaver, PostgresSaver):
    """LangGraph's sync Postgres saver, owner-checked, keeping at most `keep` checkpoints per thread (0 =
    all); connection failures are CheckpointStoreUnavailableError."""

    def __init__(self, conn: Any, url: str, *, keep: int = 0) -> None:
        super().__init__(conn)
        self.url = url
        self.keep = keep

    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[psycopg.Cursor[DictRow]]:
        """A cursor on a pooled connection. The native saver serializes every call on one lock (it was
        written for a single connection); with a pool each call has a connection of its own."""
        with reachable(self.url):
            if not isinstance(self.conn, ConnectionPool) or self.pipe is not None:
                with super()._cursor(pipeline=pipeline) as cur:
                    yield cur
                return
            with self.conn.connection() as conn, conn.pipeline() if pipeline else nullcontext():
                with conn.cursor(**CURSOR_OPTIONS) as cur:
                    yield cur

    def keep_newest(self, thread_id: str, keep: int) -> int:
        """Drop the thread's checkpoints beyond the newest `keep` (and what only they used), in one
        transaction; returns how many checkpoints were dropped."""
        parameters = keep_parameters(thread_id, keep)
        with self._cursor() as cur, cur.connection.transaction():
            cur.execute(KEEP_WRITES_SQL, parameters)
            cur.execute(KEEP_CHECKPOINTS_SQL, parameters)
            deleted = cur.fetchall()
            if deleted:
                cur.execute(KEEP_BLOBS_SQL, freed_blobs(thread_id, deleted))
        return len(deleted)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = KEEP_LATEST) -> None:
        """'keep_latest': each thread keeps only its newest checkpoint; 'delete': threads are removed
        (LangGraph's own Postgres prune, which also handles subgraph namespaces)."""
        super().prune([str(thread) for thread in thread_ids], strategy=prune_strategy(strategy))

    def thread_rows(self) -> list[tuple[str, int, str]]:
        """(thread id, checkpoints, latest checkpoint id) of every thread, most recently active first: one
        query on the saver's table, for `rag doctor`'s count (`list` would read every checkpoint)."""
        with self._cursor() as cur:
            cur.execute(THREADS_SQL)
            return [(str(r["thread_id"]), int(r["checkpoints"]), str(r["latest"])) for r in cur.fetchall()]


class PruningAsyncPostgresSaver(AsyncKeepNewestSaver, OwnerCheckedSaver, AsyncPostgresSaver):
    """LangGraph's async Postgres saver (server, `ainvoke`) with the same checks and bounds."""

    def __init__(self, conn: Any, url: str, *, keep: int = 0) -> None:
        super().__init__(conn)
        self.url = url
        self.keep = keep

    @asynccontextmanager
    async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[psycopg.AsyncCursor[DictRow]]:
        """A cursor on a pooled connection (see PruningPostgresSaver._cursor)."""
        with reachable(self.url):
            if not isinstance(self.conn, AsyncConnectionPool) or self.pipe is not None:
                async with super()._cursor(pipeline=pipeline) as cur:
                    yield cur
                return
            async with self.conn.connection() as conn, conn.pipeline() if pipeline else nullcontext():
                async with conn.cursor(**CURSOR_OPTIONS) as cur:
                    yield cur

    async def akeep_newest(self, thread_id: str, keep: int) -> int:
        """Async `PruningPostgresSaver.keep_newest`."""
        parameters = keep_parameters(thread_id, keep)
        async with self._cursor() as cur, cur.connection.transaction():
            await cur.execute(KEEP_WRITES_SQL, parameters)
            await cur.execute(KEEP_CHECKPOINTS_SQL, parameters)
            deleted = await cur.fetchall()
            if deleted:
                await cur.execute(KEEP_BLOBS_SQL, freed_blobs(thread_id, deleted))
        return len(deleted)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = KEEP_LATEST) -> None:
        """'keep_latest': each thread keeps only its newest checkpoint; 'delete': threads are removed."""
        await super().aprune([str(thread) for thread in thread_ids], strategy=prune_strategy(strategy))


def postgres_saver(
    url: str, *, keep: int = 0, pool_size: int = 10, connect_timeout_s: float = 10.0
) -> PruningPostgresSaver:
    """A sync saver on the process's pool to `url`, its tables set up (CheckpointStoreUnavailableError when
    the server cannot be reached within `connect_timeout_s`)."""
    setup_checkpoint_tables(url, connect_timeout_s)
    pool = shared_pool(url, size=pool_size, connect_timeout_s=connect_timeout_s)
    return PruningPostgresSaver(pool, url, keep=keep)


@asynccontextmanager
async def async_postgres_saver(
    url: str, *, keep: int = 0, pool_size: int = 10, connect_timeout_s: float = 10.0
) -> AsyncIterator[PruningAsyncPostgresSaver]:
    """An async saver on a pool of its own (async pools belong to one event loop), closed at the end."""
    await asyncio.to_thread(setup_checkpoint_tables, url, connect_timeout_s)
    pool: AsyncConnectionPool[psycopg.AsyncConnection[DictRow]] = AsyncConnectionPool(
        libpq_url(url),
        max_size=pool_size,
        check=AsyncConnectionPool.check_connection,
        open=False,
        **pool_options(connect_timeout_s),
    )
    await pool.open(wait=False)
    try:
        yield PruningAsyncPostgresSaver(pool, url, keep=keep)
    finally:
        await pool.close()


@dataclass(frozen=True)
class PostgresLocation:
    """Where a deployment's conversations live when RAG_DATABASE_URL names PostgreSQL, with the settings a
    housekeeping command needs to connect (persistence.threads takes it beside a SQLite file's Path)."""

    url: str
    pool_size: int = 10
    connect_timeout_s: float = 10.0

    def saver(self, *, keep: int = 0) -> PruningPostgresSaver:
        """A sync saver on this database (tables set up)."""
        return postgres_saver(
            self.url, keep=keep, pool_size=self.pool_size, connect_timeout_s=self.connect_timeout_s
        )

    def __str__(self) -> str:
        return shown_url(self.url)
