"""Long-term memory: the process's LangGraph BaseStore (memories, conversation summaries, director events).

A SqliteStore in `<data_dir>/store.sqlite`, or a PostgresStore on RAG_DATABASE_URL's PostgreSQL, shared by
every worker (and by `langgraph dev` through persistence/server_store.py). The store's index embeds each
item's `text` with the engine's embedding model (`ActiveEmbeddings`) and ranks with sqlite-vec or pgvector;
where neither loads (`enable_load_extension` is compiled out of some Pythons, e.g. macOS's system one),
`LongTermStore.semantic` is False and callers rank in numpy (persistence.store_search): a tenant's items are
few, so an exact scan costs less than a second index to keep in sync. Namespaces are (kind, tenant,
conversation or "_"), labels escaped by `namespace_label` (LangGraph refuses '.' in a label).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.sqlite import SqliteStore

from config.settings import Settings, get_settings
from persistence.advisory import advisory_lock
from persistence.errors import StoreUnavailableError
from persistence.process import process_knowledge_base
from persistence.urls import (
    DATABASE_POOL_SIZE,
    connection_kwargs,
    libpq_url,
    pool_options,
    postgres_url,
    unavailable_message,
)

logger = logging.getLogger(__name__)

#: File of the embedded store inside the data folder.
STORE_FILENAME = "store.sqlite"
#: First namespace label of each kind of long-term item.
MEMORIES = "memories"
SUMMARIES = "summaries"
DIRECTOR = "director"
#: Last namespace label of a memory kept for the whole tenant (no conversation).
TENANT_WIDE = "_"
#: The item field the store embeds (every kind keeps its searchable text under it).
TEXT_FIELD = "text"
#: Text embedded once to learn a model's dimension when it does not say it (PostgreSQL's vector column).
DIMENSION_PROBE = "dimension"
#: Key of the Postgres advisory lock held while the store's tables are created ("rag_stor").
STORE_SETUP_ADVISORY_LOCK_KEY = 0x7261675F73746F72
#: Where the marker of the finished copy of the old memories table is kept (a namespace no tenant uses).
MIGRATION_NAMESPACE = ("rag_migrations",)
MEMORIES_TABLE_MARKER = "memories_table"
#: Seconds a SQLite write waits for another process's transaction before failing.
SQLITE_BUSY_TIMEOUT_S = 30.0


class LongTermStoreUnavailableError(StoreUnavailableError):
    """The long-term store cannot be opened (server down, unwritable data folder): exit 1 / HTTP 503."""


def namespace_label(value: str) -> str:
    """`value` as one namespace label: '%' and '.' escaped, and a value of exactly TENANT_WIDE escaped, so
    distinct values stay distinct labels and none is the tenant-wide scope."""
    escaped = value.replace("%", "%25").replace(".", "%2E")
    return "%5F" if escaped == TENANT_WIDE else escaped


def namespace(kind: str, tenant: str, conversation_id: str | None = None) -> tuple[str, ...]:
    """The namespace of `kind` items of `tenant`: of one conversation, or of the tenant-wide scope when
    `conversation_id` is '' (None: the tenant's prefix, which covers all of its conversations)."""
    prefix = (kind, namespace_label(tenant))
    if conversation_id is None:
        return prefix
    return (*prefix, namespace_label(conversation_id) if conversation_id else TENANT_WIDE)


# --- the index's embed function -----------------------------------------------------------------------------

_active_model: contextvars.ContextVar[Embeddings | None] = contextvars.ContextVar("store_model", default=None)
_querying: contextvars.ContextVar[bool] = contextvars.ContextVar("store_querying", default=False)


@contextmanager
def using_embeddings(embeddings: Embeddings | None, *, query: bool = False) -> Iterator[None]:
    """Store calls in this block embed with `embeddings` (None: the process's model); with `query=True` the
    texts the store embeds are search queries (the model's query form: LangGraph's stores embed a search's
    query with `embed_documents`, and models such as E5 phrase queries and passages differently)."""
    model_token = _active_model.set(embeddings) if embeddings is not None else None
    query_token = _querying.set(query)
    try:
        yield
    finally:
        _querying.reset(query_token)
        if model_token is not None:
            _active_model.reset(model_token)


def active_model() -> Embeddings:
    """The model of the call in progress (`using_embeddings`), else the process's knowledge base's."""
    model = _active_model.get()
    return model if model is not None else process_knowledge_base().embeddings


class ActiveEmbeddings(Embeddings):
    """The store's index embed function: whichever model `active_model` names at the time of the call, so one
    store per location serves the process's model, a CLI's explicitly passed one and tests' fakes alike."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Passages' vectors (queries' when inside `using_embeddings(query=True)`)."""
        model = active_model()
        if _querying.get():
            return [model.embed_query(text) for text in texts]
        return model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """A query's vector."""
        return active_model().embed_query(text)


def model_dimension(model: Embeddings) -> int:
    """The model's vector size: its `dimension` when it says, else the length of one probe vector."""
    size = getattr(model, "dimension", None)
    return int(size) if isinstance(size, int) else len(model.embed_query(DIMENSION_PROBE))


def _index(dims: int) -> Any:
    return {"dims": dims, "embed": ActiveEmbeddings(), "fields": [TEXT_FIELD]}


# --- backends ---------------------------------------------------------------------------------------------


class ThreadedSqliteStore(SqliteStore):
    """LangGraph's SqliteStore with its async API too: `abatch` runs the sync batch in a worker thread (what
    PostgresStore does), so one store serves `graph.invoke`, the CLI and the LangGraph server's async calls
    (the connection is shared across threads under the store's own lock)."""

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The batch, run off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))


def sqlite_vec_loadable() -> bool:
    """Whether this Python's sqlite3 can load the sqlite-vec extension (see the module's docstring)."""
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        return False
    try:
        import sqlite_vec  # untyped (pyproject's mypy overrides)

        with closing(sqlite3.connect(":memory:")) as connection:
            connection.enable_load_extension(True)
            sqlite_vec.load(connection)
            connection.enable_load_extension(False)
            connection.execute("SELECT vec_version()")
    except (ImportError, AttributeError, sqlite3.Error, OSError) as error:
        logger.info("sqlite-vec cannot be loaded (%s); memories are ranked in numpy", error)
        return False
    return True


def store_path(settings: Settings) -> Path:
    """The embedded store's file: `<data_dir>/store.sqlite`."""
    return Path(settings.data_dir) / STORE_FILENAME


def open_sqlite_store(path: Path, *, semantic: bool | None = None) -> LongTermStore:
    """A set-up SqliteStore on `path`, indexed when sqlite-vec loads (or `semantic` says so)."""
    semantic = sqlite_vec_loadable() if semantic is None else semantic
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None, timeout=SQLITE_BUSY_TIMEOUT_S
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        # SQLite ignores an index's dims (vectors are blobs compared by sqlite-vec); PostgreSQL needs them.
        store = ThreadedSqliteStore(connection, index=_index(0) if semantic else None)
        store.setup()
    except (sqlite3.Error, OSError) as error:
        raise LongTermStoreUnavailableError(f"cannot open the long-term store {path}: {error}") from error
    return LongTermStore(store, semantic, str(path))


def pgvector_available(url: str, connect_timeout_s: float) -> bool:
    """Whether the PostgreSQL server at `url` offers the pgvector extension."""
    import psycopg

    with psycopg.connect(libpq_url(url), **connection_kwargs(connect_timeout_s)) as connection:
        found = connection.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return found is not None


def open_postgres_store(url: str, settings: Settings, *, semantic: bool | None = None) -> LongTermStore:
    """A set-up PostgresStore on a pool of its own to `url` (DATABASE_POOL_SIZE connections): indexed by
    pgvector when the server has it (the vector size is the active model's), else plain items ranked by the
    callers in numpy. Its own pool, not the savers': this module sits below the app tables (their
    `database_stats` counts the memories here), which the savers' module imports."""
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from psycopg_pool import ConnectionPool, PoolTimeout

    timeout = settings.database_connect_timeout_s
    try:
        if semantic is None:
            semantic = pgvector_available(url, timeout)
        index = _index(model_dimension(active_model())) if semantic else None
        pool: ConnectionPool[Any] = ConnectionPool(
            libpq_url(url),
            max_size=DATABASE_POOL_SIZE,
            check=ConnectionPool.check_connection,
            open=True,
            **pool_options(timeout),
        )
        pool.wait(timeout)
        store = PostgresStore(pool, index=index)
        with pool.connection() as connection, advisory_lock(connection, STORE_SETUP_ADVISORY_LOCK_KEY):
            store.setup()
    except (psycopg.OperationalError, PoolTimeout) as error:
        raise LongTermStoreUnavailableError(
            unavailable_message(url, error, what="long-term store")
        ) from error
    return LongTermStore(store, semantic, libpq_url(url))


class LongTermStore(NamedTuple):
    """A store and how it searches: `semantic` when the store embeds items' `text` and ranks by vector
    itself, else callers keep vectors in the items and rank in numpy. (A NamedTuple, not a dataclass: the
    LangGraph server executes this file by path under a module name it does not register, and a dataclass
    looks its module up while it is created.)"""

    store: BaseStore
    semantic: bool
    location: str


def store_location(settings: Settings) -> str:
    """Where the settings' store lives (its cache key): the Postgres URL, else the SQLite file."""
    url = postgres_url(settings)
    return libpq_url(url) if url is not None else str(store_path(settings).resolve())


_stores: dict[str, LongTermStore] = {}
_stores_lock = threading.Lock()


def long_term_store(settings: Settings | None = None) -> LongTermStore:
    """The process's store for `settings` (the environment's by default), opened and set up once per
    location (persistence.memory_migration.memory_store adds the copy of the old memories table)."""
    settings = settings or get_settings()
    location = store_location(settings)
    with _stores_lock:
        found = _stores.get(location)
        if found is not None:
            return found
        url = postgres_url(settings)
        opened = open_postgres_store(url, settings) if url else open_sqlite_store(store_path(settings))
        _stores[location] = opened
        return opened


def close_long_term_stores() -> None:
    """Forget every store this process opened, closing their connections and pools (tests, shutdown)."""
    with _stores_lock:
        for opened in _stores.values():
            # SqliteStore's sqlite3 connection, PostgresStore's pool: BaseStore declares neither
            connection: Any = getattr(opened.store, "conn", None)
            if connection is not None:
                connection.close()
        _stores.clear()


def all_items(store: BaseStore, prefix: tuple[str, ...], *, page: int, **search: Any) -> list[Any]:
    """Every item under `prefix` (matching `search`'s filter), read `page` at a time (no query: no model)."""
    found: list[Any] = []
    while True:
        batch = store.search(prefix, limit=page, offset=len(found), **search)
        found.extend(batch)
        if len(batch) < page:
            return found


def delete_items(store: BaseStore, items: Sequence[Any]) -> int:
    """Delete `items` (store items or search items) in one batch; how many."""
    from langgraph.store.base import PutOp

    if items:
        store.batch([PutOp(tuple(item.namespace), item.key, None) for item in items])
    return len(items)
