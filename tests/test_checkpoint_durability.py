"""The checkpoint file's commits skip the fsync (persistence.checkpointer.SQLITE_SYNCHRONOUS) yet a saved
turn survives a process killed right after the save (kill -9): what the trust guarantee asks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from persistence.checkpointer import sqlite_checkpointer
from tests.conftest import REPO_ROOT

#: Saves one checkpoint of thread "t1" into the file argv[1], says so, then waits to be killed.
SAVE_THEN_WAIT = textwrap.dedent(
    """
    import sys, time
    from langgraph.checkpoint.base import empty_checkpoint
    from persistence.checkpointer import sqlite_checkpointer

    saver = sqlite_checkpointer(path=__import__("pathlib").Path(sys.argv[1]), keep=1)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"answer": "kept"}
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    saver.put(config, checkpoint, {"source": "loop", "step": 1}, {})
    print("saved", flush=True)
    time.sleep(600)
    """
)


def test_the_checkpointer_skips_the_fsync_in_wal_mode(tmp_path: Path) -> None:
    saver = sqlite_checkpointer(path=tmp_path / "checkpoints.sqlite", keep=1)
    assert saver.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert saver.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL (FULL is 2)


def test_a_saved_checkpoint_survives_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    process = subprocess.Popen(
        [sys.executable, "-c", SAVE_THEN_WAIT, str(path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "saved"
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
    finally:
        process.kill()
    saved = sqlite_checkpointer(path=path, keep=1).get_tuple({"configurable": {"thread_id": "t1"}})
    assert saved is not None and saved.checkpoint["channel_values"] == {"answer": "kept"}
