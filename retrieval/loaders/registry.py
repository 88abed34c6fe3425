"""Which loader reads which file: one entry per suffix, read by discovery, the API's upload check and
`load_bytes`. Entries name their module, so a format's parser library is imported the first time a file of
that format is read, not by every import that only searches (tests/test_import_cost.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from core.types import LoadedDocument
from retrieval.loaders.guard import LoaderError, LoadGuard

#: A format's reader: the file's path (for its title and id), its bytes, and the guard its parse runs under.
Loader = Callable[[Path, bytes, LoadGuard], list[LoadedDocument]]

#: Suffix (lower case; compound for gzip record files) -> (module under retrieval.loaders, its loader).
LOADERS: dict[str, tuple[str, str]] = {
    ".md": ("markdown", "load_markdown"),
    ".markdown": ("markdown", "load_markdown"),
    ".txt": ("text", "load_txt"),
    ".html": ("html", "load_html"),
    ".htm": ("html", "load_html"),
    ".pdf": ("pdf", "load_pdf"),
    ".docx": ("docx", "load_docx"),
    ".json": ("records", "load_json"),
    ".jsonl": ("records", "load_jsonl"),
    ".json.gz": ("records", "load_json"),
    ".jsonl.gz": ("records", "load_jsonl"),
}

#: Suffixes of gzip-compressed record files; the inner suffix picks the record format.
GZIP_SUFFIXES = frozenset({".json.gz", ".jsonl.gz"})
#: Zip-based formats: their directory is checked against discovery's zip bounds before any parser runs.
ZIP_SUFFIXES = frozenset({".docx"})

#: Every suffix `load_file` understands (lower case; compound suffixes for gzip record files).
SUPPORTED_SUFFIXES = frozenset(LOADERS)


def suffix_of(path: Path) -> str:
    """Lower-case suffix, compound for gzip files (`.jsonl.gz`) so the inner format is known."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if len(suffixes) >= 2 and suffixes[-1] == ".gz":
        return "".join(suffixes[-2:])
    return suffixes[-1] if suffixes else ""


def loader_for(path: Path) -> Loader:
    """The loader of `path`'s suffix; LoaderError naming the suffix when there is none."""
    suffix = suffix_of(path)
    entry = LOADERS.get(suffix)
    if entry is None:
        raise LoaderError(f"unsupported file type: {suffix or '(no suffix)'}")
    module, function = entry
    loader: Loader = getattr(importlib.import_module(f"retrieval.loaders.{module}"), function)
    return loader
