"""Checkpointers: where conversations (thread state) are stored.

SQLite by default (`<data_dir>/checkpoints.sqlite`), sync for `graph.invoke` and async for the server and
`ainvoke`; Postgres to scale out (`RAG_CHECKPOINT_URL=postgresql://...`, needs the `postgres` extra).
The sync and async savers are separate classes: a sync `invoke` on the async saver raises.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from config.settings import Settings, get_settings
from persistence.threads import OwnerCheckedAsyncSqliteSaver, OwnerCheckedSqliteSaver

POSTGRES_INSTALL_HINT = "pip install langgraph-checkpoint-postgres 'psycopg[binary]'"


def _path(settings: Settings | None, path: Path | None) -> Path:
    target = path or (settings or get_settings()).checkpoint_path
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def sqlite_checkpointer(settings: Settings | None = None, path: Path | None = None) -> SqliteSaver:
    """A sync SQLite saver that lives as long as the process (for the CLI and `graph.invoke`)."""
    connection = sqlite3.connect(str(_path(settings, path)), check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    saver = OwnerCheckedSqliteSaver(connection)  # a run of one tenant cannot load another's thread
    saver.setup()
    return saver


@asynccontextmanager
async def async_sqlite_checkpointer(
    settings: Settings | None = None, path: Path | None = None
) -> AsyncIterator[AsyncSqliteSaver]:
    """An async SQLite saver (for `ainvoke` / `astream` and the LangGraph server)."""
    async with OwnerCheckedAsyncSqliteSaver.from_conn_string(str(_path(settings, path))) as saver:
        await saver.setup()
        yield saver


@asynccontextmanager
async def server_checkpointer() -> AsyncIterator[AsyncSqliteSaver]:
    """The factory langgraph.json names: server conversations go to the same SQLite file as the CLI's."""
    async with async_sqlite_checkpointer() as saver:
        yield saver


@contextmanager
def postgres_checkpointer(url: str) -> Iterator[BaseCheckpointSaver]:
    """A Postgres saver for scale-out deployments."""
    try:
        from langgraph.checkpoint.postgres import PostgresSaver  # type: ignore[import-not-found]
    except ImportError as error:
        raise RuntimeError(f"Postgres checkpointing needs: {POSTGRES_INSTALL_HINT}") from error
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        yield saver
