"""The catalog: what is indexed, the keyword index and the embedding cache, in one SQLite file or,
when RAG_DATABASE_URL names PostgreSQL, in that database, shared by every worker.

Why one database: a document's row, its chunk rows and their keyword rows change in one transaction, so a
crash never leaves a half-written document. Chroma (not transactional) is written before this commit and
cleaned after it, and searches only trust dense hits the catalog knows (retrieval.search).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import Engine, create_engine, delete, event, func, insert, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, ExceptionContext, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql.elements import ColumnElement

from config.settings import Settings
from core.types import Chunk
from persistence.catalog_health import CatalogHealth
from persistence.catalog_tables import (
    DocumentRecord,
    StoredChunk,
    chunks_table,
    document_record,
    documents_table,
    metadata_obj,
)
from persistence.embedding_cache import (
    EMBEDDING_CACHE_MAX_ENTRIES,
    EmbeddingCache,
    define_embedding_cache_table,
)
from persistence.errors import (
    CatalogDamagedError,
    CatalogUnavailableError,
    KeywordIndexDamagedError,
    damaged_catalog_message,
    damaged_keyword_index_message,
    unavailable_catalog_message,
)
from persistence.keyword_index import KeywordHit, KeywordIndex
from persistence.keyword_pruning import PruningPolicy, pruning_policy
from persistence.pg_keyword_index import PgBm25Index, PgKeywordBackend, PgTsvectorIndex, pg_keyword_index
from persistence.sqlite_engine import SQLITE_CORRUPT_VTAB, batches, configure_sqlite, is_damage
from persistence.urls import is_postgres_url, sqlalchemy_url

#: Advisory-lock key (any constant) under which one worker at a time creates the catalog tables on Postgres:
#: CREATE TABLE IF NOT EXISTS is not safe against a concurrent twin.
PG_SCHEMA_LOCK_KEY = 0x52414701
embedding_cache_table = define_embedding_cache_table(metadata_obj)
#: Tries at creating the catalog's tables when another process is creating them at the same moment.
SCHEMA_CREATE_ATTEMPTS = 3


class Catalog(CatalogHealth):
    """Documents, chunks, keyword index and embedding cache in one SQLite file or one Postgres database."""

    def __init__(
        self,
        location: Path | str,
        *,
        pg_keyword_backend: PgKeywordBackend = "bm25",
        pruning: PruningPolicy | None = None,
        embedding_cache_max_entries: int = 0,
    ) -> None:
        """`location`: the SQLite file or a PostgreSQL URL (keyword index `pg_keyword_backend`); the embedding
        cache keeps at most `embedding_cache_max_entries` vectors per tenant (0 = no bound)."""
        self.keyword_index: KeywordIndex | PgBm25Index | PgTsvectorIndex
        if is_postgres_url(location):
            self.path = Path(str(location))  # only named in messages; `shown` hides the password
            self.shown = make_url(sqlalchemy_url(str(location))).render_as_string(hide_password=True)
            self.engine: Engine = create_engine(sqlalchemy_url(str(location)), pool_pre_ping=True)
            self.keyword_index = pg_keyword_index(pg_keyword_backend, pruning)
            event.listen(self.engine, "handle_error", self._unreachable)
        else:
            path = Path(location)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.path = path
            self.shown = str(path)
            self.engine = create_engine(f"sqlite:///{path}", future=True)
            event.listen(self.engine, "connect", configure_sqlite)
            # a damaged page surfaces on any statement: one CatalogDamagedError naming the file
            event.listen(self.engine, "handle_error", self._damaged)
            self.keyword_index = KeywordIndex(pruning)
        self.dialect: Literal["sqlite", "postgresql"] = (
            "postgresql" if self.engine.dialect.name == "postgresql" else "sqlite"
        )
        self._create_schema()
        self.embedding_cache = EmbeddingCache(
            self.engine, self.dialect, embedding_cache_table, embedding_cache_max_entries
        )
        self.embedding_cache.upgrade()

    def _create_schema(self) -> None:
        """Create the missing tables; a concurrent creator's "already exists" on SQLite is retried, PostgreSQL
        serializes under an advisory lock."""
        for attempt in range(SCHEMA_CREATE_ATTEMPTS):
            try:
                with self.engine.begin() as connection:
                    if self.dialect == "postgresql":
                        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(%s)", (PG_SCHEMA_LOCK_KEY,))
                    metadata_obj.create_all(connection)
                    self.keyword_index.create(connection)
                return
            except OperationalError as error:
                if "already exists" not in str(error) or attempt == SCHEMA_CREATE_ATTEMPTS - 1:
                    raise

    def _unreachable(self, context: ExceptionContext) -> None:
        error = context.sqlalchemy_exception
        if isinstance(error, OperationalError) and (context.is_disconnect or context.connection is None):
            text = str(context.original_exception).strip()
            reason = text.splitlines()[0] if text else type(context.original_exception).__name__
            raise CatalogUnavailableError(unavailable_catalog_message(self.shown, reason)) from error

    def _damaged(self, context: ExceptionContext) -> None:
        error = context.original_exception
        if not is_damage(error):
            return
        if getattr(error, "sqlite_errorcode", None) == SQLITE_CORRUPT_VTAB:
            raise KeywordIndexDamagedError(damaged_keyword_index_message(self.path, str(error))) from error
        raise CatalogDamagedError(damaged_catalog_message(self.path, str(error))) from error

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # --- documents -----------------------------------------------------------------------------
    def document(self, tenant: str, collection: str, source: str) -> DocumentRecord | None:
        """The indexed state of one source, or None."""
        query = select(documents_table).where(
            documents_table.c.tenant == tenant,
            documents_table.c.collection == collection,
            documents_table.c.source == source,
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).mappings().first()
        return document_record(row) if row else None

    def verify_chunks(self, record: DocumentRecord) -> None:
        """Raise CatalogDamagedError unless all `n_chunks` chunk rows of a document read in full: ingestion
        skips an unchanged file by its `documents` row alone, so damaged chunk pages went unnoticed. Rows
        missing without a deletion are damage too: re-indexing over them hits their leftover keyword rows."""
        query = (
            select(func.count())
            .select_from(chunks_table)
            .where(
                chunks_table.c.document_id == record.id,
                func.length(chunks_table.c.text) + func.length(chunks_table.c.metadata) >= 0,
            )
        )
        with self.engine.connect() as connection:
            found = int(connection.execute(query).scalar() or 0)
        if found != record.n_chunks:
            reason = f"{record.source} should have {record.n_chunks} chunks, {found} are there"
            raise CatalogDamagedError(damaged_catalog_message(self.path, reason))

    def documents(self, tenant: str | None = None, collection: str | None = None) -> list[DocumentRecord]:
        """Indexed sources, optionally within one tenant and collection."""
        query = select(documents_table)
        if tenant is not None:
            query = query.where(documents_table.c.tenant == tenant)
        if collection is not None:
            query = query.where(documents_table.c.collection == collection)
        with self.engine.connect() as connection:
            return [document_record(row) for row in connection.execute(query).mappings()]

    def chunk_ids_of(self, connection: Connection, document_id: int) -> list[str]:
        """Chunk ids of a document, inside an open transaction."""
        query = select(chunks_table.c.chunk_id).where(chunks_table.c.document_id == document_id)
        return list(connection.execute(query).scalars())

    def replace_document(
        self,
        *,
        tenant: str,
        collection: str,
        source: str,
        file_hash: str,
        doc_type: str,
        title: str,
        chunks: Sequence[Chunk],
    ) -> list[str]:
        """Atomically make `chunks` the content of `source`; return the chunk ids it had before."""
        with self.engine.begin() as connection:
            self._lock_source(connection, tenant, collection, source)
            existing = connection.execute(
                select(documents_table.c.id).where(
                    documents_table.c.tenant == tenant,
                    documents_table.c.collection == collection,
                    documents_table.c.source == source,
                )
            ).scalar()
            old_ids: list[str] = []
            if existing is not None:
                old_ids = self.chunk_ids_of(connection, existing)
                self._delete_document(connection, existing)
            inserted = connection.execute(
                insert(documents_table).values(
                    tenant=tenant,
                    collection=collection,
                    source=source,
                    file_hash=file_hash,
                    doc_type=doc_type,
                    title=title,
                    n_chunks=len(chunks),
                    updated_at=time.time(),
                )
            ).inserted_primary_key
            assert inserted is not None  # typed optional by SQLAlchemy; a one-row insert always has it
            document_id = inserted[0]
            rows = [
                {
                    "chunk_id": chunk.chunk_id,
                    "document_id": document_id,
                    "tenant": tenant,
                    "collection": collection,
                    "content_hash": str(chunk.metadata.get("content_hash", "")),
                    "text": chunk.text,
                    "metadata": json.dumps(chunk.metadata, ensure_ascii=False),
                }
                for chunk in chunks
            ]
            if rows:
                connection.execute(insert(chunks_table), rows)
                query = select(chunks_table.c.chunk_id, chunks_table.c.id).where(
                    chunks_table.c.document_id == document_id
                )
                ids = {chunk_id: rowid for chunk_id, rowid in connection.execute(query)}
                self.keyword_index.add(connection, [(ids[chunk.chunk_id], chunk) for chunk in chunks])
        return old_ids

    def _lock_source(self, connection: Connection, tenant: str, collection: str, source: str) -> None:
        """One writer per source until the transaction ends, taken before it reads (two ingests of one file
        both found no row): an advisory lock on Postgres (READ COMMITTED lets both read), BEGIN IMMEDIATE on
        SQLite (the driver would begin only at the first write, after the read)."""
        if self.dialect == "postgresql":
            connection.exec_driver_sql(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"{tenant}\x1f{collection}\x1f{source}",),
            )
        elif not getattr(connection.connection.dbapi_connection, "in_transaction", False):  # sqlite3's
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    def delete_document(self, record: DocumentRecord) -> list[str]:
        """Remove a source and its chunks; return the removed chunk ids."""
        with self.engine.begin() as connection:
            self._lock_source(connection, record.tenant, record.collection, record.source)
            old_ids = self.chunk_ids_of(connection, record.id)
            self._delete_document(connection, record.id)
        return old_ids

    def _delete_document(self, connection: Connection, document_id: int) -> None:
        rowids = list(
            connection.execute(
                select(chunks_table.c.id).where(chunks_table.c.document_id == document_id)
            ).scalars()
        )
        self.keyword_index.remove(connection, rowids)
        connection.execute(delete(chunks_table).where(chunks_table.c.document_id == document_id))
        connection.execute(delete(documents_table).where(documents_table.c.id == document_id))

    # --- chunks --------------------------------------------------------------------------------
    def chunks_by_id(self, chunk_ids: Sequence[str], tenant: str) -> dict[str, StoredChunk]:
        """Stored chunks among `chunk_ids` that belong to `tenant` (others are silently absent)."""
        found: dict[str, StoredChunk] = {}
        if self.dialect == "postgresql":
            sql = "SELECT chunk_id, text, metadata FROM chunks WHERE chunk_id = ANY(%s) AND tenant = %s"
            with self.engine.connect() as connection:
                for chunk_id, text, metadata in connection.exec_driver_sql(sql, (list(chunk_ids), tenant)):
                    found[chunk_id] = StoredChunk(chunk_id, text, json.loads(metadata))
            return found
        with self.engine.connect() as connection:
            for batch in batches(list(chunk_ids)):
                marks = ", ".join("?" for _ in batch)
                # `+tenant` keeps SQLite on the chunk_id index; it would otherwise scan the tenant's rows.
                sql = (
                    f"SELECT chunk_id, text, metadata FROM chunks WHERE chunk_id IN ({marks}) AND +tenant = ?"
                )
                for chunk_id, text, metadata in connection.exec_driver_sql(sql, (*batch, tenant)):
                    found[chunk_id] = StoredChunk(chunk_id, text, json.loads(metadata))
        return found

    def source_chunks(self, tenant: str, collection: str, source: str) -> list[StoredChunk]:
        """The chunks one source has in the catalog now ([] when it has none)."""
        record = self.document(tenant, collection, source)
        if record is None:
            return []
        with self.engine.connect() as connection:
            ids = self.chunk_ids_of(connection, record.id)
        return list(self.chunks_by_id(ids, tenant).values())

    def count_chunks(self, tenant: str | None = None, collection: str | None = None) -> int:
        """Number of indexed chunks in a scope."""
        query = select(func.count()).select_from(chunks_table)
        if tenant is not None:
            query = query.where(chunks_table.c.tenant == tenant)
        if collection is not None:
            query = query.where(chunks_table.c.collection == collection)
        with self.engine.connect() as connection:
            return int(connection.execute(query).scalar() or 0)

    def documents_version(self, tenant: str) -> str:
        """A fingerprint of the tenant's indexed documents that any add, replace or delete changes (the
        semantic cache keys answers by it); read-only, so every write path is covered."""
        table = documents_table.c
        query = select(
            func.count(),
            func.coalesce(func.sum(table.id), 0),
            func.coalesce(func.sum(table.n_chunks), 0),
            func.coalesce(func.max(table.updated_at), 0.0),
            func.coalesce(func.sum(table.updated_at), 0.0),
        ).where(table.tenant == tenant)
        with self.engine.connect() as connection:
            row = connection.execute(query).one()
        return ":".join(repr(value) for value in row)

    def collections(self, tenant: str) -> list[str]:
        """Collections that hold documents of `tenant`."""
        query = select(documents_table.c.collection).where(documents_table.c.tenant == tenant).distinct()
        with self.engine.connect() as connection:
            return sorted(connection.execute(query).scalars())

    def sources_under(self, tenant: str, prefix: str, exact: str) -> list[str]:
        """The distinct indexed sources of `tenant` equal to `exact` or starting with `prefix` (literally: `%`
        and `_` are no wildcards), sorted; given a directory and its slash-ended prefix, `/a/b` misses
        `/a/bc.md`."""
        table = documents_table.c
        query = (
            select(table.source)
            .where(
                table.tenant == tenant,
                (table.source == exact) | table.source.startswith(prefix, autoescape=True),
            )
            .distinct()
        )
        with self.engine.connect() as connection:
            return sorted(connection.execute(query).scalars())

    def chunk_counts(self) -> dict[tuple[str, str], int]:
        """Chunks per (tenant, collection): what the vector store must hold (see retrieval.store_health)."""
        query = select(chunks_table.c.tenant, chunks_table.c.collection, func.count()).group_by(
            chunks_table.c.tenant, chunks_table.c.collection
        )
        with self.engine.connect() as connection:
            return {(tenant, collection): int(n) for tenant, collection, n in connection.execute(query)}

    def chunk_ids(self, tenant: str, collection: str) -> set[str]:
        """Ids of every chunk of one tenant's collection."""
        query = select(chunks_table.c.chunk_id).where(
            chunks_table.c.tenant == tenant, chunks_table.c.collection == collection
        )
        with self.engine.connect() as connection:
            return set(connection.execute(query).scalars())

    def metadata_value(self, field: str) -> ColumnElement[Any]:
        """A chunk metadata value as SQL text in this database's JSON dialect (to select chunks by it)."""
        if self.dialect == "postgresql":
            return func.jsonb_extract_path_text(chunks_table.c.metadata.cast(JSONB), field)
        return func.json_extract(chunks_table.c.metadata, f"$.{field}")

    def keyword_search(
        self,
        query: str,
        *,
        tenant: str,
        collections: Sequence[str],
        filter_sql: str,
        filter_params: Sequence[Any],
        limit: int,
        title_weight: float,
    ) -> list[KeywordHit]:
        """Top `limit` keyword matches of `tenant` in `collections`; `filter_sql` comes from
        `retrieval.filters.to_sql(node, column="c.metadata", dialect=catalog.dialect)`."""
        with self.engine.connect() as connection:
            return self.keyword_index.search(
                connection,
                query,
                tenant=tenant,
                collections=collections,
                filter_sql=filter_sql,
                filter_params=filter_params,
                limit=limit,
                title_weight=title_weight,
            )

    def analyze_keyword_index(self) -> None:
        """Refresh the planner's statistics after a bulk load (Postgres; SQLite needs nothing). Why: right
        after a large insert the planner still believes the keyword tables are empty and picks scans."""
        if self.dialect == "postgresql":
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.exec_driver_sql("VACUUM ANALYZE")

    # --- embedding cache -----------------------------------------------------------------------
    def get_vectors(self, tenant: str, model_key: str, hashes: list[str]) -> dict[str, list[float]]:
        """`tenant`'s cached vectors of `model_key` for the hashes present, never another tenant's (see
        persistence/embedding_cache.py)."""
        return self.embedding_cache.get(tenant, model_key, hashes)

    def put_vectors(self, tenant: str, model_key: str, vectors: dict[str, list[float]]) -> None:
        """Store `tenant`'s vectors of `model_key` by content hash (existing entries keep theirs), in that
        tenant's LRU bound."""
        self.embedding_cache.put(tenant, model_key, vectors)


def open_catalog(settings: Settings) -> Catalog:
    """The catalog of `settings`: in the Postgres database of RAG_DATABASE_URL when it names one (shared by
    every worker), else the SQLite file `<data_dir>/catalog.sqlite`."""
    if settings.database_url and is_postgres_url(settings.database_url):
        backend = settings.pg_keyword_backend
        return Catalog(
            settings.database_url,
            pg_keyword_backend=backend,
            pruning=pruning_policy(settings),
            embedding_cache_max_entries=EMBEDDING_CACHE_MAX_ENTRIES,
        )
    return Catalog(
        settings.catalog_path,
        pruning=pruning_policy(settings),
        embedding_cache_max_entries=EMBEDDING_CACHE_MAX_ENTRIES,
    )
