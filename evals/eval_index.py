"""The benchmarks' own indexes: a corpus file ingested by the product (so numbers describe what users get)
into a data directory of its own, apart from the user's documents and keyed by the corpus file and every
setting that changes chunks or vectors, so a rerun reuses the index and a changed input gets a fresh one.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from config.settings import Settings
from evals.datasets import Passage, write_records_jsonl
from retrieval.chunkers import chunker_signature
from retrieval.chunking import MIN_CHUNK_FRACTION
from retrieval.embeddings import DEFAULT_WINDOW_OVERLAP
from retrieval.ingest import IngestSummary, ingest_paths
from retrieval.knowledge_base import KnowledgeBase

#: Folder under the data directory that holds every benchmark's corpora and indexes.
EVAL_DIR_NAME = "eval"
FINGERPRINT_CHARS = 10
INDEX_KEY_CHARS = 12

Advance = Callable[[int], None]
ProgressFactory = Callable[[str, int], Advance]


def no_progress(_label: str, _total: int) -> Advance:
    """A progress factory that shows nothing (library callers without a terminal)."""
    return lambda _n: None


def eval_root(settings: Settings) -> Path:
    """`<data_dir>/eval`: where benchmarks keep corpora and indexes, apart from the user's documents."""
    return settings.data_dir / EVAL_DIR_NAME


def file_fingerprint(path: Path) -> str:
    """A short key for a file's identity (path, size, modification time): cheap even for large corpora."""
    stat = path.stat()
    raw = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    return hashlib.sha1(raw.encode()).hexdigest()[:FINGERPRINT_CHARS]


def index_settings(settings: Settings, name: str, corpus_file: Path) -> Settings:
    """`settings` with the data directory of this corpus's index, `<data_dir>/eval/<name>-<key>`; chunker
    settings and window overlap enter the key only off their defaults, so older indexes keep their folders."""
    overlap = settings.embedding_window_overlap
    key = hashlib.sha1(
        f"{file_fingerprint(corpus_file)}|{settings.chunk_size}|{settings.chunk_overlap}|"
        f"{MIN_CHUNK_FRACTION}|{settings.embedding_provider}|{settings.embedding_model}"
        f"{chunker_signature(settings)}"
        f"{'' if overlap == DEFAULT_WINDOW_OVERLAP else f'|window-overlap={overlap}'}".encode()
    ).hexdigest()[:INDEX_KEY_CHARS]
    return settings.model_copy(update={"data_dir": eval_root(settings) / f"{name}-{key}"})


def write_corpus_once(passages: Iterable[Passage], path: Path) -> Path:
    """Write the corpus file unless it exists (its fingerprint, hence its index, stays stable), through a
    temporary file and a rename so an interrupted write never leaves a half corpus."""
    if path.exists():
        return path
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    write_records_jsonl(passages, partial)
    partial.replace(path)
    return path


def ingest_corpus(
    kb: KnowledgeBase, corpus_file: Path, *, collection: str, progress: ProgressFactory = no_progress
) -> IngestSummary:
    """Ingest `corpus_file` into `collection` (a no-op when indexed unchanged); a failed record raises."""
    advance = progress("ingest (chunks embedded)", 0)
    summary = ingest_paths(
        kb,
        [corpus_file],
        collection=collection,
        progress=lambda event, n: advance(n) if event == "chunks" else None,
    )
    if summary.count("failed"):
        raise RuntimeError(f"corpus failed to ingest: {summary.as_dict()['failures']}")
    return summary
