"""The keyword index on PostgreSQL, shared by every worker: a table-backed BM25 or Postgres full text.

Why two: Postgres full text (tsvector + GIN) is built in, but its ranks (ts_rank, ts_rank_cd) have no inverse
document frequency, so a rare decisive word counts no more than a common one; a BM25 over a postings table
ranks exactly like the embedded FTS5 index (same analyzer, same formula, title weight, k1 and b) at the cost
of one row per (term, chunk). Which one serves is the setting `pg_keyword_backend`, and its default is the
one that won the measurement (`rag eval keyword-backends`, results/keyword_backends.json).

Both index the terms of `core.keyword.analyze` (stemming, stop words, Chinese bigrams), so tokenisation
never depends on the server's locale or text-search configuration; both change in the caller's transaction,
so a document's chunks and their keyword rows appear and disappear together for every reader.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy.engine import Connection

from core.keyword import analyze
from core.types import Chunk
from persistence.keyword_index import KeywordHit, is_filtered, query_terms, scope_token

PgKeywordBackend = Literal["bm25", "ts_rank", "ts_rank_cd"]
PG_KEYWORD_BACKENDS: tuple[PgKeywordBackend, ...] = ("bm25", "ts_rank", "ts_rank_cd")
#: FTS5's BM25 constants, so the Postgres ranking equals the embedded one.
BM25_K1 = 1.2
BM25_B = 0.75
#: FTS5's floor for the idf of a term found in more than half of the rows.
BM25_MIN_IDF = 1e-6
#: tsvector positions stop at 16383: later words of a long chunk share the last position.
TSVECTOR_MAX_POSITION = 16383

POSTINGS_TABLE = "keyword_postings"
DOCS_TABLE = "keyword_docs"
STATS_TABLE = "keyword_stats"
TSV_TABLE = "keyword_tsv"


def _chunk_terms(chunk: Chunk) -> tuple[str, list[str], list[str]]:
    scope = scope_token(str(chunk.metadata["tenant"]), str(chunk.metadata["collection"]))
    return scope, analyze(str(chunk.metadata.get("title", ""))), analyze(chunk.text)


def _hits(rows: Sequence[Any]) -> list[KeywordHit]:
    return [
        KeywordHit(chunk_id, text, json.loads(meta), float(score)) for chunk_id, text, meta, score in rows
    ]


class PgBm25Index:
    """BM25 from a postings table: one row per (term, scope, chunk) with its title and body frequencies and
    the chunk's length, all in the primary key's index (INCLUDE: a query reads postings by index-only scans,
    measured 1.8x faster at 46k chunks than fetching each from the table); per-scope row counts and total
    lengths in a stats row, so a query reads only the postings of its terms (the primary key's (term, scope)
    prefix) and one stats row per collection."""

    name: PgKeywordBackend = "bm25"

    def create(self, connection: Connection) -> None:
        """Create the tables when missing."""
        connection.exec_driver_sql(
            f"CREATE TABLE IF NOT EXISTS {POSTINGS_TABLE} (term text NOT NULL, scope text NOT NULL, "
            "chunk_row integer NOT NULL, tf_title real NOT NULL, tf_body real NOT NULL, "
            "length real NOT NULL, PRIMARY KEY (term, scope, chunk_row) INCLUDE (tf_title, tf_body, length))"
        )
        connection.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS ix_{POSTINGS_TABLE}_chunk ON {POSTINGS_TABLE} (chunk_row)"
        )
        connection.exec_driver_sql(
            f"CREATE TABLE IF NOT EXISTS {DOCS_TABLE} (chunk_row integer PRIMARY KEY, scope text NOT NULL, "
            "length real NOT NULL)"
        )
        connection.exec_driver_sql(
            f"CREATE TABLE IF NOT EXISTS {STATS_TABLE} (scope text PRIMARY KEY, n_docs bigint NOT NULL, "
            "total_length double precision NOT NULL)"
        )

    def add(self, connection: Connection, rows: Sequence[tuple[int, Chunk]]) -> None:
        """Index chunks under their catalog row ids (inside the caller's transaction)."""
        postings: list[tuple[str, str, int, float, float, float]] = []
        docs: list[tuple[int, str, float]] = []
        totals: defaultdict[str, float] = defaultdict(float)
        counts: Counter[str] = Counter()
        for rowid, chunk in rows:
            scope, title, body = _chunk_terms(chunk)
            # FTS5 counts every token of every column in a row's length, the scope token included.
            length = float(1 + len(title) + len(body))
            title_tf, body_tf = Counter(title), Counter(body)
            for term in title_tf.keys() | body_tf.keys():
                postings.append((term, scope, rowid, float(title_tf[term]), float(body_tf[term]), length))
            docs.append((rowid, scope, length))
            totals[scope] += length
            counts[scope] += 1
        if not docs:
            return
        if postings:
            connection.exec_driver_sql(
                f"INSERT INTO {POSTINGS_TABLE} (term, scope, chunk_row, tf_title, tf_body, length) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                postings,
            )
        connection.exec_driver_sql(
            f"INSERT INTO {DOCS_TABLE} (chunk_row, scope, length) VALUES (%s, %s, %s)", docs
        )
        self._bump(connection, [(scope, counts[scope], totals[scope]) for scope in sorted(counts)])

    def _bump(self, connection: Connection, changes: Sequence[tuple[str, int, float]]) -> None:
        # Sorted scopes: two transactions touching the same stats rows lock them in the same order.
        connection.exec_driver_sql(
            f"INSERT INTO {STATS_TABLE} (scope, n_docs, total_length) VALUES (%s, %s, %s) "
            f"ON CONFLICT (scope) DO UPDATE SET n_docs = {STATS_TABLE}.n_docs + excluded.n_docs, "
            f"total_length = {STATS_TABLE}.total_length + excluded.total_length",
            list(changes),
        )

    def remove(self, connection: Connection, rowids: Sequence[int]) -> None:
        """Drop the keyword rows of these catalog row ids (inside the caller's transaction)."""
        if not rowids:
            return
        gone = connection.exec_driver_sql(
            f"DELETE FROM {DOCS_TABLE} WHERE chunk_row = ANY(%s) RETURNING scope, length", (list(rowids),)
        ).fetchall()
        connection.exec_driver_sql(f"DELETE FROM {POSTINGS_TABLE} WHERE chunk_row = ANY(%s)", (list(rowids),))
        totals: defaultdict[str, float] = defaultdict(float)
        counts: Counter[str] = Counter()
        for scope, length in gone:
            totals[scope] -= float(length)
            counts[scope] -= 1
        if counts:
            self._bump(connection, [(scope, counts[scope], totals[scope]) for scope in sorted(counts)])

    def rowids(self, connection: Connection) -> set[int]:
        """Catalog row ids that have keyword rows (for the doctor's comparison with the chunk table)."""
        return {rowid for (rowid,) in connection.exec_driver_sql(f"SELECT chunk_row FROM {DOCS_TABLE}")}

    def count(self, connection: Connection) -> int:
        """Indexed rows (the health probe's figure)."""
        return int(connection.exec_driver_sql(f"SELECT count(*) FROM {DOCS_TABLE}").scalar_one())

    def integrity_error(self, connection: Connection) -> str | None:
        """Whether the stats rows agree with the indexed rows (the server guards the tables themselves)."""
        drift = connection.exec_driver_sql(
            f"SELECT count(*) FROM (SELECT scope, count(*) AS n FROM {DOCS_TABLE} GROUP BY scope) AS d "
            f"FULL JOIN {STATS_TABLE} AS s USING (scope) WHERE coalesce(d.n, 0) <> coalesce(s.n_docs, 0)"
        ).scalar_one()
        return f"{drift} collection(s) with wrong BM25 statistics" if drift else None

    def reset(self, connection: Connection) -> None:
        """Empty the keyword tables (inside the caller's transaction, before a rebuild)."""
        connection.exec_driver_sql(f"TRUNCATE {POSTINGS_TABLE}, {DOCS_TABLE}, {STATS_TABLE}")

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
        title_weight: float,
    ) -> list[KeywordHit]:
        """Top `limit` chunks of `tenant` in `collections` by BM25 that satisfy the filter.

        FTS5's formula: idf = ln((N - n + 0.5) / (n + 0.5)) floored at 1e-6, term frequency = title weight x
        title count + body count, length normalised by the average length; N, n and the average are taken
        over the searched collections (one tenant's), so another tenant's documents never shift the ranks."""
        terms = query_terms(query)
        if not terms or not collections:
            return []
        scopes = [scope_token(tenant, name) for name in collections]
        filtered = is_filtered(filter_sql, filter_params)
        join = "JOIN chunks AS c ON c.id = p.chunk_row" if filtered else ""
        where = f"AND c.tenant = %s AND ({filter_sql})" if filtered else ""
        frequency = f"({float(title_weight)!r} * p.tf_title + p.tf_body)"
        # Document frequencies count every posting of the scope, filtered or not (as FTS5's do); unfiltered,
        # they come from the rows already matched instead of a second pass over the postings.
        df_source = (
            f"SELECT term FROM {POSTINGS_TABLE} WHERE term = ANY(%s) AND scope = ANY(%s)"
            if filtered
            else "SELECT term FROM matched"
        )
        sql = (
            f"WITH stats AS (SELECT coalesce(sum(n_docs), 0)::float8 AS n, "
            f"coalesce(sum(total_length), 0) / greatest(sum(n_docs), 1) AS avgdl "
            f"FROM {STATS_TABLE} WHERE scope = ANY(%s)), "
            f"matched AS (SELECT p.term, p.chunk_row, {frequency} AS f, p.length "
            f"FROM {POSTINGS_TABLE} AS p {join} WHERE p.term = ANY(%s) AND p.scope = ANY(%s) {where}), "
            f"df AS (SELECT term, count(*) AS n FROM ({df_source}) AS d GROUP BY term), "
            "idf AS (SELECT df.term, "
            f"greatest(ln((s.n - df.n + 0.5) / (df.n + 0.5)), {BM25_MIN_IDF}) AS w "
            "FROM df CROSS JOIN stats AS s), "
            f"top AS (SELECT m.chunk_row, sum(idf.w * m.f * {BM25_K1 + 1} "
            f"/ (m.f + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * m.length / greatest(s.avgdl, 1)))) AS score "
            "FROM matched AS m JOIN idf USING (term) CROSS JOIN stats AS s "
            "GROUP BY m.chunk_row ORDER BY score DESC, m.chunk_row LIMIT %s) "
            "SELECT c.chunk_id, c.text, c.metadata, top.score "
            "FROM top JOIN chunks AS c ON c.id = top.chunk_row "
            "WHERE c.tenant = %s ORDER BY top.score DESC, top.chunk_row"
        )
        params: tuple[Any, ...] = (scopes, terms, scopes)
        if filtered:
            params = (*params, tenant, *filter_params, terms, scopes)
        rows = connection.exec_driver_sql(sql, (*params, limit, tenant)).fetchall()
        return _hits(rows)


def tsvector_literal(title: Sequence[str], body: Sequence[str]) -> str:
    """A tsvector in its text form: each term with its positions, title positions weighted A (body D), so
    ts_rank can weigh the title by `title_weight` as FTS5 does."""
    positions: dict[str, list[str]] = {}
    for index, term in enumerate([*title, *body]):
        position = min(index + 1, TSVECTOR_MAX_POSITION)
        positions.setdefault(term, []).append(f"{position}{'A' if index < len(title) else ''}")
    return " ".join(f"'{term}':{','.join(marks)}" for term, marks in positions.items())


def tsquery_literal(terms: Sequence[str]) -> str:
    """A tsquery OR-ing the terms (analysed terms are letters, digits and CJK: nothing to escape)."""
    return " | ".join(f"'{term}'" for term in terms)


class PgTsvectorIndex:
    """Postgres full text: one tsvector per chunk under a GIN index, ranked by ts_rank or ts_rank_cd."""

    def __init__(self, rank: Literal["ts_rank", "ts_rank_cd"] = "ts_rank_cd") -> None:
        self.rank = rank
        self.name: PgKeywordBackend = rank

    def create(self, connection: Connection) -> None:
        """Create the table and its GIN index when missing."""
        connection.exec_driver_sql(
            f"CREATE TABLE IF NOT EXISTS {TSV_TABLE} (chunk_row integer PRIMARY KEY, scope text NOT NULL, "
            "terms tsvector NOT NULL)"
        )
        connection.exec_driver_sql(
            f"CREATE INDEX IF NOT EXISTS ix_{TSV_TABLE}_terms ON {TSV_TABLE} USING gin (terms)"
        )

    def add(self, connection: Connection, rows: Sequence[tuple[int, Chunk]]) -> None:
        """Index chunks under their catalog row ids (inside the caller's transaction)."""
        values = []
        for rowid, chunk in rows:
            scope, title, body = _chunk_terms(chunk)
            values.append((rowid, scope, tsvector_literal(title, body)))
        if values:
            connection.exec_driver_sql(
                f"INSERT INTO {TSV_TABLE} (chunk_row, scope, terms) VALUES (%s, %s, %s::tsvector)", values
            )

    def remove(self, connection: Connection, rowids: Sequence[int]) -> None:
        """Drop the keyword rows of these catalog row ids (inside the caller's transaction)."""
        if rowids:
            connection.exec_driver_sql(f"DELETE FROM {TSV_TABLE} WHERE chunk_row = ANY(%s)", (list(rowids),))

    def rowids(self, connection: Connection) -> set[int]:
        """Catalog row ids that have keyword rows."""
        return {rowid for (rowid,) in connection.exec_driver_sql(f"SELECT chunk_row FROM {TSV_TABLE}")}

    def count(self, connection: Connection) -> int:
        """Indexed rows (the health probe's figure)."""
        return int(connection.exec_driver_sql(f"SELECT count(*) FROM {TSV_TABLE}").scalar_one())

    def integrity_error(self, connection: Connection) -> str | None:
        """Nothing of its own to check: the server guards the table and its index."""
        return None

    def reset(self, connection: Connection) -> None:
        """Empty the keyword table (inside the caller's transaction, before a rebuild)."""
        connection.exec_driver_sql(f"TRUNCATE {TSV_TABLE}")

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
        title_weight: float,
    ) -> list[KeywordHit]:
        """Top `limit` chunks of `tenant` in `collections` by the rank function that satisfy the filter."""
        terms = query_terms(query)
        if not terms or not collections:
            return []
        scopes = [scope_token(tenant, name) for name in collections]
        # weights {D, C, B, A}: body positions are D, title positions A.
        weights = [1.0, 0.0, 0.0, float(title_weight)]
        if not is_filtered(filter_sql, filter_params):
            filter_sql = "TRUE"
        sql = (
            f"SELECT c.chunk_id, c.text, c.metadata, {self.rank}(%s::float4[], k.terms, q.q) AS score "
            f"FROM {TSV_TABLE} AS k CROSS JOIN (SELECT %s::tsquery AS q) AS q "
            "JOIN chunks AS c ON c.id = k.chunk_row "
            f"WHERE k.terms @@ q.q AND k.scope = ANY(%s) AND c.tenant = %s AND ({filter_sql}) "
            "ORDER BY score DESC, k.chunk_row LIMIT %s"
        )
        params = (weights, tsquery_literal(terms), scopes, tenant, *filter_params, limit)
        return _hits(connection.exec_driver_sql(sql, params).fetchall())


def pg_keyword_index(backend: PgKeywordBackend) -> PgBm25Index | PgTsvectorIndex:
    """The Postgres keyword index named by the setting `pg_keyword_backend`."""
    if backend == "bm25":
        return PgBm25Index()
    return PgTsvectorIndex(backend)
