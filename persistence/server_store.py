"""The long-term store langgraph.json names for `langgraph dev`, Studio and a LangGraph server: the one the
REST routes, the CLI and the graph use for the same settings (persistence.long_term_store), with the old
memories table copied in (persistence.memory_migration), so the server's store API shows every memory.

A file of its own: the server executes it by path under a module name of its own drawing, so it holds only
the factory, which reaches the engine's stores through their packages (one store per location and process).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.store.base import BaseStore

from config.settings import get_settings


@asynccontextmanager
async def server_store() -> AsyncIterator[BaseStore]:
    """The server's store: the SQLite file in the data folder, or PostgreSQL when RAG_DATABASE_URL names
    it."""
    from persistence.memory_migration import memory_store

    opened = await asyncio.to_thread(memory_store, get_settings())
    yield opened.store
