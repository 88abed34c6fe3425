"""Read files of every supported format into `LoadedDocument`s, keeping the structure chunking and citations
need (PDF pages, headings as sections, JSON record ids and metadata). Every reader raises only
`LoaderError` with a short reason, so one bad file fails alone. One concern a module: `discovery` (safe
reading), `decoding`, `sections`, `guard` (depth cap, time budget, stop hook) and one module per format,
registered by suffix in `registry`.
"""

from __future__ import annotations

from pathlib import Path

from core.types import LoadedDocument
from retrieval.loaders.discovery import (
    discover_files,
    ensure_regular,
    gunzip,
    inflate_zip,
    read_regular_file,
    safe_resolve,
)
from retrieval.loaders.guard import LoaderError, LoadGuard, StopRequested
from retrieval.loaders.registry import GZIP_SUFFIXES, SUPPORTED_SUFFIXES, ZIP_SUFFIXES, loader_for, suffix_of

__all__ = [
    "SUPPORTED_SUFFIXES",
    "LoadGuard",
    "LoaderError",
    "StopRequested",
    "discover_files",
    "ensure_regular",
    "ensure_supported",
    "load_bytes",
    "load_file",
    "read_regular_file",
    "safe_resolve",
]


def load_file(path: Path, max_bytes: int, guard: LoadGuard | None = None) -> list[LoadedDocument]:
    """Read `path` into documents (one per file, or one per record for JSON/JSONL); LoaderError with the
    reason for any file that cannot be loaded, StopRequested only when `guard.should_stop()` asked to stop."""
    ensure_supported(path)
    guard = guard or LoadGuard()
    return load_bytes(path, read_regular_file(path, max_bytes), max_bytes, guard)


def load_bytes(
    path: Path, data: bytes, max_bytes: int, guard: LoadGuard | None = None
) -> list[LoadedDocument]:
    """Documents from the bytes of `path` already read, parsed under `guard` (default limits), whose budget is
    checked once more at the end (a step that cannot be interrupted may outrun it)."""
    loader = loader_for(path)
    guard = guard or LoadGuard()
    if suffix_of(path) in GZIP_SUFFIXES:
        data = gunzip(data, max_bytes)
    if not data.strip():
        raise LoaderError("empty document: no text")
    if suffix_of(path) in ZIP_SUFFIXES:
        data = inflate_zip(data, suffix_of(path).lstrip(".").upper())
    guard.check()
    documents = loader(path, data, guard)
    guard.check()
    return documents


def ensure_supported(path: Path) -> None:
    """LoaderError when no loader reads `path`'s suffix: reported without reading the file."""
    loader_for(path)
