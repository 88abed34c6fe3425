"""`python -m benchmarks scale`: retrieval latency (dense, keyword, hybrid; p50/p95) at 5k, 50k and 500k
chunks.

Stores are built through the product's own classes (chunk metadata by `build_chunks`, vectors by
`VectorStore.upsert`, catalog and keyword index by `Catalog.replace_document`), and searches go through
`Searcher.search` with a tenant, so the timed path is the product's path: Chroma nearest neighbours plus the
catalog's confirmation of every hit, the keyword index, and fusion. Only the embedding of chunks is replaced
by the synthetic vectors of evals.scale_corpus (encoding 500k chunks would take hours on 2 cores); query
vectors are real MiniLM vectors, computed before the timing and reported apart (`embed_ms`).

Each store is built once under `<root>/<setup>-<size>/` and reused (a `scale-built.json` marker is written
last, so an interrupted build is redone, never measured). The server set-up serves the SAME Chroma folder with
`chroma run --path` and reads the keyword index from the database named by `--database-url`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from benchmarks import scale_corpus
from config.settings import SearchMode, Settings
from core.types import LoadedDocument, Section
from evals.environment import machine_description
from evals.eval_index import ProgressFactory, no_progress
from evals.metrics import linear_percentile
from persistence import vector_store
from retrieval.chunk_records import build_chunks
from retrieval.embeddings import MiniLMEmbeddings, content_hash
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher

DEFAULT_SIZES = (5_000, 50_000, 500_000)
MODES: tuple[SearchMode, ...] = ("dense", "bm25", "hybrid")
SCALE_TENANT = "scale"
#: A second tenant beside the measured one (1% of its size): scoping must exclude its chunks.
OTHER_TENANT = "scale-other"
OTHER_TENANT_SHARE = 0.01
SCALE_COLLECTION = "scifact-synthetic"
#: Synthetic chunks per source (one source = one catalog document, like a JSONL file of records).
CHUNKS_PER_SOURCE = 100
#: Chunks written to Chroma per upsert call.
WRITE_BATCH = 2_000
MARKER_FILE = "scale-built.json"
#: k of the timed search (as `rag eval retrieval`'s latency figures).
LATENCY_K = 10
#: Untimed searches per mode before timing (first-touch costs: index files into the page cache).
WARMUP_QUERIES = 5
SERVER_START_TIMEOUT_S = 120.0


@dataclass
class ModeTimings:
    """Per-query wall times of one mode, with the searcher's own stage times."""

    total_ms: list[float] = field(default_factory=list)
    stages_ms: dict[str, list[float]] = field(default_factory=dict)
    hits: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """p50/p95/mean of the totals and p50 of each stage (milliseconds, 2 decimals)."""
        return {
            "queries": len(self.total_ms),
            "p50_ms": round(linear_percentile(self.total_ms, 50), 2),
            "p95_ms": round(linear_percentile(self.total_ms, 95), 2),
            "mean_ms": round(sum(self.total_ms) / len(self.total_ms), 2),
            "stage_p50_ms": {
                stage: round(linear_percentile(values, 50), 2)
                for stage, values in sorted(self.stages_ms.items())
            },
            "mean_hits": round(sum(self.hits) / len(self.hits), 2),
        }


def time_searches(
    searcher: Searcher,
    queries: Sequence[tuple[str, Sequence[float]]],
    mode: SearchMode,
    *,
    tenant: str,
    k: int = LATENCY_K,
    warmup: int = WARMUP_QUERIES,
) -> ModeTimings:
    """Time `searcher.search` for every (query, vector) in `mode`, after `warmup` untimed searches.

    The query vector is passed in, so the times are the stores' and fusion's, not the embedding model's."""
    for text, vector in list(queries)[:warmup]:
        searcher.search(text, k=k, mode=mode, tenant=tenant, query_vector=vector, mmr=False)
    timings = ModeTimings()
    for text, vector in queries:
        started = time.perf_counter()
        result = searcher.search(text, k=k, mode=mode, tenant=tenant, query_vector=vector, mmr=False)
        timings.total_ms.append((time.perf_counter() - started) * 1000)
        timings.hits.append(len(result.hits))
        for stage, value in result.timings_ms.items():
            timings.stages_ms.setdefault(stage, []).append(value)
    return timings


# --- building -------------------------------------------------------------------------------------------
def store_dir(root: Path, size: int) -> Path:
    """The folder of one size's embedded store (its Chroma folder is also what the server set-up serves)."""
    return root / f"embedded-{size}"


def store_settings(settings: Settings, root: Path, size: int) -> Settings:
    """`settings` pointed at one size's store, embedded (no Chroma server, no database URL)."""
    return settings.model_copy(
        update={"data_dir": store_dir(root, size), "chroma_host": None, "database_url": None}
    )


def built_marker(data_dir: Path) -> dict[str, Any] | None:
    """The build record of a store folder, or None when it was never completed."""
    path = data_dir / MARKER_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _sources(
    base: scale_corpus.BasePassages, count: int, seed: int, tenant: str
) -> Iterator[tuple[str, list[LoadedDocument], np.ndarray]]:
    """(source name, one record per chunk, their vectors) in groups of CHUNKS_PER_SOURCE."""
    group: list[scale_corpus.SyntheticChunk] = []
    for chunk in scale_corpus.synthetic_chunks(base, count, seed):
        group.append(chunk)
        if len(group) == CHUNKS_PER_SOURCE or chunk.index == count - 1:
            source = f"synthetic/{tenant}/{group[0].index // CHUNKS_PER_SOURCE:06d}.jsonl"
            documents = [
                LoadedDocument(
                    source=source,
                    title=item.title,
                    doc_type="record",
                    sections=[Section(item.text)],
                    doc_id=f"chunk-{item.index}",
                    unchunked=True,
                )
                for item in group
            ]
            yield source, documents, np.stack([item.vector for item in group])
            group = []


def write_corpus(
    kb: KnowledgeBase,
    base: scale_corpus.BasePassages,
    count: int,
    *,
    seed: int,
    tenant: str,
    collection: str = SCALE_COLLECTION,
    vectors: bool = True,
    advance: Callable[[int], None] = lambda _n: None,
) -> int:
    """Write `count` synthetic chunks of `tenant` through the product's storage classes; return their number.

    As `retrieval.indexing.index_documents` does, minus the embedding: chunks with the full metadata schema,
    vectors into Chroma (written by a second thread while the catalog commits), then one atomic catalog
    replacement (documents, chunks, keyword index) per source. `vectors=False` writes the catalog only (the
    server set-up's database reuses the Chroma folder of the embedded store)."""
    written = 0
    pending_chunks: list[Any] = []
    pending_vectors: list[np.ndarray] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="scale-upsert") as writer:
        futures: list[Future[None]] = []

        def flush() -> None:
            if pending_chunks and vectors:
                futures.append(
                    writer.submit(
                        kb.vectors.upsert,
                        tenant,
                        collection,
                        list(pending_chunks),
                        np.concatenate(pending_vectors).tolist(),
                    )
                )
            pending_chunks.clear()
            pending_vectors.clear()

        for source, documents, matrix in _sources(base, count, seed, tenant):
            chunks = build_chunks(
                documents, kb, tenant=tenant, collection=collection, doc_hash=content_hash(source)
            )
            kb.catalog.replace_document(
                tenant=tenant,
                collection=collection,
                source=source,
                file_hash=content_hash(source),
                doc_type="record",
                title=Path(source).name,
                chunks=chunks,
            )
            pending_chunks.extend(chunks)
            pending_vectors.append(matrix)
            written += len(chunks)
            advance(len(chunks))
            if len(pending_chunks) >= WRITE_BATCH:
                flush()
        flush()
        for future in futures:
            future.result()
    return written


def other_tenant_size(size: int) -> int:
    """Chunks of the second tenant beside a store of `size` chunks."""
    return max(CHUNKS_PER_SOURCE, int(size * OTHER_TENANT_SHARE))


def write_tenants(
    kb: KnowledgeBase,
    base: scale_corpus.BasePassages,
    size: int,
    *,
    seed: int,
    vectors: bool,
    advance: Callable[[int], None],
) -> int:
    """`size` chunks of SCALE_TENANT and `other_tenant_size(size)` of OTHER_TENANT (its own seed); returns
    the chunks written."""
    written = write_corpus(kb, base, size, seed=seed, tenant=SCALE_TENANT, vectors=vectors, advance=advance)
    other = other_tenant_size(size)
    return written + write_corpus(
        kb, base, other, seed=seed + 1, tenant=OTHER_TENANT, vectors=vectors, advance=advance
    )


def build_store(
    kb: KnowledgeBase,
    base: scale_corpus.BasePassages,
    size: int,
    *,
    seed: int,
    vectors: bool = True,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Build (or reuse) the store of `kb` with `size` chunks of SCALE_TENANT and 1% of OTHER_TENANT."""
    data_dir = kb.settings.data_dir
    found = built_marker(data_dir)
    if found is not None and found.get("size") == size and found.get("seed") == seed:
        return found
    other = other_tenant_size(size)
    advance = progress(f"build {data_dir.name}", size + other)
    started = time.perf_counter()
    written = write_tenants(kb, base, size, seed=seed, vectors=vectors, advance=advance)
    record = {
        "size": size,
        "seed": seed,
        "other_tenant_chunks": other,
        "chunks_written": written,
        "base_passages": len(base.ids),
        "build_s": round(time.perf_counter() - started, 1),
        "chunks_per_s": round(written / max(time.perf_counter() - started, 1e-9), 1),
        "machine": machine_description(),
    }
    (data_dir / MARKER_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
    return record


def build_database(
    kb: KnowledgeBase,
    base: scale_corpus.BasePassages,
    size: int,
    *,
    seed: int,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """The server set-up's catalog and keyword index in the database of `kb` (its Chroma is the embedded
    store's folder, served), built once: the build record is kept in a table of that database."""
    from sqlalchemy import text

    engine = kb.catalog.engine
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE IF NOT EXISTS scale_built (record TEXT NOT NULL)"))
        row = connection.execute(text("SELECT record FROM scale_built")).first()
    if row is not None:
        found = json.loads(row[0])
        if found.get("size") == size and found.get("seed") == seed:
            return dict(found)
    advance = progress(f"build database of {size}", size + other_tenant_size(size))
    started = time.perf_counter()
    written = write_tenants(kb, base, size, seed=seed, vectors=False, advance=advance)
    analyze = getattr(kb.catalog, "analyze_keyword_index", None)
    if analyze is not None:
        analyze()
    elapsed = time.perf_counter() - started
    record: dict[str, Any] = {
        "size": size,
        "seed": seed,
        "chunks_written": written,
        "build_s": round(elapsed, 1),
        "chunks_per_s": round(written / max(elapsed, 1e-9), 1),
        "keyword_backend": str(getattr(kb.settings, "pg_keyword_backend", "unknown")),
    }
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM scale_built"))
        connection.execute(text("INSERT INTO scale_built (record) VALUES (:r)"), {"r": json.dumps(record)})
    return record


def fresh_dir(data_dir: Path) -> None:
    """Remove the leftovers of an interrupted build (no marker) so it restarts from nothing."""
    if data_dir.exists() and built_marker(data_dir) is None:
        shutil.rmtree(data_dir)


# --- the Chroma server --------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def chroma_server(path: Path, log: Path) -> Iterator[int]:
    """`chroma run --path PATH` on a free loopback port for the duration of the block; yields the port."""
    port = _free_port()
    command = [str(Path(sys.executable).with_name("chroma")), "run", "--path", str(path)]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("ab") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chroma run did not start on {path}; see {log}") from None
                time.sleep(0.5)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def release_embedded_chroma(settings: Settings) -> None:
    """Forget this process's embedded Chroma client of `settings` (before a server opens the same folder)."""
    import chromadb.api.shared_system_client as shared

    vector_store._clients.pop(str(settings.chroma_dir.resolve()), None)  # noqa: SLF001
    shared.SharedSystemClient.clear_system_cache()


# --- measuring --------------------------------------------------------------------------------------
def embed_queries(
    texts: Sequence[str], embed: Callable[[str], list[float]]
) -> tuple[list[tuple[str, list[float]]], list[float]]:
    """(query, vector) pairs and the per-query embedding times (ms): reported apart from the search."""
    pairs, times = [], []
    for text in texts:
        started = time.perf_counter()
        vector = embed(text)
        times.append((time.perf_counter() - started) * 1000)
        pairs.append((text, vector))
    return pairs, times


def measure_modes(
    kb: KnowledgeBase, queries: Sequence[tuple[str, Sequence[float]]], modes: Sequence[SearchMode] = MODES
) -> dict[str, Any]:
    """Summaries per mode for SCALE_TENANT, plus the first search's time (cold: index loading)."""
    searcher = Searcher(kb)
    first_text, first_vector = queries[0]
    started = time.perf_counter()
    searcher.search(first_text, k=LATENCY_K, mode="hybrid", tenant=SCALE_TENANT, query_vector=first_vector)
    report: dict[str, Any] = {"first_search_ms": round((time.perf_counter() - started) * 1000, 1)}
    load_before = os.getloadavg()[0]
    for mode in modes:
        report[mode] = time_searches(searcher, queries, mode, tenant=SCALE_TENANT).summary()
    # The machine is shared: the 1-minute load average says how many processes competed for its 2 cores.
    report["load_average_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return report


def server_settings(
    settings: Settings, root: Path, size: int, port: int, database_url: str | None
) -> Settings:
    """`settings` for the server set-up of one size: the Chroma server on `port` and, when given, the
    database holding the catalog and keyword index (without one, the embedded catalog is read)."""
    update: dict[str, Any] = {
        "data_dir": store_dir(root, size),
        "chroma_host": "127.0.0.1",
        "chroma_port": port,
    }
    if database_url:
        update["database_url"] = database_url
    return settings.model_copy(update=update)


def size_database(url: str, size: int) -> str:
    """The database of one size's server set-up on the server of `url` (`scale_<size>`), created when
    missing: each size keeps its own catalog and keyword index, built once like the embedded stores."""
    import psycopg

    from persistence.database import libpq_url

    name = f"scale_{size}"
    with psycopg.connect(libpq_url(url), autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def run_scale_eval(
    settings: Settings,
    *,
    root: Path,
    sizes: Sequence[int] = DEFAULT_SIZES,
    setups: Sequence[str] = ("embedded", "server"),
    queries: int = 100,
    seed: int = 0,
    database_url: str | None = None,
    scifact_dir: Path,
    embed: Callable[[list[str]], list[list[float]]],
    embed_query: Callable[[str], list[float]],
    base_model: Any = None,
    build_only: bool = False,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """Build (once) and measure every size in every set-up; the report is what scale.json holds.
    `build_only` builds the stores and measures nothing (a large store can be built apart, then measured)."""
    root.mkdir(parents=True, exist_ok=True)
    base = scale_corpus.load_base(
        scifact_dir, root / "scifact-minilm.npy", embed, limit=scale_corpus.BASE_PASSAGES
    )
    texts = scale_corpus.read_scifact_queries(scifact_dir, queries, seed)
    pairs, embed_times = embed_queries(texts, embed_query)
    report: dict[str, Any] = {
        "machine": machine_description(),
        "queries": len(pairs),
        "k": LATENCY_K,
        "candidate_k": settings.candidate_k,
        "embed_query_ms": {
            "p50": round(linear_percentile(embed_times, 50), 2),
            "p95": round(linear_percentile(embed_times, 95), 2),
        },
        "corpus": corpus_description(base, seed),
        "sizes": {},
    }
    for size in sizes:
        entry: dict[str, Any] = {}
        report["sizes"][str(size)] = entry
        embedded = store_settings(settings, root, size)
        fresh_dir(embedded.data_dir)
        kb = KnowledgeBase(embedded, base_model=base_model, model_key=MiniLMEmbeddings.model_key)
        try:
            entry["build"] = build_store(kb, base, size, seed=seed, progress=progress)
            if "embedded" in setups and not build_only:
                entry["embedded"] = measure_modes(kb, pairs)
        finally:
            kb.close()
            release_embedded_chroma(embedded)
        if "server" in setups and not (build_only and not database_url):
            with chroma_server(embedded.chroma_dir, root / f"chroma-{size}.log") as port:
                database = size_database(database_url, size) if database_url else None
                served = server_settings(settings, root, size, port, database)
                kb = KnowledgeBase(served, base_model=base_model, model_key=MiniLMEmbeddings.model_key)
                try:
                    if database:
                        entry["server_build"] = build_database(kb, base, size, seed=seed, progress=progress)
                    if build_only:
                        continue
                    entry["server"] = measure_modes(kb, pairs)
                    entry["server"]["keyword_store"] = (
                        f"postgresql ({entry['server_build']['keyword_backend']})"
                        if database
                        else "sqlite-fts5 (embedded catalog)"
                    )
                finally:
                    kb.close()
    return report


def corpus_description(base: scale_corpus.BasePassages, seed: int) -> dict[str, Any]:
    """How the corpus was made (for the results file): the generator's constants and the base passages."""
    return {
        "text": f"{scale_corpus.PRIMARY_SENTENCES} consecutive sentences of a primary SciFact passage + "
        f"{scale_corpus.SECONDARY_SENTENCES} of a secondary one; title of the primary",
        "vector": "normalise(w*v(primary) + (1-w)*v(secondary) + noise), "
        f"w~U{scale_corpus.MIX_WEIGHT_RANGE}, |noise|={scale_corpus.NOISE_NORM}; v = MiniLM of the passage",
        "base_passages": len(base.ids),
        "seed": seed,
        "tenants": {
            SCALE_TENANT: "size",
            OTHER_TENANT: f"{OTHER_TENANT_SHARE:.0%} of size (min {CHUNKS_PER_SOURCE})",
        },
    }
