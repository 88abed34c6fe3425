"""SQLite as the engine's stores use it: connection settings (WAL, busy timeout, foreign keys), the bound
on variables per statement, and telling a damaged file from a busy one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.exc import DBAPIError

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_MAX_VARIABLES = 900
#: SQLite result codes that mean the file itself is damaged (SQLITE_CORRUPT, SQLITE_NOTADB).
SQLITE_DAMAGE_CODES = frozenset({11, 26})
#: SQLite's extended code for a damaged virtual table: here the FTS5 keyword index, rebuilt from the chunks.
SQLITE_CORRUPT_VTAB = 267


def configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    """Connection settings of every SQLite engine of the engine (catalog, app tables): WAL for concurrent
    readers, a busy timeout so writers of several processes wait instead of failing."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def is_damage(error: BaseException) -> bool:
    """Whether a SQLite error means a damaged file rather than a busy or misused database."""
    original = error.orig if isinstance(error, DBAPIError) else error
    if not isinstance(original, sqlite3.DatabaseError):
        return False
    code = getattr(original, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in SQLITE_DAMAGE_CODES
    message = str(original).lower()
    return "not a database" in message or "malformed" in message


def batches(items: Sequence[Any], size: int = SQLITE_MAX_VARIABLES) -> Iterable[Sequence[Any]]:
    """`items` in slices of at most `size` (SQLite's bound on the variables of one statement)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
