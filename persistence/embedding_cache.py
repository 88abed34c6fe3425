"""The embedding cache: vectors by (tenant, model key, content hash), at most EMBEDDING_CACHE_MAX_ENTRIES per
tenant, least recently used evicted first.

The tenant is in the key because a shared cache made an upload of another tenant's text faster, telling the
uploader what others had indexed; the bound counts per tenant too, so one tenant's activity never evicts
another's entries. Recency (`last_used`) is written on store and on read (reads happen only while ingesting).
A table without the `tenant` column is dropped and recreated: it is only a cache, and its rows kept under any
tenant would hand that tenant the others' vectors. Not LangChain's CacheBackedEmbeddings: its ByteStore has
no recency for the bound, keys by its own text hash, and stores vectors as JSON (~5.5x the float32 bytes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import numpy as np
from sqlalchemy import (
    Column,
    Engine,
    Float,
    Index,
    LargeBinary,
    MetaData,
    String,
    Table,
    delete,
    func,
    inspect,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

#: Keys per IN (...) list: under SQLite's default limit of host parameters.
KEY_BATCH = 900
#: The table's name in the catalog's database.
TABLE_NAME = "embedding_cache"
#: Vectors kept per tenant (0 = no bound), ~1.5 KB each at 384 dimensions: 1,000,000 is ~1.5 GB.
EMBEDDING_CACHE_MAX_ENTRIES = 1_000_000
#: Index that makes finding a tenant's least recently used entries cheap.
LAST_USED_INDEX = "ix_embedding_cache_tenant_last_used"
#: Advisory-lock key (any constant) under which one Postgres worker at a time rebuilds an unscoped table.
PG_REBUILD_LOCK_KEY = 0x52414702


def define_embedding_cache_table(metadata: MetaData) -> Table:
    """The `embedding_cache` table in the catalog's `metadata` (one create_all makes it with the catalog's
    tables): vectors keyed by tenant, model and content hash, with the recency the bound evicts by."""
    return Table(
        TABLE_NAME,
        metadata,
        Column("tenant", String, primary_key=True),
        Column("model_key", String, primary_key=True),
        Column("content_hash", String, primary_key=True),
        Column("vector", LargeBinary, nullable=False),
        # When the vector was last stored or read, for the LRU bound.
        Column("last_used", Float, nullable=False, default=0.0, server_default="0"),
        Index(LAST_USED_INDEX, "tenant", "last_used"),
    )


def _batches(items: Sequence[Any], size: int = KEY_BATCH) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class EmbeddingCache:
    """Vectors of one catalog's `embedding_cache` table, at most `max_entries` per tenant (0 = no bound)."""

    def __init__(
        self,
        engine: Engine,
        dialect: Literal["sqlite", "postgresql"],
        table: Table,
        max_entries: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.dialect = dialect
        self.table = table
        self.max_entries = max_entries
        self.clock = clock

    def upgrade(self) -> None:
        """Replace a table written before the cache was scoped by tenant (no `tenant` column) with an empty
        one of the current schema (idempotent; a concurrent process rebuilding it first is fine): its rows
        belong to no known tenant, and a cache loses nothing but time by starting empty."""
        with self.engine.begin() as connection:
            if self.dialect == "postgresql":
                connection.exec_driver_sql("SELECT pg_advisory_xact_lock(%s)", (PG_REBUILD_LOCK_KEY,))
            if "tenant" in self._columns(connection):
                return
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {self.table.name}")
            try:
                self.table.create(connection, checkfirst=True)
            except OperationalError as error:  # another SQLite process created it between check and create
                if "already exists" not in str(error):
                    raise

    def _columns(self, connection: Connection) -> set[str]:
        return {column["name"] for column in inspect(connection).get_columns(self.table.name)}

    def get(self, tenant: str, model_key: str, hashes: list[str]) -> dict[str, list[float]]:
        """`tenant`'s cached vectors of `model_key` for the hashes present (never another tenant's); with a
        bound, they become that tenant's most recent."""
        table = self.table
        found: dict[str, list[float]] = {}
        with self.engine.begin() as connection:
            for batch in _batches(list(dict.fromkeys(hashes))):
                query = select(table.c.content_hash, table.c.vector).where(
                    table.c.tenant == tenant, table.c.model_key == model_key, table.c.content_hash.in_(batch)
                )
                keys = []
                for key, blob in connection.execute(query):
                    found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
                    keys.append(key)
                if keys and self.max_entries:
                    connection.execute(
                        update(table)
                        .where(
                            table.c.tenant == tenant,
                            table.c.model_key == model_key,
                            table.c.content_hash.in_(keys),
                        )
                        .values(last_used=self.clock())
                    )
        return found

    def put(self, tenant: str, model_key: str, vectors: dict[str, list[float]]) -> None:
        """Store `tenant`'s vectors of `model_key` by content hash (an existing entry keeps its vector and
        becomes the most recent), then evict that tenant's least recently used entries beyond the bound."""
        if not vectors:
            return
        now = self.clock()
        rows = [
            {
                "tenant": tenant,
                "model_key": model_key,
                "content_hash": key,
                "vector": np.asarray(vector, np.float32).tobytes(),
                "last_used": now,
            }
            for key, vector in vectors.items()
        ]
        insert = pg_insert if self.dialect == "postgresql" else sqlite_insert
        statement = insert(self.table)
        statement = statement.on_conflict_do_update(
            index_elements=[self.table.c.tenant, self.table.c.model_key, self.table.c.content_hash],
            set_={"last_used": statement.excluded.last_used},
        )
        with self.engine.begin() as connection:
            connection.execute(statement, rows)
            if self.max_entries:
                self._evict(connection, tenant)

    def _evict(self, connection: Connection, tenant: str) -> int:
        """Delete `tenant`'s least recently used entries beyond `max_entries`; how many were deleted."""
        table = self.table
        mine = table.c.tenant == tenant
        total = int(connection.execute(select(func.count()).select_from(table).where(mine)).scalar() or 0)
        excess = total - self.max_entries
        if excess <= 0:
            return 0
        oldest = connection.execute(
            select(table.c.model_key, table.c.content_hash)
            .where(mine)
            .order_by(table.c.last_used, table.c.model_key, table.c.content_hash)
            .limit(excess)
        ).all()
        by_model: dict[str, list[str]] = {}
        for model_key, content_hash in oldest:
            by_model.setdefault(model_key, []).append(content_hash)
        for model_key, keys in by_model.items():
            for batch in _batches(keys):
                connection.execute(
                    delete(table).where(mine, table.c.model_key == model_key, table.c.content_hash.in_(batch))
                )
        return len(oldest)
