"""Which loader reads which file: one entry per suffix (Haystack's converters are the model).

A format is one module exposing a `Loader` (`(path, bytes, guard) -> documents`, raising only LoaderError
or StopRequested) plus its entries here; discovery, the API's upload check and `load_bytes` all read this
table, so a suffix added here is found, accepted and parsed everywhere at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.types import LoadedDocument
from retrieval.loaders.docx import load_docx
from retrieval.loaders.guard import LoaderError, LoadGuard
from retrieval.loaders.html import load_html
from retrieval.loaders.markdown import load_markdown
from retrieval.loaders.pdf import load_pdf
from retrieval.loaders.records import load_json, load_jsonl
from retrieval.loaders.text import load_txt

#: A format's reader: the file's path (for its title and id), its bytes, and the guard its parse runs under.
Loader = Callable[[Path, bytes, LoadGuard], list[LoadedDocument]]

#: Suffix (lower case; compound for gzip record files) -> the loader that reads it.
LOADERS: dict[str, Loader] = {
    ".md": load_markdown,
    ".markdown": load_markdown,
    ".txt": load_txt,
    ".html": load_html,
    ".htm": load_html,
    ".pdf": load_pdf,
    ".docx": load_docx,
    ".json": load_json,
    ".jsonl": load_jsonl,
    ".json.gz": load_json,
    ".jsonl.gz": load_jsonl,
}

#: Suffixes of gzip-compressed record files; the inner suffix picks the record format.
GZIP_SUFFIXES = frozenset({".json.gz", ".jsonl.gz"})
#: Zip-based formats: their directory is checked against ZipLimits before any parser inflates them.
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
    loader = LOADERS.get(suffix)
    if loader is None:
        raise LoaderError(f"unsupported file type: {suffix or '(no suffix)'}")
    return loader
