"""`python -m benchmarks scale`: retrieval latency (dense, keyword, hybrid; p50/p95) at 5k, 50k and 500k
chunks.

Stores are built through the product's own classes (chunk metadata by `build_chunks`, vectors by
`VectorStore.upsert`, catalog and keyword index by `Catalog.replace_document`), and searches go through
`Searcher.search` with a tenant, so the timed path is the product's path: Chroma nearest neighbours plus the
catalog's confirmation of every hit, the keyword index, and fusion. Only the embedding of chunks is replaced
by the synthetic vectors of benchmarks.scale_corpus (encoding 500k chunks would take hours on 2 cores); query
vectors are real MiniLM vectors, computed before the timing and reported apart (`embed_ms`).

Each store is built once under `<root>/<setup>-<size>/` and reused (a `scale-built.json` marker is written
last, so an interrupted build is redone, never measured). The server set-up serves the SAME Chroma folder with
`chroma run --path` and reads the keyword index from the database named by `--database-url`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from benchmarks import scale_corpus
from benchmarks.scale_stores import (
    CHUNKS_PER_SOURCE,
    OTHER_TENANT,
    OTHER_TENANT_SHARE,
    SCALE_TENANT,
    build_database,
    build_store,
    chroma_server,
    fresh_dir,
    release_embedded_chroma,
    store_dir,
    store_settings,
)
from config.settings import SearchMode, Settings
from evals.environment import machine_description
from evals.eval_index import ProgressFactory, no_progress
from evals.metrics import linear_percentile
from retrieval.embeddings import MiniLMEmbeddings
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from retrieval.search_depth import CANDIDATE_K

DEFAULT_SIZES = (5_000, 50_000, 500_000)
MODES: tuple[SearchMode, ...] = ("dense", "bm25", "hybrid")
#: k of the timed search (as `rag eval retrieval`'s latency figures).
LATENCY_K = 10
#: Untimed searches per mode before timing (first-touch costs: index files into the page cache).
WARMUP_QUERIES = 5


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
    from psycopg import sql

    from persistence.database import libpq_url

    name = f"scale_{size}"
    with psycopg.connect(libpq_url(url), autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
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
        "candidate_k": CANDIDATE_K,
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
