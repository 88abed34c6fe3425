"""The keyword (BM25) index: an SQLite FTS5 table beside the catalog's chunk rows.

Why FTS5: it is persistent and incremental (adding or removing one document touches only its rows, no
rebuild), ranks with BM25 in C, and lives in the catalog's SQLite file, so it changes in the same
transaction as the chunks it indexes. Text is analysed by `retrieval.keyword.analyze` (stemming, stop
words, Chinese bigrams) before it reaches FTS5, which then only splits on spaces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from retrieval.keyword import analyze
from retrieval.types import Chunk

FTS_TABLE = "chunk_fts"
#: BM25 weight of a chunk's document title relative to its body (settings.bm25_title_weight).
DEFAULT_TITLE_WEIGHT = 1.0
#: Most distinct query terms sent to FTS5 (longer queries keep their first terms).
MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class KeywordHit:
    """A BM25 match: higher score is better (FTS5's bm25() is negated)."""

    chunk_id: str
    text: str
    metadata: dict[str, Any]
    score: float


def match_expression(query: str) -> str | None:
    """FTS5 MATCH expression (terms OR-ed, each quoted) for a query, or None when no term is indexable."""
    terms = list(dict.fromkeys(analyze(query)))[:MAX_QUERY_TERMS]
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class KeywordIndex:
    """FTS5 rows keyed by the catalog's chunk row id."""

    def create(self, connection: Connection) -> None:
        """Create the FTS5 table when missing."""
        connection.exec_driver_sql(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(title, body, tokenize='unicode61')"
        )

    def add(self, connection: Connection, rows: Sequence[tuple[int, Chunk]]) -> None:
        """Index chunks under their catalog row ids (inside the caller's transaction)."""
        connection.exec_driver_sql(
            f"INSERT INTO {FTS_TABLE}(rowid, title, body) VALUES (?, ?, ?)",
            [
                (
                    rowid,
                    " ".join(analyze(str(chunk.metadata.get("title", "")))),
                    " ".join(analyze(chunk.text)),
                )
                for rowid, chunk in rows
            ],
        )

    def remove(self, connection: Connection, rowids: Sequence[int]) -> None:
        """Drop the FTS rows of these catalog row ids (inside the caller's transaction)."""
        if rowids:
            connection.exec_driver_sql(
                f"DELETE FROM {FTS_TABLE} WHERE rowid = ?", [(rowid,) for rowid in rowids]
            )

    def search(
        self,
        connection: Connection,
        query: str,
        *,
        tenant: str,
        collections: Sequence[str],
        filter_sql: str,
        filter_params: Sequence[Any],
        limit: int,
        title_weight: float = DEFAULT_TITLE_WEIGHT,
    ) -> list[KeywordHit]:
        """Top `limit` chunks of `tenant` in `collections` by BM25 that satisfy the filter."""
        expression = match_expression(query)
        if expression is None or not collections:
            return []
        marks = ", ".join("?" for _ in collections)
        sql = (
            f"SELECT c.chunk_id, c.text, c.metadata, bm25({FTS_TABLE}, {float(title_weight)!r}, 1.0) AS rank "
            f"FROM {FTS_TABLE} JOIN chunks AS c ON c.id = {FTS_TABLE}.rowid "
            f"WHERE {FTS_TABLE} MATCH ? AND c.tenant = ? AND c.collection IN ({marks}) AND ({filter_sql}) "
            "ORDER BY rank LIMIT ?"
        )
        params = [expression, tenant, *collections, *filter_params, limit]
        rows = connection.exec_driver_sql(sql, tuple(params)).fetchall()
        return [KeywordHit(chunk_id, text, json.loads(meta), -rank) for chunk_id, text, meta, rank in rows]
