"""Read files of every supported format into `LoadedDocument`s: `load_file` / `load_bytes` and the
helpers ingestion and the API use, re-exported from the package's modules.

Ingestion must survive whatever a user points it at: one corrupt PDF or a stray binary in a folder should
fail alone, with a short reason a person can act on, and never abort the batch. So every format reader
raises only `LoaderError`, whose message is that reason; the raw exceptions of pypdf, python-docx and json
are wrapped. Each format keeps the structure the chunker and citations need (PDF page numbers,
markdown/HTML/DOCX headings as sections and chapters, JSON record ids and metadata).

The package, one concern a module:
- `discovery`: finding files and reading their bytes safely (symlinks, special files, size caps, gzip and
  zip bombs);
- `decoding`: bytes to text; `sections`: the sections and documents every format builds;
- `guard`: LoaderError, StopRequested and the LoadGuard (depth cap, time budget, stop hook) of each parse;
- one module per format (`text`, `markdown`, `html`, `pdf`, `docx`, `records` for JSON/JSONL), each
  registered by suffix in `registry`: a format is added by one module plus its registry entries.
"""

from __future__ import annotations

from pathlib import Path

from core.types import LoadedDocument
from retrieval.loaders.discovery import (
    ZipLimits,
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
    "ZipLimits",
    "discover_files",
    "ensure_regular",
    "ensure_supported",
    "load_bytes",
    "load_file",
    "read_regular_file",
    "safe_resolve",
]


def load_file(
    path: Path, max_bytes: int, zip_limits: ZipLimits | None = None, guard: LoadGuard | None = None
) -> list[LoadedDocument]:
    """Read `path` into documents (one per file, or one per record for JSON/JSONL).

    Raises LoaderError for any file that cannot be loaded: not a regular file, too large, unsupported,
    unreadable, corrupt, a zip bomb, binary, undecodable, without text, nested too deeply or over its time
    budget; and StopRequested, only, when `guard.should_stop()` asked to stop. `guard` defaults to the
    default limits, with its clock started here.
    """
    ensure_supported(path)
    guard = guard or LoadGuard()
    return load_bytes(path, read_regular_file(path, max_bytes), max_bytes, zip_limits, guard)


def load_bytes(
    path: Path,
    data: bytes,
    max_bytes: int,
    zip_limits: ZipLimits | None = None,
    guard: LoadGuard | None = None,
) -> list[LoadedDocument]:
    """Documents from the bytes of `path` already read (ingestion hashes and parses one read).

    The parse runs under `guard` (default limits if None); its budget is checked once more at the end, so
    a file whose parse outran it in a step that cannot be interrupted fails too.
    """
    loader = loader_for(path)
    guard = guard or LoadGuard()
    if suffix_of(path) in GZIP_SUFFIXES:
        data = gunzip(data, max_bytes)
    if not data.strip():
        raise LoaderError("empty document: no text")
    if suffix_of(path) in ZIP_SUFFIXES:
        data = inflate_zip(data, zip_limits or ZipLimits(), suffix_of(path).lstrip(".").upper())
    guard.check()
    documents = loader(path, data, guard)
    guard.check()
    return documents


def ensure_supported(path: Path) -> None:
    """LoaderError when no loader reads `path`'s suffix: reported without reading the file."""
    loader_for(path)
