"""`python -m benchmarks keyword-backends`: which keyword index serves when the catalog is on PostgreSQL, by
measurement.

Backends compared on the same chunks and queries: the embedded SQLite FTS5 index (today's, the reference),
and on Postgres the table-backed BM25 and Postgres full text ranked by ts_rank and by ts_rank_cd
(persistence/pg_keyword_index.py). Quality: nDCG@10, Recall@10/100 and MRR@10 on BEIR SciFact queries with
the TRAIN qrels (SciFact has no dev split; the test qrels are never read here, so nothing is tuned on them).
Speed: p50/p95 of `Catalog.keyword_search` (k=10, what a `rag search` asks for), measured on the corpus once
and on `copies` copies of it in the same collection (a stand-in for a bigger corpus: more postings per term).

Only the keyword index is measured (no embeddings): chunks are made by the product's chunker with the
configured sizes and written through `Catalog.replace_document`, the path ingestion uses.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.data import iter_beir_corpus
from config.settings import Settings
from core.types import Chunk
from evals.datasets import Passage, load_beir
from evals.environment import machine_description
from evals.metrics import dedupe_to_documents, linear_percentile, mrr_at_k, ndcg_at_k, recall_at_k
from persistence.catalog import Catalog
from persistence.keyword_index import BM25_TITLE_WEIGHT
from persistence.pg_keyword_index import PG_KEYWORD_BACKENDS, PgKeywordBackend
from retrieval.chunking import MIN_CHUNK_FRACTION, ChunkingConfig, chunk_text
from retrieval.filters import to_sql

#: SciFact's qrels split whose queries tune and choose (it has no dev split; test stays unread).
DEV_SPLIT = "train"
EVAL_TENANT = "eval"
EVAL_COLLECTION = "eval"
#: Chunks fetched per query for the quality metrics (enough distinct documents for Recall@100).
QUALITY_K = 150
#: k of the timed search.
LATENCY_K = 10
#: Documents written per catalog transaction while loading.
LOAD_BATCH_DOCS = 200
SQLITE_BACKEND = "sqlite_fts5"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BackendTarget:
    """Where one backend's catalog lives: a SQLite file or a Postgres database URL, and its keyword index."""

    name: str
    location: Path | str
    pg_backend: str = "bm25"


def corpus_chunks(passages: Iterable[Passage], config: ChunkingConfig) -> list[list[Chunk]]:
    """Chunks per document as ingestion makes them (title in metadata, doc id kept for scoring)."""
    documents = []
    for passage in passages:
        chunks = []
        for index, text in enumerate(chunk_text(passage.text, config)):
            metadata = {
                "tenant": EVAL_TENANT,
                "collection": EVAL_COLLECTION,
                "title": passage.title,
                "doc_id": passage.passage_id,
            }
            chunks.append(Chunk(f"{passage.passage_id}#{index}", text, metadata))
        if chunks:
            documents.append(chunks)
    return documents


def copied(documents: Sequence[list[Chunk]], copy: int) -> list[list[Chunk]]:
    """The same chunks under other ids: a bigger corpus with the same vocabulary (copy 0 = the original)."""
    if copy == 0:
        return list(documents)
    return [
        [Chunk(f"{chunk.chunk_id}~{copy}", chunk.text, chunk.metadata) for chunk in doc] for doc in documents
    ]


def load_catalog(catalog: Catalog, documents: Sequence[list[Chunk]], copy: int) -> float:
    """Write the documents in batches of LOAD_BATCH_DOCS per transaction; return the seconds taken."""
    started = time.perf_counter()
    for start in range(0, len(documents), LOAD_BATCH_DOCS):
        batch = [chunk for document in documents[start : start + LOAD_BATCH_DOCS] for chunk in document]
        catalog.replace_document(
            tenant=EVAL_TENANT,
            collection=EVAL_COLLECTION,
            source=f"batch-{copy}-{start}",
            file_hash="eval",
            doc_type="jsonl",
            title="",
            chunks=batch,
        )
    catalog.analyze_keyword_index()
    return time.perf_counter() - started


def _search(catalog: Catalog, query: str, limit: int, title_weight: float) -> list[str]:
    no_filter, params = to_sql(None, dialect=catalog.dialect)
    hits = catalog.keyword_search(
        query,
        tenant=EVAL_TENANT,
        collections=[EVAL_COLLECTION],
        filter_sql=no_filter,
        filter_params=params,
        limit=limit,
        title_weight=title_weight,
    )
    return [str(hit.metadata["doc_id"]) for hit in hits]


def quality(
    catalog: Catalog, queries: dict[str, str], qrels: dict[str, dict[str, int]], title_weight: float
) -> dict[str, float]:
    """Mean nDCG@10, Recall@10/100 and MRR@10 over the judged queries (a document = its best chunk)."""
    totals = {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    judged = [query_id for query_id in qrels if query_id in queries]
    for query_id in judged:
        ranked = dedupe_to_documents(_search(catalog, queries[query_id], QUALITY_K, title_weight))
        relevance = qrels[query_id]
        totals["ndcg@10"] += ndcg_at_k(ranked, relevance, 10)
        totals["recall@10"] += recall_at_k(ranked, relevance, 10)
        totals["recall@100"] += recall_at_k(ranked, relevance, 100)
        totals["mrr@10"] += mrr_at_k(ranked, relevance, 10)
    return {name: round(value / max(len(judged), 1), 4) for name, value in totals.items()}


def latency(catalog: Catalog, queries: Sequence[str], title_weight: float) -> dict[str, float]:
    """p50/p95/mean milliseconds of one keyword search (k=LATENCY_K), after one warm-up pass."""
    for query in queries[:20]:
        _search(catalog, query, LATENCY_K, title_weight)
    times = []
    for query in queries:
        started = time.perf_counter()
        _search(catalog, query, LATENCY_K, title_weight)
        times.append((time.perf_counter() - started) * 1000)
    return {
        "p50_ms": round(linear_percentile(times, 50), 2),
        "p95_ms": round(linear_percentile(times, 95), 2),
        "mean_ms": round(sum(times) / len(times), 2),
        "queries": len(times),
    }


def fresh_database(server_url: str, prefix: str = "kwbench") -> str:
    """CREATE DATABASE <prefix>_<random> on the server of `server_url`; return its URL."""
    import psycopg  # late: only the Postgres measurement needs the driver

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    plain = server_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"{plain.rsplit('/', 1)[0]}/{name}"


def drop_database(server_url: str, url: str) -> None:
    """Drop a database made by fresh_database (its connections closed first)."""
    import psycopg

    plain = server_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def run_keyword_backends_eval(
    settings: Settings,
    *,
    scifact_dir: Path,
    database_url: str,
    work_dir: Path,
    copies: int = 10,
    latency_queries: int = 300,
    backends: Sequence[str] = (SQLITE_BACKEND, *PG_KEYWORD_BACKENDS),
    progress: Progress = lambda _message: None,
) -> dict[str, Any]:
    """Measure every backend on SciFact (quality and latency), then latency on `copies` copies of it."""
    dataset = load_beir(scifact_dir, DEV_SPLIT)
    passages = list(iter_beir_corpus(dataset.corpus_path))
    config = ChunkingConfig(settings.chunk_size, settings.chunk_overlap, MIN_CHUNK_FRACTION)
    base = corpus_chunks(passages, config)
    n_chunks = sum(len(document) for document in base)
    timed = [dataset.queries[query_id] for query_id in sorted(dataset.qrels)][:latency_queries]
    title_weight = BM25_TITLE_WEIGHT
    results: dict[str, Any] = {}
    for name in backends:
        work_dir.mkdir(parents=True, exist_ok=True)
        if name == SQLITE_BACKEND:
            location: Path | str = work_dir / f"keyword-{uuid.uuid4().hex[:8]}.sqlite"
        else:
            location = fresh_database(database_url)
        pg_backend: PgKeywordBackend = next((known for known in PG_KEYWORD_BACKENDS if known == name), "bm25")
        catalog = Catalog(location, pg_keyword_backend=pg_backend)
        try:
            progress(f"{name}: loading {n_chunks} chunks")
            load_s = load_catalog(catalog, base, 0)
            progress(f"{name}: quality on {len(dataset.qrels)} queries")
            entry: dict[str, Any] = {
                "load_s": round(load_s, 1),
                "quality": quality(catalog, dataset.queries, dataset.qrels, title_weight),
                "latency": {str(n_chunks): latency(catalog, timed, title_weight)},
            }
            if copies > 1:
                progress(f"{name}: loading {copies - 1} more copies")
                for copy in range(1, copies):
                    load_catalog(catalog, copied(base, copy), copy)
                entry["latency"][str(n_chunks * copies)] = latency(catalog, timed, title_weight)
            results[name] = entry
        finally:
            catalog.close()
            if isinstance(location, Path):
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{location}{suffix}").unlink(missing_ok=True)
            else:
                drop_database(database_url, location)
    return {
        "benchmark": "keyword_backends",
        "dataset": f"BEIR SciFact, {DEV_SPLIT} qrels as dev ({len(dataset.qrels)} judged queries)",
        "corpus_chunks": n_chunks,
        "copies": copies,
        "latency_k": LATENCY_K,
        "latency_queries": len(timed),
        "chunking": {"size": config.size, "overlap": config.overlap},
        "machine": machine_description(),
        "backends": results,
        "chosen": choose(results),
    }


def choose(results: dict[str, Any]) -> str | None:
    """The Postgres backend to serve: the best nDCG@10, unless another is within 0.005 of it and at least
    2x faster at the largest size measured (quality first; speed breaks near-ties)."""
    postgres = {name: entry for name, entry in results.items() if name in PG_KEYWORD_BACKENDS}
    if not postgres:
        return None

    def p50(entry: dict[str, Any]) -> float:
        sizes = entry["latency"]
        return float(sizes[max(sizes, key=int)]["p50_ms"])

    best = max(postgres, key=lambda name: postgres[name]["quality"]["ndcg@10"])
    for name, entry in postgres.items():
        close = entry["quality"]["ndcg@10"] >= postgres[best]["quality"]["ndcg@10"] - 0.005
        if name != best and close and p50(entry) * 2 <= p50(postgres[best]):
            best = name
    return best
