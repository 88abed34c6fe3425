"""The stores of `python -m benchmarks scale`: synthetic chunks of two tenants written through the product's
own classes into an embedded store (Chroma folder and SQLite catalog) or a server set-up's database, built
once per size under `<root>/<setup>-<size>/` (a marker written last, so an interrupted build is redone), and
the
`chroma run` server over the same folder. benchmarks/scale.py times the searches on them.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import scale_corpus
from config.settings import Settings
from core.types import LoadedDocument, Section
from evals.environment import machine_description
from evals.eval_index import ProgressFactory, no_progress
from persistence import vector_store
from retrieval.chunk_records import build_chunks
from retrieval.embeddings import content_hash
from retrieval.knowledge_base import KnowledgeBase

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
SERVER_START_TIMEOUT_S = 120.0


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
