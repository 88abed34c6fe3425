"""Errors of the stores, in a module without heavy imports: StoreUnavailableError (CLI exit 1, HTTP 503)
and StoreDamagedError, whose message names the file and how to rebuild it.
"""

from __future__ import annotations

from pathlib import Path


class StoreUnavailableError(RuntimeError):
    """The vector store, or another store, cannot be reached or opened; nothing was changed."""


class StoreDamagedError(StoreUnavailableError):
    """A store's file is damaged (not a database, malformed); the message names it and how to rebuild it."""


class CatalogDamagedError(StoreDamagedError):
    """The catalog file is not a (healthy) SQLite database; the message says how to rebuild it."""


def damaged_catalog_message(path: Path, reason: str) -> str:
    """One line naming the damaged catalog and how to rebuild it (the documents on disk are the source)."""
    return (
        f"the catalog {path} is damaged ({reason}); move it aside and rebuild it by ingesting your documents "
        "again (`rag ingest PATH...`); `rag doctor` checks every store"
    )


class CatalogUnavailableError(StoreUnavailableError):
    """The catalog's database server cannot be reached (down, refused, wrong credentials): exit 1 / 503."""


def unavailable_catalog_message(shown: str, reason: str) -> str:
    """One line naming the unreachable catalog database and what to check."""
    return (
        f"cannot reach the catalog database {shown} ({reason}); is the server running? "
        "`rag doctor` checks every store"
    )


class KeywordIndexDamagedError(StoreDamagedError):
    """The FTS5 keyword index inside the catalog is damaged; the chunks are not, so it can be rebuilt."""


def damaged_keyword_index_message(path: Path, reason: str) -> str:
    """One line naming the damaged keyword index and its repair (`rag doctor --repair` rebuilds it)."""
    return (
        f"the keyword index in {path} is damaged ({reason}); `rag doctor --repair` rebuilds it from the "
        "catalog's chunks"
    )


#: What a client reads when a store cannot be used (an HTTP 503's message, a graph's "cannot search" answer):
#: one message of ours. The store's own text (file paths, SQL, Chroma's internal errors) goes to the server's
#: log only: it tells a client nothing it can act on, and reveals how the server is laid out.
STORE_DOWN_MESSAGE = "the document store is unavailable right now; please try again later"
