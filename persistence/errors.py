"""Errors of the stores, in a module without heavy imports (chromadb takes seconds to import).

`StoreUnavailableError` means a store cannot be used right now (CLI exit 1, HTTP 503); `StoreDamagedError`
is the case where the store's file itself is damaged, and its message names the file and how to rebuild it.
"""

from __future__ import annotations


class StoreUnavailableError(RuntimeError):
    """The vector store, or another store, cannot be reached or opened; nothing was changed."""


class StoreDamagedError(StoreUnavailableError):
    """A store's file is damaged (not a database, malformed); the message names it and how to rebuild it."""
