"""What the FTS5 keyword index knows about its own terms (document frequencies, row count, mean row
length, chunk count), read by query-term pruning and BM25 rescoring; SQLite storage details apart from the
index's add / remove / search.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sqlalchemy.engine import Connection

FTS_TABLE = "chunk_terms"
#: fts5vocab view of FTS_TABLE: each term's document frequency, for query-term pruning.
VOCAB_TABLE = "chunk_terms_vocab"
#: Each term's document frequency (rows containing it in any column, as fts5vocab's 'row' counts), kept
#: beside the index in the same transactions. Why not fts5vocab itself: it counts a term's rows by walking
#: its whole posting list, so looking up a query's common terms cost what pruning them saves (18 ms at 500k).
DF_TABLE = "chunk_term_df"
#: FTS5's "averages" record (row 1 of its %_data table): row count, then each column's total tokens.
AVERAGES_SQL = f"SELECT block FROM {FTS_TABLE}_data WHERE id = 1"


def create_vocabulary(connection: Connection) -> None:
    """The fts5vocab view of the keyword index (no data of its own: it reads the FTS5 index)."""
    connection.exec_driver_sql(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB_TABLE} USING fts5vocab({FTS_TABLE}, 'row')"
    )


def document_frequencies(connection: Connection, terms: Sequence[str]) -> dict[str, int]:
    """Chunks that contain each term (any column), from the document-frequency table."""
    if not terms:
        return {}
    marks = ", ".join("?" for _ in terms)
    sql = f"SELECT term, n FROM {DF_TABLE} WHERE term IN ({marks})"
    return {term: int(n) for term, n in connection.exec_driver_sql(sql, tuple(terms))}


def create_frequencies(connection: Connection) -> None:
    """The document-frequency table; when it is new, filled once from FTS5's vocabulary (catalogs indexed
    before it existed, and after a rebuild)."""
    missing = not connection.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (DF_TABLE,)
    ).first()
    if missing:
        connection.exec_driver_sql(
            f"CREATE TABLE {DF_TABLE} (term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID"
        )
        connection.exec_driver_sql(f"INSERT INTO {DF_TABLE} (term, n) SELECT term, doc FROM {VOCAB_TABLE}")


def row_terms(scope: str, title: str, body: str) -> set[str]:
    """The distinct terms of one indexed row, every column (what its document frequencies count)."""
    return {scope, *title.split(), *body.split()}


def count_frequencies(connection: Connection, changes: Counter[str]) -> None:
    """Add `changes` (term -> rows gained, negative when lost) to the document-frequency table."""
    if not changes:
        return
    connection.exec_driver_sql(
        f"INSERT INTO {DF_TABLE} (term, n) VALUES (?, ?) ON CONFLICT (term) DO UPDATE SET n = n + excluded.n",
        sorted(changes.items()),
    )
    if any(change < 0 for change in changes.values()):
        connection.exec_driver_sql(f"DELETE FROM {DF_TABLE} WHERE n <= 0")


def read_varints(data: bytes) -> list[int]:
    """SQLite's varints (big-endian, 7 bits a byte, a 9th byte of 8 bits), as FTS5 writes its records."""
    values, index = [], 0
    while index < len(data):
        value = 0
        for position in range(9):
            byte = data[index]
            index += 1
            if position == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


def index_averages(connection: Connection) -> tuple[int, float]:
    """(rows, mean tokens per row over every column) as FTS5's bm25() reads them, from its averages record."""
    block = connection.exec_driver_sql(AVERAGES_SQL).scalar()
    values = read_varints(bytes(block)) if block else []
    rows = values[0] if values else 0
    return rows, sum(values[1:]) / max(rows, 1)


def total_chunks(connection: Connection) -> int:
    """The number of chunks, from the largest chunk row id (O(1); deletions make it an over-estimate, which
    only makes pruning a little stricter)."""
    return int(connection.exec_driver_sql("SELECT coalesce(max(id), 0) FROM chunks").scalar() or 0)
