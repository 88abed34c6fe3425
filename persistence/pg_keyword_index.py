"""The keyword index on PostgreSQL, shared by every worker: a table-backed BM25 or Postgres full text.

Why two: ts_rank has no inverse document frequency; the postings-table BM25 ranks exactly like the embedded
FTS5 index at the cost of one row per (term, chunk). `pg_keyword_backend` chooses (default: the winner of
`python -m benchmarks keyword-backends`). Both index `core.keyword.analyze`'s terms (no dependence on the
server's locale) and change in the caller's transaction.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy.engine import Connection

from core.keyword import analyze
from core.types import Chunk
from persistence import bm25
from persistence.keyword_index import KeywordHit, is_filtered, query_terms, ranked_hits, scope_token
from persistence.keyword_pruning import PruningPolicy, prune_terms

PgKeywordBackend = Literal["bm25", "ts_rank", "ts_rank_cd"]
PG_KEYWORD_BACKENDS: tuple[PgKeywordBackend, ...] = ("bm25", "ts_rank", "ts_rank_cd")
#: tsvector positions stop at 16383: later words of a long chunk share the last position.
TSVECTOR_MAX_POSITION = 16383

POSTINGS_TABLE = "keyword_postings"
DOCS_TABLE = "keyword_docs"
STATS_TABLE = "keyword_stats"
#: Document frequency of each (term, scope): what query-term pruning and the IDF read instead of counting
#: postings (a common term has as many postings as a tenth of the corpus).
DF_TABLE = "keyword_df"
TSV_TABLE = "keyword_tsv"


def _chunk_terms(chunk: Chunk) -> tuple[str, list[str], list[str]]:
    scope = scope_token(str(chunk.metadata["tenant"]), str(chunk.metadata["collection"]))
    return scope, analyze(str(chunk.metadata.get("title", ""))), analyze(chunk.text)


class PgBm25Index:
    """BM25 from a postings table: one row per (term, scope, chunk) with its frequencies and length in the
    primary key's index (index-only scans, 1.8x faster at 46k chunks), per-scope stats rows and per-(term,
    scope) document frequencies; large collections prune and rescore as the FTS5 index does."""

    name: PgKeywordBackend = "bm25"

    def __init__(self, pruning: PruningPolicy | None = None) -> None:
        """`pruning`: query-term pruning on large collections; None = every term, always."""
        self.pruning = pruning

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
        missing = connection.exec_driver_sql(f"SELECT to_regclass('{DF_TABLE}') IS NULL").scalar_one()
        if missing:
            # Databases indexed before the df table existed get it filled from their postings, once (the
            # caller holds the schema lock, so one process does it while the others wait).
            connection.exec_driver_sql(
                f"CREATE TABLE {DF_TABLE} (term text NOT NULL, scope text NOT NULL, n integer NOT NULL, "
                "PRIMARY KEY (term, scope))"
            )
            connection.exec_driver_sql(
                f"INSERT INTO {DF_TABLE} (term, scope, n) "
                f"SELECT term, scope, count(*) FROM {POSTINGS_TABLE} GROUP BY term, scope"
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
            self._count_terms(connection, Counter((term, scope) for term, scope, *_ in postings))
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

    def _count_terms(self, connection: Connection, changes: Counter[tuple[str, str]]) -> None:
        # Sorted keys, for the same reason as _bump; rows that reach 0 are deleted (a term no chunk has).
        connection.exec_driver_sql(
            f"INSERT INTO {DF_TABLE} (term, scope, n) VALUES (%s, %s, %s) "
            f"ON CONFLICT (term, scope) DO UPDATE SET n = {DF_TABLE}.n + excluded.n",
            [(term, scope, change) for (term, scope), change in sorted(changes.items())],
        )
        if any(change < 0 for change in changes.values()):
            connection.exec_driver_sql(f"DELETE FROM {DF_TABLE} WHERE n <= 0")

    def remove(self, connection: Connection, rowids: Sequence[int]) -> None:
        """Drop the keyword rows of these catalog row ids (inside the caller's transaction)."""
        if not rowids:
            return
        gone = connection.exec_driver_sql(
            f"DELETE FROM {DOCS_TABLE} WHERE chunk_row = ANY(%s) RETURNING scope, length", (list(rowids),)
        ).fetchall()
        removed = connection.exec_driver_sql(
            f"DELETE FROM {POSTINGS_TABLE} WHERE chunk_row = ANY(%s) RETURNING term, scope", (list(rowids),)
        ).fetchall()
        if removed:
            gone_terms = Counter((str(term), str(scope)) for term, scope in removed)
            self._count_terms(connection, Counter({key: -n for key, n in gone_terms.items()}))
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
        connection.exec_driver_sql(f"TRUNCATE {POSTINGS_TABLE}, {DOCS_TABLE}, {STATS_TABLE}, {DF_TABLE}")

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
        """Top `limit` chunks of `tenant` in `collections` by FTS5's BM25 that satisfy the filter, its
        statistics taken over the searched collections only (another tenant never shifts the ranks) and read
        in one REPEATABLE READ snapshot with the postings."""
        terms = query_terms(query)
        if not terms or not collections:
            return []
        connection.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        scopes = [scope_token(tenant, name) for name in collections]
        n_docs, avgdl, frequencies = _statistics(connection, terms, scopes)
        everything = [term for term in terms if frequencies.get(term, 0) > 0]
        kept = everything
        if self.pruning is not None and self.pruning.applies(int(n_docs)):
            kept = prune_terms(everything, frequencies, int(n_docs), self.pruning)
        if not kept:
            return []
        dropped = [term for term in everything if term not in kept]
        pool = self.pruning.rescore_pool if self.pruning is not None else 0
        idfs = [bm25.idf(n_docs, frequencies[term]) for term in kept]
        top, params = _top_query(kept, idfs, scopes, avgdl, title_weight, tenant, filter_sql, filter_params)
        if dropped and pool > 0:
            candidates = [
                bm25.Candidate(int(row), float(score), float(length))
                for row, score, length in connection.exec_driver_sql(top, (*params, max(pool, limit)))
            ]
            weights = {term: bm25.idf(n_docs, frequencies[term]) for term in dropped}
            best = self._rescored(connection, candidates, weights, scopes, avgdl, title_weight)
            return self._chunks(connection, best[:limit], tenant)
        sql = (
            f"WITH top AS ({top}) SELECT c.chunk_id, c.text, c.metadata, top.score "
            "FROM top JOIN chunks AS c ON c.id = top.chunk_row "
            "WHERE c.tenant = %s ORDER BY top.score DESC, top.chunk_row"
        )
        return [KeywordHit.of(*row) for row in connection.exec_driver_sql(sql, (*params, limit, tenant))]

    def _rescored(
        self,
        connection: Connection,
        candidates: Sequence[bm25.Candidate],
        weights: dict[str, float],
        scopes: Sequence[str],
        avgdl: float,
        title_weight: float,
    ) -> list[tuple[int, float]]:
        """The candidates with the dropped terms' (`weights`: term -> idf) shares added, their postings
        read by primary key."""
        if not candidates:
            return []
        counts: defaultdict[int, dict[str, float]] = defaultdict(dict)
        for row, term, tf_title, tf_body in connection.exec_driver_sql(
            f"SELECT chunk_row, term, tf_title, tf_body FROM {POSTINGS_TABLE} "
            "WHERE term = ANY(%s) AND scope = ANY(%s) AND chunk_row = ANY(%s)",
            (list(weights), list(scopes), [candidate.row for candidate in candidates]),
        ):
            counts[int(row)][str(term)] = title_weight * float(tf_title) + float(tf_body)
        return bm25.rescore(candidates, counts, weights, avgdl)

    def _chunks(
        self, connection: Connection, best: Sequence[tuple[int, float]], tenant: str
    ) -> list[KeywordHit]:
        """The chunks of `best` (row, score), in that order, that belong to `tenant`."""
        if not best:
            return []
        rows = connection.exec_driver_sql(
            "SELECT id, chunk_id, text, metadata FROM chunks WHERE id = ANY(%s) AND tenant = %s",
            ([row for row, _ in best], tenant),
        )
        return ranked_hits(rows, best)


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
        return [KeywordHit.of(*row) for row in connection.exec_driver_sql(sql, params)]


def _statistics(
    connection: Connection, terms: list[str], scopes: list[str]
) -> tuple[float, float, dict[str, int]]:
    """(documents, average length, document frequency per term) over the searched scopes."""
    n_docs, avgdl = connection.exec_driver_sql(
        f"SELECT coalesce(sum(n_docs), 0)::float8, coalesce(sum(total_length), 0)::float8 "
        f"/ greatest(sum(n_docs), 1) FROM {STATS_TABLE} WHERE scope = ANY(%s)",
        (scopes,),
    ).one()
    frequencies = {
        str(term): int(n)
        for term, n in connection.exec_driver_sql(
            f"SELECT term, sum(n) FROM {DF_TABLE} WHERE term = ANY(%s) AND scope = ANY(%s) GROUP BY term",
            (terms, scopes),
        )
    }
    return n_docs, avgdl, frequencies


def _top_query(
    kept: list[str],
    idfs: list[float],
    scopes: list[str],
    avgdl: float,
    title_weight: float,
    tenant: str,
    filter_sql: str,
    filter_params: Sequence[Any],
) -> tuple[str, tuple[Any, ...]]:
    """The BM25 top-chunks query over the kept terms (their `idfs`), joined to the chunks for a filter, and
    its parameters but the LIMIT's: (sql, params)."""
    filtered = is_filtered(filter_sql, filter_params)
    join = "JOIN chunks AS c ON c.id = p.chunk_row" if filtered else ""
    where = f"AND c.tenant = %s AND ({filter_sql})" if filtered else ""
    frequency = f"({float(title_weight)!r} * p.tf_title + p.tf_body)"
    norm = f"{bm25.K1} * (1 - {bm25.B} + {bm25.B} * p.length / {max(float(avgdl), 1.0)!r})"
    top = (
        f"SELECT p.chunk_row, sum(w.idf * {frequency} * {bm25.K1 + 1} / ({frequency} + {norm})) "
        "AS score, min(p.length) AS length "
        f"FROM {POSTINGS_TABLE} AS p JOIN unnest(%s::text[], %s::float8[]) AS w(term, idf) "
        f"ON w.term = p.term {join} WHERE p.term = ANY(%s) AND p.scope = ANY(%s) {where} "
        "GROUP BY p.chunk_row ORDER BY score DESC, p.chunk_row LIMIT %s"
    )
    params: tuple[Any, ...] = (kept, idfs, kept, scopes)
    if filtered:
        params = (*params, tenant, *filter_params)
    return top, params


def pg_keyword_index(
    backend: PgKeywordBackend, pruning: PruningPolicy | None = None
) -> PgBm25Index | PgTsvectorIndex:
    """The Postgres keyword index named by the setting `pg_keyword_backend` (BM25 prunes by `pruning`)."""
    if backend == "bm25":
        return PgBm25Index(pruning)
    return PgTsvectorIndex(backend)
