"""The embedding cache's reads and writes: vectors by (model key, content hash), bounded by least recent use.

Why a bound (seed 003's TODO): the cache keeps the vector of every text ever embedded — old versions of
edited files, deleted documents, the semantic chunker's sentence windows — so without one it only grows.
RAG_EMBEDDING_CACHE_MAX_ENTRIES caps it: after each store, the entries least recently stored or read beyond
the cap are deleted. The entries of every model count together (one table, one cap).

Recency is a `last_used` time written when a vector is stored or read back. Reads happen only while
ingesting (queries are not cached), so this write never slows a search; with no cap (0) reads write nothing.
Ties (one batch stored at one instant) are broken by model key and hash, so eviction is deterministic.
The table is defined here (`define_embedding_cache_table`) and created in the catalog's database with the
catalog's other tables (persistence/catalog.py), so every tenant of a catalog, SQLite or Postgres, shares
one cache; catalogs written before the cap existed get the `last_used` column (0 for their entries, so
they are the first evicted) when they are opened.

Why not LangChain's CacheBackedEmbeddings (issue 22 §3): it is in `langchain-classic`, which this project
does not install, and it stores through a ByteStore (mget / mset / mdelete / yield_keys). langchain_core
has only in-memory ones; the SQL one is in `langchain-community`, and a ByteStore has no notion of recency,
so the bound above would need a custom store: the same SQL as here, behind a key-value interface. It also
keys by a hash of the text under a namespace, not by the content hash that ingestion already computes,
so every vector cached so far would miss once, and it stores vectors as JSON text, about 5.5 times the
size of the float32 bytes kept here (a normalised 384-dimension vector). retrieval/embeddings.py's
CachedEmbeddings is the thin wrapper that CacheBackedEmbeddings would be.
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
#: Index that makes finding the least recently used entries cheap.
LAST_USED_INDEX = "ix_embedding_cache_last_used"


def define_embedding_cache_table(metadata: MetaData) -> Table:
    """The `embedding_cache` table in the catalog's `metadata` (one create_all makes it with the catalog's
    tables): vectors keyed by model and content hash, with the recency the bound evicts by."""
    return Table(
        TABLE_NAME,
        metadata,
        Column("model_key", String, primary_key=True),
        Column("content_hash", String, primary_key=True),
        Column("vector", LargeBinary, nullable=False),
        # When the vector was last stored or read, for the LRU bound.
        Column("last_used", Float, nullable=False, default=0.0, server_default="0"),
        Index(LAST_USED_INDEX, "last_used"),
    )


def _batches(items: Sequence[Any], size: int = KEY_BATCH) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class EmbeddingCache:
    """Vectors of one catalog's `embedding_cache` table, at most `max_entries` of them (0 = no bound)."""

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
        """Give a catalog written before the bound existed its `last_used` column and index (idempotent; a
        concurrent process adding the column first is fine)."""
        with self.engine.begin() as connection:
            columns = {column["name"] for column in inspect(connection).get_columns(self.table.name)}
            if "last_used" not in columns:
                exists = "IF NOT EXISTS " if self.dialect == "postgresql" else ""
                try:
                    connection.exec_driver_sql(
                        f"ALTER TABLE {self.table.name} ADD COLUMN {exists}last_used FLOAT NOT NULL DEFAULT 0"
                    )
                except OperationalError as error:
                    if "duplicate column" not in str(error):
                        raise
            connection.exec_driver_sql(
                f"CREATE INDEX IF NOT EXISTS {LAST_USED_INDEX} ON {self.table.name} (last_used)"
            )

    def get(self, model_key: str, hashes: list[str]) -> dict[str, list[float]]:
        """Cached vectors of `model_key` for the hashes present; with a bound, they become the most recent."""
        table = self.table
        found: dict[str, list[float]] = {}
        with self.engine.begin() as connection:
            for batch in _batches(list(dict.fromkeys(hashes))):
                query = select(table.c.content_hash, table.c.vector).where(
                    table.c.model_key == model_key, table.c.content_hash.in_(batch)
                )
                keys = []
                for key, blob in connection.execute(query):
                    found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
                    keys.append(key)
                if keys and self.max_entries:
                    connection.execute(
                        update(table)
                        .where(table.c.model_key == model_key, table.c.content_hash.in_(keys))
                        .values(last_used=self.clock())
                    )
        return found

    def put(self, model_key: str, vectors: dict[str, list[float]]) -> None:
        """Store vectors of `model_key` by content hash (an existing entry keeps its vector and becomes the
        most recent), then evict the least recently used entries beyond the bound."""
        if not vectors:
            return
        now = self.clock()
        rows = [
            {
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
            index_elements=[self.table.c.model_key, self.table.c.content_hash],
            set_={"last_used": statement.excluded.last_used},
        )
        with self.engine.begin() as connection:
            connection.execute(statement, rows)
            if self.max_entries:
                self._evict(connection)

    def count(self) -> int:
        """Entries of every model."""
        with self.engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(self.table)).scalar() or 0)

    def _evict(self, connection: Connection) -> int:
        """Delete the least recently used entries beyond `max_entries`; how many were deleted."""
        table = self.table
        total = int(connection.execute(select(func.count()).select_from(table)).scalar() or 0)
        excess = total - self.max_entries
        if excess <= 0:
            return 0
        oldest = connection.execute(
            select(table.c.model_key, table.c.content_hash)
            .order_by(table.c.last_used, table.c.model_key, table.c.content_hash)
            .limit(excess)
        ).all()
        by_model: dict[str, list[str]] = {}
        for model_key, content_hash in oldest:
            by_model.setdefault(model_key, []).append(content_hash)
        for model_key, keys in by_model.items():
            for batch in _batches(keys):
                connection.execute(
                    delete(table).where(table.c.model_key == model_key, table.c.content_hash.in_(batch))
                )
        return len(oldest)
