"""The long-term store langgraph.json names for `langgraph dev`, Studio and a LangGraph server: the same
store the REST routes, the CLI and the graph use, with the old memories table copied in. A file of its own:
the server executes it by path.
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
