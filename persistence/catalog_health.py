"""The catalog's health as `rag doctor` checks and repairs it: SQLite's integrity check, the keyword
index's agreement with the chunk rows, and its rebuild (a mixin of Catalog, off the ingest and search path).
"""

from __future__ import annotations

import json
from typing import Literal

from sqlalchemy import Engine, select

from core.types import Chunk
from persistence.catalog_tables import chunks_table
from persistence.errors import KeywordIndexDamagedError
from persistence.keyword_index import KeywordIndex
from persistence.pg_keyword_index import PgBm25Index, PgTsvectorIndex
from persistence.sqlite_engine import SQLITE_MAX_VARIABLES


class CatalogHealth:
    """Checks and repairs over a catalog's engine and keyword index (a mixin of catalog.Catalog)."""

    engine: Engine
    dialect: Literal["sqlite", "postgresql"]
    keyword_index: KeywordIndex | PgBm25Index | PgTsvectorIndex

    def integrity_errors(self) -> list[str]:
        """SQLite's PRAGMA integrity_check findings for the whole file; empty when it is sound (a Postgres
        server guards its own pages: nothing to check from here)."""
        if self.dialect == "postgresql":
            return []
        with self.engine.connect() as connection:
            rows = [str(row[0]) for row in connection.exec_driver_sql("PRAGMA integrity_check")]
        return [] if rows == ["ok"] else rows

    def keyword_rows(self) -> int:
        """Rows of the keyword index, whichever backend holds it."""
        with self.engine.connect() as connection:
            return int(self.keyword_index.count(connection))

    def keyword_index_drift(self) -> tuple[int, int, str | None]:
        """(chunks without FTS rows, FTS rows without a chunk, FTS5's own integrity error or None)."""
        with self.engine.connect() as connection:
            chunk_rows = set(connection.execute(select(chunks_table.c.id)).scalars())
            error = self.keyword_index.integrity_error(connection)
            try:
                fts_rows = self.keyword_index.rowids(connection)
            except KeywordIndexDamagedError as damaged:  # too damaged to list: every chunk counts as lost
                return len(chunk_rows), 0, error or str(damaged.__cause__ or damaged)
        return len(chunk_rows - fts_rows), len(fts_rows - chunk_rows), error

    def rebuild_keyword_index(self) -> int:
        """Re-create the FTS table from the chunk rows in one transaction; return the rows written.

        The table is dropped, not emptied: deleting rows from a damaged FTS5 index reads the damaged
        structures and fails, while dropping it removes its shadow tables whatever they hold."""
        written = 0
        with self.engine.begin() as connection:
            self.keyword_index.reset(connection)
            rows = connection.execute(
                select(
                    chunks_table.c.id, chunks_table.c.chunk_id, chunks_table.c.text, chunks_table.c.metadata
                )
            )
            while batch := rows.fetchmany(SQLITE_MAX_VARIABLES):
                self.keyword_index.add(
                    connection,
                    [
                        (rowid, Chunk(chunk_id, text, json.loads(meta)))
                        for rowid, chunk_id, text, meta in batch
                    ],
                )
                written += len(batch)
        return written
