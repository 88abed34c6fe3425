"""Thread (conversation) housekeeping on the SQLite checkpoint file: list, show, delete, prune.

Every graph step writes a checkpoint, so a long-lived file grows without bound; `prune` keeps the newest
threads and, within the kept threads, only their latest checkpoint, then reclaims the space.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ThreadSummary:
    """One conversation in the checkpoint file."""

    thread_id: str
    checkpoints: int
    latest_checkpoint_id: str


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint file at {path} (no conversation yet)")
    return sqlite3.connect(str(path))


def list_threads(path: Path) -> list[ThreadSummary]:
    """Threads, most recently active first (checkpoint ids are time-ordered)."""
    with _connect(path) as connection:
        rows = connection.execute(
            "SELECT thread_id, COUNT(*), MAX(checkpoint_id) FROM checkpoints "
            "GROUP BY thread_id ORDER BY MAX(checkpoint_id) DESC"
        ).fetchall()
    return [ThreadSummary(str(thread), int(count), str(latest)) for thread, count, latest in rows]


def delete_thread(path: Path, thread_id: str) -> bool:
    """Remove a thread's checkpoints and writes; False when it did not exist."""
    with _connect(path) as connection:
        found = connection.execute(
            "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1", (thread_id,)
        ).fetchone()
        connection.execute("DELETE FROM checkpoints WHERE thread_id = ?", (thread_id,))
        connection.execute("DELETE FROM writes WHERE thread_id = ?", (thread_id,))
    return found is not None


def prune_threads(path: Path, keep: int) -> dict[str, int]:
    """Keep the `keep` newest threads (each with only its latest checkpoint); return what was removed."""
    if keep < 0:
        raise ValueError(f"--keep must be >= 0, got {keep}")
    threads = list_threads(path)
    removed_threads = 0
    for summary in threads[keep:]:
        removed_threads += int(delete_thread(path, summary.thread_id))
    removed_checkpoints = 0
    with _connect(path) as connection:
        for summary in threads[:keep]:
            cursor = connection.execute(
                "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id != ?",
                (summary.thread_id, summary.latest_checkpoint_id),
            )
            removed_checkpoints += cursor.rowcount
            connection.execute(
                "DELETE FROM writes WHERE thread_id = ? AND checkpoint_id != ?",
                (summary.thread_id, summary.latest_checkpoint_id),
            )
    with sqlite3.connect(str(path)) as connection:
        connection.execute("VACUUM")
    return {"threads_removed": removed_threads, "checkpoints_removed": removed_checkpoints}
