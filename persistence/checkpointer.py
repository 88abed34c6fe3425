"""Checkpointers: where conversations (thread state) are stored, and how that storage stays bounded.

SQLite by default (`<data_dir>/checkpoints.sqlite`); PostgreSQL when RAG_DATABASE_URL names it, so several
processes and machines share conversations (persistence.postgres_checkpoints). Storage bounds (checked by
benchmarks/chaos/storage.py): graphs run with `durability=RAG_CHECKPOINT_DURABILITY` ("exit": one checkpoint
per turn instead of 14-24, 11 KB instead of 133 KB per turn; a crashed turn restarts from its beginning), and
the savers keep the newest RAG_CHECKPOINT_KEEP checkpoints per thread (SERVER_CHECKPOINT_KEEP for the server):
no channel of these graphs is a DeltaChannel, so the newest checkpoint alone holds the whole state. Sync and
async savers are separate classes: a sync `invoke` on the async saver raises.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.state import CompiledStateGraph

from config.settings import Settings, get_settings
from core.langgraph_compat import CONFIG_KEY_DURABILITY
from persistence.saver_mixins import (
    KEEP_LATEST,
    PRUNE_STATEMENTS,
    AsyncKeepNewestSaver,
    KeepNewestSaver,
    OwnerCheckedSaver,
    prune_parameters,
    prune_strategy,
)
from persistence.threads import CheckpointLocation
from persistence.urls import DATABASE_POOL_SIZE, postgres_url

if TYPE_CHECKING:
    from persistence.postgres_checkpoints import PruningAsyncPostgresSaver, PruningPostgresSaver


class PruningSqliteSaver(KeepNewestSaver, OwnerCheckedSaver, SqliteSaver):
    """The owner-checked SqliteSaver (a run of one tenant cannot load another's thread) that keeps at
    most `keep` checkpoints per thread (0 = all) and can prune on demand."""

    def __init__(self, conn: sqlite3.Connection, *, keep: int = 0) -> None:
        super().__init__(conn)
        self.keep = keep

    def keep_newest(self, thread_id: str, keep: int) -> int:
        """Drop the thread's checkpoints beyond the newest `keep` (their writes first)."""
        with self.cursor() as cur:
            for statement in PRUNE_STATEMENTS:
                cur.execute(statement, prune_parameters(thread_id, keep))
            return int(cur.rowcount)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = KEEP_LATEST) -> None:
        """'keep_latest': each thread keeps only its newest checkpoint; 'delete': threads are removed."""
        for thread_id in thread_ids:
            if prune_strategy(strategy) == KEEP_LATEST:
                self.keep_newest(str(thread_id), 1)
            else:
                self.delete_thread(str(thread_id))


class PruningAsyncSqliteSaver(AsyncKeepNewestSaver, OwnerCheckedSaver, AsyncSqliteSaver):
    """The owner-checked AsyncSqliteSaver with the same bounds, and the `aprune` the LangGraph server asks
    custom savers for."""

    def __init__(self, conn: aiosqlite.Connection, *, keep: int = 0) -> None:
        super().__init__(conn)
        self.keep = keep

    async def akeep_newest(self, thread_id: str, keep: int) -> int:
        """Async `PruningSqliteSaver.keep_newest`."""
        await self.setup()
        async with self.lock, self.conn.cursor() as cur:
            for statement in PRUNE_STATEMENTS:
                await cur.execute(statement, prune_parameters(thread_id, keep))
            await self.conn.commit()
            return int(cur.rowcount)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = KEEP_LATEST) -> None:
        """'keep_latest': each thread keeps only its newest checkpoint; 'delete': threads are removed."""
        for thread_id in thread_ids:
            if prune_strategy(strategy) == KEEP_LATEST:
                await self.akeep_newest(str(thread_id), 1)
            else:
                await self.adelete_thread(str(thread_id))


#: Commits wait for the write-ahead log, not the disk: the fsyncs took 3.7 of the ~30 ms the graph adds to a
#: question; in WAL mode a committed turn still survives a killed process (only a power cut loses commits).
SQLITE_SYNCHRONOUS = "PRAGMA synchronous=NORMAL"
#: Checkpoints the LangGraph server's saver keeps per thread at least: the server saves after every step;
#: 16 keeps about the latest turn's steps for Studio's history and time travel.
SERVER_CHECKPOINT_KEEP = 16


def _path(settings: Settings | None, path: Path | None) -> Path:
    target = path or (settings or get_settings()).checkpoint_path
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def sqlite_checkpointer(
    settings: Settings | None = None, path: Path | None = None, *, keep: int | None = None
) -> PruningSqliteSaver:
    """A sync SQLite saver keeping `keep` checkpoints per thread (default RAG_CHECKPOINT_KEEP; 0 = all)."""
    connection = sqlite3.connect(str(_path(settings, path)), check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(SQLITE_SYNCHRONOUS)
    saver = PruningSqliteSaver(
        connection, keep=(settings or get_settings()).checkpoint_keep if keep is None else keep
    )
    saver.setup()
    return saver


@asynccontextmanager
async def async_sqlite_checkpointer(
    settings: Settings | None = None, path: Path | None = None, *, keep: int | None = None
) -> AsyncIterator[PruningAsyncSqliteSaver]:
    """An async SQLite saver (for `ainvoke` / `astream` and the LangGraph server)."""
    keep = (settings or get_settings()).checkpoint_keep if keep is None else keep
    async with aiosqlite.connect(str(_path(settings, path))) as connection:
        await connection.execute(SQLITE_SYNCHRONOUS)
        saver = PruningAsyncSqliteSaver(connection, keep=keep)
        await saver.setup()
        yield saver


def checkpoint_location(settings: Settings | None = None) -> CheckpointLocation:
    """Where conversations live: the PostgreSQL database of RAG_DATABASE_URL, else the SQLite file."""
    settings = settings or get_settings()
    url = postgres_url(settings)
    if url is None:
        return settings.checkpoint_path
    from persistence.postgres_checkpoints import PostgresLocation

    return PostgresLocation(url, DATABASE_POOL_SIZE, settings.database_connect_timeout_s)


def postgres_checkpointer(
    settings: Settings | None = None, url: str | None = None, *, keep: int | None = None
) -> PruningPostgresSaver:
    """A sync Postgres saver (process-wide pool) on `url` (default RAG_DATABASE_URL), keeping `keep`
    checkpoints per thread (default RAG_CHECKPOINT_KEEP)."""
    from persistence.postgres_checkpoints import postgres_saver

    settings = settings or get_settings()
    target = url or postgres_url(settings)
    if target is None:
        raise ValueError("RAG_DATABASE_URL does not name a PostgreSQL database (postgresql://...)")
    return postgres_saver(
        target,
        keep=settings.checkpoint_keep if keep is None else keep,
        pool_size=DATABASE_POOL_SIZE,
        connect_timeout_s=settings.database_connect_timeout_s,
    )


def checkpointer_for(
    settings: Settings | None = None, *, keep: int | None = None
) -> PruningSqliteSaver | PruningPostgresSaver:
    """The sync saver the settings name: PostgreSQL when RAG_DATABASE_URL does, else the SQLite file."""
    settings = settings or get_settings()
    if postgres_url(settings) is not None:
        return postgres_checkpointer(settings, keep=keep)
    return sqlite_checkpointer(settings, keep=keep)


@asynccontextmanager
async def async_checkpointer_for(
    settings: Settings | None = None, *, keep: int | None = None
) -> AsyncIterator[PruningAsyncSqliteSaver | PruningAsyncPostgresSaver]:
    """The async saver the settings name (see checkpointer_for)."""
    settings = settings or get_settings()
    keep = settings.checkpoint_keep if keep is None else keep
    url = postgres_url(settings)
    if url is None:
        async with async_sqlite_checkpointer(settings, keep=keep) as saver:
            yield saver
        return
    from persistence.postgres_checkpoints import async_postgres_saver

    async with async_postgres_saver(
        url,
        keep=keep,
        pool_size=DATABASE_POOL_SIZE,
        connect_timeout_s=settings.database_connect_timeout_s,
    ) as saver:
        yield saver


@asynccontextmanager
async def server_checkpointer() -> AsyncIterator[PruningAsyncSqliteSaver | PruningAsyncPostgresSaver]:
    """The factory langgraph.json names: server conversations go where the CLI's go, keeping
    max(RAG_CHECKPOINT_KEEP, SERVER_CHECKPOINT_KEEP) checkpoints per thread (the server saves every step)."""
    settings = get_settings()
    keep = max(settings.checkpoint_keep, SERVER_CHECKPOINT_KEEP)
    async with async_checkpointer_for(settings, keep=keep) as saver:
        yield saver


#: A compiled graph of any state, context and I/O types (with_durability returns the graph's own type).
GraphT = TypeVar("GraphT", bound="CompiledStateGraph[Any, Any, Any, Any]")


def with_durability(
    graph: GraphT, checkpointer: BaseCheckpointSaver[Any] | None, settings: Settings | None = None
) -> GraphT:
    """`graph` running with `durability=RAG_CHECKPOINT_DURABILITY` by default when it has a checkpointer
    (LangGraph's config key: a caller's explicit `durability=` still wins); unchanged without one, where
    LangGraph warns about a durability."""
    if checkpointer is None:
        return graph
    durability = (settings or get_settings()).checkpoint_durability
    return graph.with_config({"configurable": {CONFIG_KEY_DURABILITY: durability}})
