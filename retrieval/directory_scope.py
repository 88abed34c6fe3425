"""Directory scope: search only the documents whose source path lies under a directory (the notes assistant's
"search this folder"), for every entry point (`--dir`, the API's `directory`, the context's `directory`).

The directory is a scope, not a filter operator: no store matches a path prefix the same way, so the
searcher turns it into the tenant's sources under it (Catalog.sources_under) and searches `source $in
[...]`. Matching is by whole path components (`/a/b` holds `/a/b/c.md`, never `/a/bc.md`); sources that are
not paths are under no directory. A directory is an absolute POSIX path; `..` is refused, `.`, repeated and
trailing slashes are dropped.
"""

from __future__ import annotations

from pathlib import Path

from core.text import invalid_utf8

#: Longest directory accepted (a Linux path is at most 4096 bytes).
MAX_DIRECTORY_CHARS = 4096


class DirectoryError(ValueError):
    """A directory scope that cannot be used; the message says why."""


def normalize_directory(raw: str) -> str:
    """`raw` as a normalised absolute directory ('' for no scope); DirectoryError when it is relative,
    holds `..`, control characters or invalid UTF-8, or is too long."""
    if not raw:
        return ""
    if len(raw) > MAX_DIRECTORY_CHARS:
        raise DirectoryError(f"directory too long: {len(raw)} characters > {MAX_DIRECTORY_CHARS}")
    problem = invalid_utf8(raw)
    if problem:
        raise DirectoryError(f"directory is not valid UTF-8 text: {problem}")
    if any(ord(char) < 32 or ord(char) == 127 for char in raw):
        raise DirectoryError("directory holds a control character")
    if not raw.startswith("/"):
        raise DirectoryError(f"directory {raw!r} is not an absolute path (sources are stored absolute)")
    if ".." in raw.split("/"):
        raise DirectoryError(f"directory {raw!r} holds '..': name the directory itself")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    return "/" + "/".join(parts)


def cli_directory(raw: str) -> str:
    """A `--dir` option as the engine matches it: a relative path resolved against the working directory
    (as `rag ingest` stores paths), then normalised."""
    if not raw:
        return ""
    path = raw if raw.startswith("/") else str(Path(raw).resolve())
    return normalize_directory(path)


def is_under(source: str, directory: str) -> bool:
    """Whether `source` is `directory` or lies under it, by whole path components (`directory` is
    normalised; '' = no scope, everything is under it)."""
    if not directory:
        return True
    if directory == "/":
        return source.startswith("/")
    return source == directory or source.startswith(directory + "/")


def directory_prefix(directory: str) -> str:
    """What a source under `directory` (normalised, not '') starts with: the directory and a slash."""
    return directory if directory.endswith("/") else directory + "/"
