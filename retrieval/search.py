"""Search: dense (Chroma), keyword (BM25 over FTS5 or the Postgres keyword index) and hybrid (weighted RRF,
dedupe, optional MMR). Tenant isolation is enforced here: every search names one tenant, both stores are
asked for it, and every hit is checked again against that tenant's catalog rows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.exc import DBAPIError
from typing_extensions import TypedDict, Unpack

from config.settings import SearchMode, Settings
from core.text import contains_cjk, invalid_utf8
from core.types import SearchHit
from persistence.errors import StoreUnavailableError
from persistence.keyword_index import BM25_TITLE_WEIGHT
from persistence.vector_store import validate_collection_name
from retrieval.chunk_records import embedding_input
from retrieval.directory_scope import directory_prefix, is_under, normalize_directory
from retrieval.filters import Condition, FilterNode, Logical, parse_filter, to_chroma_where, to_sql
from retrieval.fusion import dedupe_best, maximal_marginal_relevance, reciprocal_rank_fusion
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search_depth import CANDIDATE_K
from retrieval.store_health import warn_once

SEARCH_MODES: tuple[SearchMode, ...] = ("dense", "bm25", "hybrid")
#: Embedding providers trained on English only.
ENGLISH_ONLY_EMBEDDINGS = frozenset({"minilm"})
MAX_K = 1000
#: Threads of the process's pool for the keyword half of hybrid searches (0 = one half after the other).
HYBRID_SEARCH_THREADS = 8
#: Reciprocal rank fusion constant (60, as in Cormack et al. and most RRF implementations).
RRF_K = 60
#: Weights of the dense and BM25 rankings in the hybrid fusion (equal: neither list dominates).
DENSE_WEIGHT = 1.0
BM25_WEIGHT = 1.0
#: Factor on the dense fusion weight for Chinese/Japanese queries when the embedding model is English-only
#: (minilm): its vectors barely rank CJK text (CMRC 2018 Recall@5 0.39 vs BM25 0.995).
CJK_DENSE_WEIGHT_FACTOR = 0.2
#: Documents a directory scope may hold (one `$in` condition, which the stores refuse when huge).
DIRECTORY_MAX_DOCUMENTS = 1000


_keyword_pool: ThreadPoolExecutor | None = None
_keyword_pool_lock = threading.Lock()


def keyword_pool(threads: int) -> ThreadPoolExecutor:
    """The process's threads for the keyword half of hybrid searches: both halves wait in C with the GIL
    released, so a hybrid search takes the longer half, not the sum."""
    global _keyword_pool
    with _keyword_pool_lock:
        if _keyword_pool is None:
            _keyword_pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="keyword-search")
        return _keyword_pool


class QueryError(ValueError):
    """A query that cannot be run (empty, too long, bad k or mode); the message says which."""


def search_mode(name: str) -> SearchMode:
    """`name` as a search mode, or QueryError naming the choices."""
    for mode in SEARCH_MODES:
        if name == mode:
            return mode
    raise QueryError(f"unknown search mode {name!r}; choose one of {', '.join(SEARCH_MODES)}")


@dataclass
class SearchResult:
    """Hits plus where the time went (milliseconds)."""

    hits: list[SearchHit]
    timings_ms: dict[str, float] = field(default_factory=dict)


def validate_query(query: str, max_chars: int) -> str:
    """The stripped query, or QueryError when it is empty or longer than `max_chars`."""
    if not isinstance(query, str) or not query.strip():
        raise QueryError("empty query: give some text to search for")
    if len(query) > max_chars:
        raise QueryError(f"query too long: {len(query)} characters > {max_chars} (RAG_MAX_QUERY_CHARS)")
    problem = invalid_utf8(query)  # argv's undecodable bytes arrive as lone surrogates (see core.text)
    if problem:
        raise QueryError(f"query is not valid UTF-8 text: {problem}")
    return query.strip()


class SearchOptions(TypedDict, total=False):
    """A search's options (PassageSearcher.search); one left out or None takes its default."""

    k: int | None
    mode: SearchMode | None
    filters: str | dict[str, Any] | FilterNode | None
    tenant: str | None
    collections: Sequence[str] | None
    mmr: bool | None
    query_vector: Sequence[float] | None
    weights: tuple[float, float] | None
    """(dense, BM25) weights replacing DENSE_WEIGHT / BM25_WEIGHT in the hybrid fusion."""
    directory: str | None


#: The keywords a search takes: any other is a caller's typo, refused rather than silently dropped.
SEARCH_OPTION_NAMES = frozenset(SearchOptions.__annotations__)


def checked_search(
    settings: Settings, query: str, options: SearchOptions
) -> tuple[str, int, SearchMode, FilterNode | None, str, str]:
    """(query, k, mode, filter tree, tenant, directory) of a search, validated with the defaults filled in;
    QueryError / FilterError / DirectoryError name what is wrong; TypeError names an unknown option."""
    unknown = sorted(set(options) - SEARCH_OPTION_NAMES)
    if unknown:
        raise TypeError(
            f"search() got unknown options {', '.join(unknown)}; it takes {sorted(SEARCH_OPTION_NAMES)}"
        )
    query = validate_query(query, settings.max_query_chars)
    k = options.get("k")
    k = settings.top_k if k is None else k
    if not 1 <= k <= MAX_K:
        raise QueryError(f"k must be between 1 and {MAX_K}, got {k}")
    mode = search_mode(options.get("mode") or settings.search_mode)
    node = options.get("filters")
    if not isinstance(node, Condition | Logical):
        node = parse_filter(node, max_conditions=settings.filter_max_conditions)
    tenant = options.get("tenant") or settings.default_tenant
    return query, k, mode, node, tenant, normalize_directory(options.get("directory") or "")


class PassageSearcher(Protocol):
    """What the graph and the search routes call: the store's Searcher, or the mock retriever."""

    settings: Settings

    def embed_query(self, query: str) -> list[float]:
        """The query's vector (the graph embeds once and passes it to each search)."""
        ...

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchResult:
        """Top `k` passages of `tenant` for `query` (under `directory` when given); QueryError /
        FilterError / DirectoryError on bad input."""
        ...


class Searcher:
    """Searches one knowledge base."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.settings = kb.settings

    def embed_query(self, query: str) -> list[float]:
        """The query's vector (separate so benchmarks can time it apart from the search)."""
        return self.kb.embeddings.embed_query(query)

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchResult:
        """Top `k` chunks of `tenant` for `query`; raises QueryError / FilterError / DirectoryError on bad
        input."""
        settings = self.settings
        query, k, mode, node, tenant, directory = checked_search(settings, query, options)
        scope = self._collections(tenant, options.get("collections"))
        mmr = options.get("mmr")
        use_mmr = settings.mmr_enabled if mmr is None else mmr
        timings: dict[str, float] = {}
        if not scope:
            return SearchResult([], timings)
        if directory:
            node = self._within(directory, tenant, node)
            if node is None:  # nothing of the tenant is indexed under the directory
                return SearchResult([], timings)
        candidates = max(CANDIDATE_K, k)

        dense, keyword, query_vector = self._retrieve(
            query, mode, tenant, scope, node, candidates, options.get("query_vector"), timings
        )
        started = time.perf_counter()
        ranked = self._fuse(query, mode, dense, keyword, options.get("weights"))
        ranked = [  # the tenant and the directory checked again on what the stores returned
            hit
            for hit in ranked
            if hit.metadata.get("tenant") == tenant
            and is_under(str(hit.metadata.get("source", "")), directory)
        ]
        if use_mmr and query_vector is not None and len(ranked) > 1:
            ranked = self._mmr(query_vector, ranked, k, tenant)
        timings["fuse_ms"] = (time.perf_counter() - started) * 1000
        return SearchResult(ranked[:k], timings)

    def _retrieve(
        self,
        query: str,
        mode: SearchMode,
        tenant: str,
        scope: list[str],
        node: FilterNode | None,
        candidates: int,
        query_vector: Sequence[float] | None,
        timings: dict[str, float],
    ) -> tuple[list[SearchHit], list[SearchHit], Sequence[float] | None]:
        """(dense hits, keyword hits, the query's vector) of the mode's rankings, timed into `timings`; in
        hybrid mode the keyword search runs in a pool thread while the dense one runs here."""
        keyword_future: Future[list[SearchHit]] | None = None
        if mode == "hybrid" and HYBRID_SEARCH_THREADS > 0:
            keyword_future = keyword_pool(HYBRID_SEARCH_THREADS).submit(
                self._timed_keyword, query, tenant, scope, node, candidates, timings
            )
        dense: list[SearchHit] = []
        try:
            if mode in ("dense", "hybrid"):
                warn_once(self.kb, self.kb.warn, tenant)  # a lost store: said once, never ignored
                if query_vector is None:
                    started = time.perf_counter()
                    query_vector = self.embed_query(query)
                    timings["embed_ms"] = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                dense = self._dense(query_vector, tenant, scope, node, candidates)
                timings["dense_ms"] = (time.perf_counter() - started) * 1000
        except BaseException:
            if keyword_future is not None:  # nothing of this search keeps running after it has failed
                wait([keyword_future])
            raise
        if keyword_future is not None:
            keyword = keyword_future.result()
        elif mode in ("bm25", "hybrid"):
            keyword = self._timed_keyword(query, tenant, scope, node, candidates, timings)
        else:
            keyword = []
        return dense, keyword, query_vector

    def _fuse(
        self,
        query: str,
        mode: SearchMode,
        dense: list[SearchHit],
        keyword: list[SearchHit],
        weights: tuple[float, float] | None,
    ) -> list[SearchHit]:
        """The mode's ranking: dense or keyword alone, or both fused by weighted reciprocal rank fusion."""
        if mode == "dense":
            return dense
        if mode == "bm25":
            return keyword
        dense_base, bm25_weight = weights or (DENSE_WEIGHT, BM25_WEIGHT)
        return reciprocal_rank_fusion(
            [dense, keyword], [self.dense_weight(query, dense_base), bm25_weight], k=RRF_K
        )

    def dense_weight(self, query: str, base: float | None = None) -> float:
        """The dense ranking's fusion weight for this query (`base`, default DENSE_WEIGHT): lowered for
        CJK text when the embedding model only knows English."""
        weight = DENSE_WEIGHT if base is None else base
        if self.settings.embedding_provider in ENGLISH_ONLY_EMBEDDINGS and contains_cjk(query):
            return weight * CJK_DENSE_WEIGHT_FACTOR
        return weight

    def _within(self, directory: str, tenant: str, node: FilterNode | None) -> FilterNode | None:
        """`node` and "source is one of the tenant's sources under `directory`"; None when there is none.
        QueryError past DIRECTORY_MAX_DOCUMENTS (the condition would grow past what the stores take)."""
        sources = self.kb.catalog.sources_under(tenant, directory_prefix(directory), directory)
        if not sources:
            return None
        limit = DIRECTORY_MAX_DOCUMENTS
        if len(sources) > limit:
            raise QueryError(
                f"directory {directory} holds {len(sources)} documents, more than {limit} "
                "(DIRECTORY_MAX_DOCUMENTS): scope a deeper directory"
            )
        within = Condition("source", "$in", tuple(sources))
        return within if node is None else Logical("$and", (node, within))

    def _collections(self, tenant: str, requested: Sequence[str] | None) -> list[str]:
        available = self.kb.catalog.collections(tenant)
        if not requested:
            return available
        return [name for name in map(validate_collection_name, requested) if name in available]

    def _dense(
        self, vector: Sequence[float], tenant: str, scope: list[str], node: FilterNode | None, limit: int
    ) -> list[SearchHit]:
        where = to_chroma_where(node)
        found = []
        for collection in scope:
            found.extend(self.kb.vectors.search(tenant, collection, vector, limit, where))
        threshold = self.settings.similarity_threshold
        found = [hit for hit in found if hit.similarity >= threshold]
        known = self.kb.catalog.chunks_by_id([hit.chunk_id for hit in found], tenant)
        hits = [
            SearchHit(hit.chunk_id, stored.text, stored.metadata, hit.similarity, hit.similarity)
            for hit in found
            if (stored := known.get(hit.chunk_id)) is not None
        ]
        return dedupe_best(hits)[:limit]

    def _timed_keyword(
        self,
        query: str,
        tenant: str,
        scope: list[str],
        node: FilterNode | None,
        limit: int,
        timings: dict[str, float],
    ) -> list[SearchHit]:
        started = time.perf_counter()
        try:
            return self._keyword(query, tenant, scope, node, limit)
        finally:
            timings["bm25_ms"] = (time.perf_counter() - started) * 1000

    def _keyword(
        self, query: str, tenant: str, scope: list[str], node: FilterNode | None, limit: int
    ) -> list[SearchHit]:
        catalog = self.kb.catalog
        filter_sql, params = to_sql(node, column="c.metadata", dialect=catalog.dialect)
        try:
            found = catalog.keyword_search(
                query,
                tenant=tenant,
                collections=scope,
                filter_sql=filter_sql,
                filter_params=params,
                limit=limit,
                title_weight=BM25_TITLE_WEIGHT,
            )
        except DBAPIError as error:
            # The input was validated, so a database error here is the store failing: an outage (503).
            raise StoreUnavailableError(f"keyword search failed: {error.orig or error}") from error
        return [
            SearchHit(hit.chunk_id, hit.text, hit.metadata, hit.score, bm25_score=hit.score) for hit in found
        ]

    def _mmr(
        self, query_vector: Sequence[float], ranked: list[SearchHit], k: int, tenant: str
    ) -> list[SearchHit]:
        pool = ranked[: max(k * 4, k)]
        inputs = [embedding_input(str(hit.metadata.get("title", "")), hit.text) for hit in pool]
        vectors = self.kb.embeddings.for_tenant(tenant).embed_documents(inputs)
        top = pool[0].score or 1.0
        relevance = [hit.score / top for hit in pool]
        order = maximal_marginal_relevance(query_vector, vectors, k, self.settings.mmr_lambda, relevance)
        return [pool[index] for index in order]
