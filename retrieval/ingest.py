"""Ingestion: files -> documents -> chunks -> vectors -> stores, incrementally and without losing anything.

Order of writes, per file, and why:
1. hash the file (bytes + index signature); unchanged -> skipped, nothing is read or embedded;
2. load and chunk; a bad file fails here with its reason and touches no store;
3. embed (through the content-hash cache, so unchanged chunks of a changed file cost nothing);
4. upsert the new chunks into Chroma (idempotent ids);
5. in one SQLite transaction, replace the document's catalog rows and keyword-index rows;
6. delete from Chroma the old chunks the new version no longer has.
A crash between 4 and 5 leaves the old version searchable and the file still "changed", so the next run
redoes it; a crash between 5 and 6 leaves stray vectors that search ignores (it trusts only catalog rows).
So a caller's `should_stop` may stop the run anywhere before 5: nothing of the file in progress is published.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from core.metadata import MAX_METADATA_KEY_CHARS, MAX_METADATA_KEYS, MAX_METADATA_STRING_CHARS
from core.types import LoadedDocument
from persistence.vector_store import DEFAULT_COLLECTION, validate_collection_name
from retrieval.chunk_records import source_hash
from retrieval.indexing import ProgressCallback, StopCallback, index_documents, noop_progress
from retrieval.ingest_lock import one_ingest_per_collection
from retrieval.knowledge_base import KnowledgeBase
from retrieval.loaders import (
    LoaderError,
    LoadGuard,
    StopRequested,
    discover_files,
    ensure_regular,
    ensure_supported,
    load_bytes,
    read_regular_file,
    safe_resolve,
)
from retrieval.store_health import repair_vectors, vector_drift

logger = logging.getLogger(__name__)

FileStatus = Literal["indexed", "skipped", "failed", "pruned"]


@dataclass
class FileResult:
    """What happened to one source."""

    source: str
    status: FileStatus
    chunks: int = 0
    reason: str | None = None
    #: Something indexed with a loss the user should know of (record metadata fields over the bounds).
    warning: str | None = None


@dataclass
class IngestSummary:
    """Totals of one ingestion run."""

    results: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    #: Vectors rebuilt from the catalog because the vector store had lost them (see retrieval.store_health).
    vectors_restored: int = 0
    #: The caller's should_stop() ended the run early: `results` hold only the files finished before it.
    stopped: bool = False

    def count(self, status: FileStatus) -> int:
        """Number of sources with this status."""
        return sum(1 for result in self.results if result.status == status)

    @property
    def chunks(self) -> int:
        """Chunks written in this run."""
        return sum(result.chunks for result in self.results if result.status == "indexed")

    @property
    def chunks_per_second(self) -> float:
        """Ingest throughput of this run."""
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        """JSON-ready summary."""
        return {
            "files": len([r for r in self.results if r.status != "pruned"]),
            "indexed": self.count("indexed"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "pruned": self.count("pruned"),
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "chunks_per_s": round(self.chunks_per_second, 2),
            "vectors_restored": self.vectors_restored,
            "stopped": self.stopped,
            "failures": [
                {"source": r.source, "reason": r.reason} for r in self.results if r.status == "failed"
            ],
            "warnings": [{"source": r.source, "warning": r.warning} for r in self.results if r.warning],
        }


def _under(source: str, roots: Iterable[Path]) -> bool:
    path = Path(source)
    return any(path == root or root in path.parents for root in roots)


@one_ingest_per_collection  # a second ingest of the same scope waits, then skips what is unchanged
def ingest_paths(
    kb: KnowledgeBase,
    paths: Sequence[Path],
    *,
    collection: str | None = None,
    tenant: str | None = None,
    prune: bool = False,
    progress: ProgressCallback = noop_progress,
    on_files: Callable[[list[Path]], None] | None = None,
    should_stop: StopCallback | None = None,
) -> IngestSummary:
    """Ingest files and folders into one collection of one tenant, after restoring the vectors the store
    lost of this tenant. Each file is parsed under a LoadGuard (nesting and time caps) and fails alone.

    `should_stop` (cheap, thread-safe) is asked between files, inside parses and before each embedding
    batch; once True, the file in progress is abandoned, nothing is pruned, and the summary has
    `stopped=True` with the files finished before.
    """
    started = time.perf_counter()
    collection = validate_collection_name(collection or DEFAULT_COLLECTION)
    tenant = validate_collection_name(tenant or kb.settings.default_tenant, "tenant")
    files = [safe_resolve(path) for path in discover_files(paths)]
    if on_files:
        on_files(files)
    signature = kb.index_signature()
    summary = IngestSummary()
    summary.vectors_restored = restore_lost_vectors(kb, tenant)
    for path in files:
        if should_stop is not None and should_stop():
            summary.stopped = True
            break
        try:
            result = _ingest_file(
                kb,
                path,
                signature,
                tenant=tenant,
                collection=collection,
                progress=progress,
                should_stop=should_stop,
            )
        except StopRequested:
            summary.stopped = True
            logger.info("ingestion stopped by the caller at %s", path)
            break
        summary.results.append(result)
        progress("file", 1)
    if prune and not summary.stopped:
        summary.results.extend(_prune(kb, paths, files, tenant=tenant, collection=collection))
    summary.seconds = time.perf_counter() - started
    return summary


def _prune(
    kb: KnowledgeBase, paths: Sequence[Path], files: list[Path], *, tenant: str, collection: str
) -> list[FileResult]:
    """Remove the indexed documents under `paths` whose file is no longer among `files`; one result each."""
    pruned: list[FileResult] = []
    present = {str(path) for path in files}
    roots = [Path(p).resolve() for p in paths]
    for record in kb.catalog.documents(tenant, collection):
        if record.source not in present and _under(record.source, roots):
            removed = kb.catalog.delete_document(record)
            kb.vectors.delete(tenant, collection, removed)
            pruned.append(FileResult(record.source, "pruned", len(removed)))
    return pruned


def restore_lost_vectors(kb: KnowledgeBase, tenant: str) -> int:
    """Rebuild from the catalog the vectors of `tenant` the vector store lost; how many. Ingestion is where
    a user expects the index made whole; another tenant's collections are never touched."""
    lost = [scope for scope in vector_drift(kb, tenant) if scope.missing]
    return repair_vectors(kb, lost).restored if lost else 0


def _ingest_file(
    kb: KnowledgeBase,
    path: Path,
    signature: str,
    *,
    tenant: str,
    collection: str,
    progress: ProgressCallback,
    should_stop: StopCallback | None = None,
) -> FileResult:
    """Index one file; its failure is returned as a result (StopRequested, only, propagates)."""
    source = str(path)
    settings = kb.settings
    try:
        # One bounded read of a regular file serves both the hash and the parse (see loaders).
        ensure_regular(path)
        ensure_supported(path)
        data = read_regular_file(path, settings.max_file_bytes)
        digest = source_hash(data, signature)
        known = kb.catalog.document(tenant, collection, source)
        if known is not None and known.file_hash == digest:
            kb.catalog.verify_chunks(known)  # a damaged catalog must not read as "skipped" (exit 0)
            return FileResult(source, "skipped", known.n_chunks)
        guard = LoadGuard.from_settings(settings, should_stop)  # the time budget starts here
        documents = load_bytes(path, data, settings.max_file_bytes, guard)
        del data
        count = index_documents(
            kb,
            documents,
            source=source,
            source_hash=digest,
            tenant=tenant,
            collection=collection,
            progress=progress,
            should_stop=should_stop,
        )
        return FileResult(source, "indexed", count, warning=_metadata_warning(source, documents))
    except LoaderError as error:
        logger.info("skipping %s: %s", source, error)
        return FileResult(source, "failed", reason=str(error))
    except OSError as error:
        return FileResult(source, "failed", reason=f"cannot read file: {error.strerror or error}")


def _metadata_warning(source: str, documents: Sequence[LoadedDocument]) -> str | None:
    """One line (also logged) for a file whose records had metadata fields over core.metadata's bounds."""
    left_out = sum(document.metadata_left_out for document in documents)
    if not left_out:
        return None
    records = sum(1 for document in documents if document.metadata_left_out)
    warning = (
        f"{left_out} metadata field{'s' if left_out != 1 else ''} of {records} "
        f"record{'s' if records != 1 else ''} left out (at most {MAX_METADATA_KEYS} keys of a record's own, "
        f"keys up to {MAX_METADATA_KEY_CHARS} characters, strings up to {MAX_METADATA_STRING_CHARS} "
        "characters, integers in signed 64 bits, finite numbers)"
    )
    logger.warning("%s: %s", source, warning)
    return warning
