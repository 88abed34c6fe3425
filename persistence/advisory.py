"""A PostgreSQL session advisory lock taken by polling, for one-time set-ups several processes may start at
once. Why not `pg_advisory_lock`: a blocking wait keeps its transaction open, and a set-up running `CREATE
INDEX CONCURRENTLY` (LangGraph's PostgresStore) then waits for its waiters, an undetected deadlock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Seconds between two tries, and how long a set-up waits for another process's at most.
ADVISORY_POLL_S = 0.1
ADVISORY_WAIT_S = 300.0


class AdvisoryLockTimeout(TimeoutError):
    """Another process held the set-up lock for longer than ADVISORY_WAIT_S."""


def _took(row: Any) -> bool:
    """The lock's answer, from a tuple row or a dict row (the store's pool returns dicts)."""
    return bool(row["took"] if isinstance(row, dict) else row[0])


@contextmanager
def advisory_lock(connection: Any, key: int, wait_s: float = ADVISORY_WAIT_S) -> Iterator[None]:
    """Hold the session advisory lock `key` on `connection` (autocommit) for the block."""
    deadline = time.monotonic() + wait_s
    while not _took(connection.execute("SELECT pg_try_advisory_lock(%s) AS took", (key,)).fetchone()):
        if time.monotonic() > deadline:
            raise AdvisoryLockTimeout(f"another process held set-up lock {key} for over {wait_s:g} s")
        time.sleep(ADVISORY_POLL_S)
    try:
        yield
    finally:
        connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
