"""The keyword (BM25) index: an SQLite FTS5 table beside the catalog's chunk rows, persistent and
incremental, changed in the same transaction as the chunks it indexes. Text is analysed by
`core.keyword.analyze` before it reaches FTS5, which then only splits on spaces.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from core.keyword import analyze
from core.types import Chunk
from persistence import bm25
from persistence.fts_statistics import (
    DF_TABLE,
    FTS_TABLE,
    count_frequencies,
    create_frequencies,
    create_vocabulary,
    document_frequencies,
    index_averages,
    row_terms,
    total_chunks,
)
from persistence.keyword_pruning import PruningPolicy, prune_terms

#: BM25 weight of a chunk's document title relative to its body (the same: a title is text like any other).
BM25_TITLE_WEIGHT = 1.0
#: Share of the index the searched collections must hold for a large-index search to try its terms without
#: the scope restriction first (see KeywordIndex._search_rescored).
UNSCOPED_FIRST_MIN_SHARE = 0.5
#: Row ids read per statement when removing rows (SQLite's bound-parameter limit is 999 on old builds).
REMOVE_BATCH = 500
#: Most distinct query terms sent to FTS5 (longer queries keep their first terms).
MAX_QUERY_TERMS = 64


@dataclass(frozen=True)
class KeywordHit:
    """A BM25 match: higher score is better (FTS5's bm25() is negated)."""

    chunk_id: str
    text: str
    metadata: dict[str, Any]
    score: float

    @classmethod
    def of(cls, chunk_id: str, text: str, metadata: str, score: float) -> KeywordHit:
        """A hit from a stored chunk row (metadata as its JSON text)."""
        return cls(chunk_id, text, json.loads(metadata), float(score))


def ranked_hits(rows: Iterable[Sequence[Any]], best: Sequence[tuple[int, float]]) -> list[KeywordHit]:
    """`best` (row id, score) as hits, in that order, from the stored (row id, chunk id, text, metadata)
    `rows` (a row id not among them is left out)."""
    found = {int(row): (chunk_id, text, meta) for row, chunk_id, text, meta in rows}
    return [KeywordHit.of(*found[row], score) for row, score in best if row in found]


def scope_token(tenant: str, collection: str) -> str:
    """The one-word token of a chunk's (tenant, collection) in the `scope` column: a MATCH restricted by it
    intersects posting lists inside FTS5 (2x faster than joining every match to the chunk table)."""
    return "s" + hashlib.sha1(f"{tenant}\x1f{collection}".encode()).hexdigest()[:20]


#: What `retrieval.filters.to_sql` renders for "no filter" (SQLite's and PostgreSQL's spelling).
NO_FILTER_SQL = frozenset({"1", "TRUE"})


def is_filtered(filter_sql: str, filter_params: Sequence[Any]) -> bool:
    """Whether a rendered filter restricts anything (the unfiltered plan joins the chunk table last)."""
    return bool(filter_params) or filter_sql.strip().upper() not in NO_FILTER_SQL


def query_terms(query: str) -> list[str]:
    """The distinct analysed terms of a query, at most MAX_QUERY_TERMS (what every keyword backend seeks)."""
    return list(dict.fromkeys(analyze(query)))[:MAX_QUERY_TERMS]


def match_expression(terms: Sequence[str], scopes: Sequence[str] = ()) -> str | None:
    """FTS5 MATCH expression: the terms OR-ed (each quoted), restricted to the scope tokens; None when there
    is no term."""
    if not terms:
        return None
    expression = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    if not scopes:
        return expression
    scope = " OR ".join(f'scope : "{token}"' for token in scopes)
    return f"({expression}) AND ({scope})"


class KeywordIndex:
    """FTS5 rows keyed by the catalog's chunk row id: columns scope (tenant+collection), title, body."""

    def __init__(self, pruning: PruningPolicy | None = None) -> None:
        """`pruning`: query-term pruning on large indexes (persistence/keyword_pruning.py); None = every term,
        always."""
        self.pruning = pruning

    def create(self, connection: Connection) -> None:
        """Create the FTS5 table when missing."""
        connection.exec_driver_sql(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} "
            "USING fts5(scope, title, body, tokenize='unicode61')"
        )
        create_vocabulary(connection)
        create_frequencies(connection)

    def add(self, connection: Connection, rows: Sequence[tuple[int, Chunk]]) -> None:
        """Index chunks under their catalog row ids (inside the caller's transaction)."""
        values = [
            (
                rowid,
                scope_token(str(chunk.metadata["tenant"]), str(chunk.metadata["collection"])),
                " ".join(analyze(str(chunk.metadata.get("title", "")))),
                " ".join(analyze(chunk.text)),
            )
            for rowid, chunk in rows
        ]
        connection.exec_driver_sql(
            f"INSERT INTO {FTS_TABLE}(rowid, scope, title, body) VALUES (?, ?, ?, ?)", values
        )
        count_frequencies(connection, Counter(term for _, *columns in values for term in row_terms(*columns)))

    def remove(self, connection: Connection, rowids: Sequence[int]) -> None:
        """Drop the FTS rows of these catalog row ids (inside the caller's transaction)."""
        if not rowids:
            return
        lost: Counter[str] = Counter()
        for start in range(0, len(rowids), REMOVE_BATCH):
            batch = rowids[start : start + REMOVE_BATCH]
            marks = ", ".join("?" for _ in batch)
            for columns in connection.exec_driver_sql(
                f"SELECT scope, title, body FROM {FTS_TABLE} WHERE rowid IN ({marks})", tuple(batch)
            ):
                lost.update(row_terms(*columns))
        connection.exec_driver_sql(f"DELETE FROM {FTS_TABLE} WHERE rowid = ?", [(rowid,) for rowid in rowids])
        count_frequencies(connection, Counter({term: -n for term, n in lost.items()}))

    def rowids(self, connection: Connection) -> set[int]:
        """Catalog row ids that have FTS rows (for the doctor's comparison with the chunk table)."""
        return {rowid for (rowid,) in connection.exec_driver_sql(f"SELECT rowid FROM {FTS_TABLE}")}

    def count(self, connection: Connection) -> int:
        """Indexed rows (the health probe's figure)."""
        return int(connection.exec_driver_sql(f"SELECT count(*) FROM {FTS_TABLE}").scalar_one())

    def integrity_error(self, connection: Connection) -> str | None:
        """FTS5's own consistency check of its index structures; None when sound."""
        try:
            connection.exec_driver_sql(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('integrity-check')")
        except Exception as error:  # noqa: BLE001 - any failure of the check is the finding itself
            return str(error.__cause__ or getattr(error, "orig", None) or error)
        return None

    def reset(self, connection: Connection) -> None:
        """Drop the FTS table with its shadow tables and create it empty (inside the caller's transaction,
        before a rebuild)."""
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {FTS_TABLE}")
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {DF_TABLE}")
        self.create(connection)

    def _pruned(
        self, connection: Connection, terms: list[str], scopes: Sequence[str]
    ) -> tuple[list[str], dict[str, int], int]:
        """The kept terms, the document frequencies read (scope tokens' too; empty when not pruned) and the
        index's size."""
        policy = self.pruning
        if not terms or policy is None or not policy.applies(total := total_chunks(connection)):
            return terms, {}, 0
        frequencies = document_frequencies(connection, [*terms, *scopes])
        return prune_terms(terms, frequencies, total, policy), frequencies, total

    def _rescored(
        self,
        connection: Connection,
        rows: Sequence[tuple[int, str, str, float]],
        dropped: Sequence[str],
        frequencies: dict[str, int],
        title_weight: float,
        limit: int,
    ) -> list[tuple[int, float]]:
        """The best `limit` of (row id, title terms, body terms, FTS5 rank over the kept terms) with the
        dropped terms' shares added (exact BM25 over every term; persistence/bm25.py)."""
        n_rows, avgdl = index_averages(connection)
        weights = {term: bm25.idf(n_rows, frequencies.get(term, 0)) for term in dropped}
        candidates, counts = [], {}
        for rowid, title, body, rank in rows:
            title_terms, body_terms = title.split(), body.split()
            # Every column's tokens count in a row's length, the scope column's one token included.
            candidates.append(bm25.Candidate(rowid, -rank, 1 + len(title_terms) + len(body_terms)))
            in_title, in_body = Counter(title_terms), Counter(body_terms)
            counts[rowid] = {term: title_weight * in_title[term] + in_body[term] for term in dropped}
        return bm25.rescore(candidates, counts, weights, avgdl)[:limit]

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
        title_weight: float = BM25_TITLE_WEIGHT,
    ) -> list[KeywordHit]:
        """Top `limit` chunks of `tenant` in `collections` by BM25 that satisfy the filter (without a filter
        only the top rows are joined to the chunk table; the tenant is checked in SQL either way)."""
        if not collections:
            return []
        terms = query_terms(query)
        scopes = [scope_token(tenant, name) for name in collections]
        kept, frequencies, total = self._pruned(connection, terms, scopes)
        expression = match_expression(kept, scopes)
        if expression is None:
            return []
        rank = f"bm25({FTS_TABLE}, 0.0, {float(title_weight)!r}, 1.0)"
        dropped = [term for term in terms if term not in kept]
        pool = self.pruning.rescore_pool if self.pruning is not None else 0
        if frequencies and pool > 0:  # a large index: the candidate pool, rescored when terms were dropped
            share = sum(frequencies.get(token, 0) for token in scopes) / max(total, 1)
            return self._search_rescored(
                connection,
                expression,
                dropped,
                frequencies,
                unscoped=match_expression(kept) if share >= UNSCOPED_FIRST_MIN_SHARE else None,
                scopes=scopes,
                tenant=tenant,
                filter_sql=filter_sql,
                filter_params=filter_params,
                limit=limit,
                pool=max(pool, limit),
                rank=rank,
                title_weight=title_weight,
            )
        if is_filtered(filter_sql, filter_params):
            sql = (
                f"SELECT c.chunk_id, c.text, c.metadata, {rank} AS rank "
                f"FROM {FTS_TABLE} JOIN chunks AS c ON c.id = {FTS_TABLE}.rowid "
                f"WHERE {FTS_TABLE} MATCH ? AND c.tenant = ? AND ({filter_sql}) ORDER BY rank LIMIT ?"
            )
            params: tuple[Any, ...] = (expression, tenant, *filter_params, limit)
        else:
            sql = (
                f"SELECT c.chunk_id, c.text, c.metadata, f.rank FROM (SELECT rowid, {rank} AS rank "
                f"FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? ORDER BY rank LIMIT ?) AS f "
                "JOIN chunks AS c ON c.id = f.rowid WHERE c.tenant = ? ORDER BY f.rank"
            )
            params = (expression, limit, tenant)
        rows = connection.exec_driver_sql(sql, params).fetchall()
        return [KeywordHit.of(chunk_id, text, meta, -rank) for chunk_id, text, meta, rank in rows]

    def _search_rescored(
        self,
        connection: Connection,
        expression: str,
        dropped: Sequence[str],
        frequencies: dict[str, int],
        *,
        unscoped: str | None,
        scopes: Sequence[str],
        tenant: str,
        filter_sql: str,
        filter_params: Sequence[Any],
        limit: int,
        pool: int,
        rank: str,
        title_weight: float,
    ) -> list[KeywordHit]:
        """A search on a large index: the best `pool` rows by the kept terms, rescored with the dropped
        terms, then the best `limit` joined to their chunks. `unscoped` (the kept terms without the scope
        restriction, whose posting list cost 50 vs 18 ms at 500k chunks) is tried first when the searched
        collections hold most of the index: the scope weighs 0 in the rank, so its in-scope rows are the
        scoped ranking."""
        filtered = is_filtered(filter_sql, filter_params)
        rows: list[Any] = []
        if unscoped is not None and not filtered:
            found = self._pool(connection, unscoped, (), pool, rank)
            rows = [row[1:] for row in found if row[0] in scopes]
            if len(rows) < limit and len(found) == pool:  # not enough in scope, and more exist: ask scoped
                rows = []
            elif not rows:
                return []
        if not rows:
            if filtered:
                joined = f"JOIN chunks AS c ON c.id = {FTS_TABLE}.rowid"
                condition = f"AND c.tenant = ? AND ({filter_sql})"
                rows = [
                    row[1:]
                    for row in self._pool(
                        connection, expression, (tenant, *filter_params), pool, rank, joined, condition
                    )
                ]
            else:
                rows = [row[1:] for row in self._pool(connection, expression, (), pool, rank)]
        best = self._rescored(connection, rows, dropped, frequencies, title_weight, limit)
        if not best:
            return []
        return _stored_hits(connection, best, tenant)

    def _pool(
        self,
        connection: Connection,
        expression: str,
        params: Sequence[Any],
        pool: int,
        rank: str,
        joined: str = "",
        condition: str = "",
    ) -> list[Any]:
        """(scope, row id, title terms, body terms, rank) of the best `pool` matches of `expression` (the
        stored columns read for those rows only, not for every match before the sort)."""
        ranked = (
            f"SELECT {FTS_TABLE}.rowid AS id, {rank} AS rank FROM {FTS_TABLE} {joined} "
            f"WHERE {FTS_TABLE} MATCH ? {condition} ORDER BY rank LIMIT ?"
        )
        sql = (
            f"SELECT t.scope, p.id, t.title, t.body, p.rank FROM ({ranked}) AS p "
            f"JOIN {FTS_TABLE} AS t ON t.rowid = p.id ORDER BY p.rank"
        )
        return list(connection.exec_driver_sql(sql, (expression, *params, pool)).fetchall())


def _stored_hits(connection: Connection, best: list[tuple[int, float]], tenant: str) -> list[KeywordHit]:
    """The rescored rows (rowid, score) as hits of `tenant`'s stored chunks, in their order."""
    marks = ", ".join("?" for _ in best)
    # `+tenant`: not an index term, so SQLite looks the rows up by id instead of walking the tenant's index
    # (every chunk of a large tenant: 170 ms at 500k chunks).
    rows = connection.exec_driver_sql(
        f"SELECT id, chunk_id, text, metadata FROM chunks WHERE id IN ({marks}) AND +tenant = ?",
        (*(rowid for rowid, _ in best), tenant),
    )
    return ranked_hits(rows, best)
