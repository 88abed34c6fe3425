"""The per-thread turn lock (persistence.thread_lock): exclusive across threads and processes, released when
its holder dies, re-entrant for its holder, and a clear "thread busy" error past its timeout, through the
runner and the CLI (exit 1, one line, nothing written).

No timings are asserted: a waiter's timeout of 0 means "try once", and holders are coordinated with events.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.settings import Settings
from graphs.runner import Session
from persistence.thread_lock import ThreadBusyError, lock_path, remove_lock_file, thread_lock
from persistence.threads import scoped_thread_id
from service.cli import app
from state.context import Context
from tests.conftest import REPO_ROOT

HOLD_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from config.settings import load_settings
from persistence.thread_lock import thread_lock
with thread_lock(load_settings(data_dir=Path(sys.argv[2])), sys.argv[3]):
    print("held", flush=True)
    sys.stdin.readline()
"""


@contextmanager
def held_elsewhere(settings: Settings, thread_id: str) -> Iterator[Callable[[], None]]:
    """Hold the thread's lock in another OS thread of this process until the block ends (or release() is
    called)."""
    acquired, release = threading.Event(), threading.Event()

    def hold() -> None:
        with thread_lock(settings, thread_id):
            acquired.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert acquired.wait(30)
    try:
        yield release.set
    finally:
        release.set()
        holder.join(30)


def try_once(settings: Settings, thread_id: str) -> bool:
    """Whether the lock can be taken right now (then released)."""
    try:
        with thread_lock(settings, thread_id, timeout_s=0):
            return True
    except ThreadBusyError:
        return False


def test_a_held_thread_is_busy_for_another_thread_until_released(settings: Settings) -> None:
    with held_elsewhere(settings, "t1") as release:
        with pytest.raises(ThreadBusyError, match="thread 't1' is busy: another turn is running"):
            with thread_lock(settings, "t1", timeout_s=0):
                pass
        assert try_once(settings, "other thread")  # other threads are not blocked
        release()
    assert try_once(settings, "t1")


def test_a_waiter_gets_the_lock_when_the_holder_releases(settings: Settings) -> None:
    order: list[str] = []
    with held_elsewhere(settings, "t1") as release:
        waiter = threading.Thread(target=lambda: order.append("waiter" if try_wait(settings) else "busy"))
        waiter.start()
        order.append("holder done")
        release()
        waiter.join(60)
    assert order == ["holder done", "waiter"]


def try_wait(settings: Settings) -> bool:
    try:
        with thread_lock(settings, "t1", timeout_s=60):
            return True
    except ThreadBusyError:
        return False


def test_the_lock_is_reentrant_for_its_holder(settings: Settings) -> None:
    with thread_lock(settings, "t1", timeout_s=0), thread_lock(settings, "t1", timeout_s=0):
        pass
    assert try_once(settings, "t1")


def test_another_process_holding_the_lock_makes_the_thread_busy_and_its_death_frees_it(
    settings: Settings, tmp_path: Path
) -> None:
    script = tmp_path / "hold.py"
    script.write_text(HOLD_SCRIPT, encoding="utf-8")
    holder = subprocess.Popen(
        [sys.executable, str(script), str(REPO_ROOT), str(settings.data_dir), "shared"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not try_once(settings, "shared")
        os.kill(holder.pid, signal.SIGKILL)  # a crashed turn must not leave the thread stuck
        holder.wait(30)
        assert try_once(settings, "shared")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)


def test_removing_the_lock_file_under_the_lock_keeps_it_exclusive(settings: Settings) -> None:
    """`threads delete` removes a thread's lock file while holding it; a waiter that had opened the old file
    must not end up holding a lock that a newcomer on the new file can also take."""
    got_it = threading.Event()
    done = threading.Event()
    with held_elsewhere(settings, "t1") as release:

        def waiter() -> None:
            with thread_lock(settings, "t1", timeout_s=60):
                got_it.set()
                done.wait(30)

        thread = threading.Thread(target=waiter)
        thread.start()
        remove_lock_file(settings, "t1")
        release()
        assert got_it.wait(60)
        assert not try_once(settings, "t1")  # the waiter holds it: a newcomer is refused
        done.set()
        thread.join(30)
    assert try_once(settings, "t1")


def test_the_old_files_holder_leaving_first_does_not_leak_the_new_files_lock(settings: Settings) -> None:
    """After `remove_lock_file`, a turn of this process takes the new file's lock while the old file's holder
    is still inside its block (the order the test above leaves to the scheduler, forced here). The old holder
    leaves first: the newer holder's bookkeeping must survive, so its release frees the lock."""
    newer_holds, newer_may_leave = threading.Event(), threading.Event()

    def newer() -> None:
        with thread_lock(settings, "t1", timeout_s=30):
            newer_holds.set()
            newer_may_leave.wait(30)

    thread = threading.Thread(target=newer)
    with held_elsewhere(settings, "t1") as release_older:
        remove_lock_file(settings, "t1")
        thread.start()
        assert newer_holds.wait(30)
        release_older()  # the old file's holder leaves first
    assert not try_once(settings, "t1")  # the newer turn still holds it
    newer_may_leave.set()
    thread.join(30)
    assert not thread.is_alive()
    assert try_once(settings, "t1")  # released, not leaked


def test_lock_files_are_named_by_hash(settings: Settings) -> None:
    path = lock_path(settings, "../../etc/passwd")
    assert path.parent == settings.data_dir / "locks" and "/" not in path.name and ".." not in path.name


def test_session_ask_on_a_busy_thread_raises_and_writes_nothing(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(thread_lock_timeout_s=0)
    session = Session(settings)
    with held_elsewhere(settings, scoped_thread_id(Context().tenant, "busy")):
        with pytest.raises(ThreadBusyError, match="RAG_THREAD_LOCK_TIMEOUT_S"):
            session.ask("Is Jupiter a planet?", thread_id="busy", context=Context())
        with pytest.raises(ThreadBusyError):
            list(session.stream("Is Jupiter a planet?", thread_id="busy", context=Context()))
    assert session.history("busy") == {}


def test_cli_ask_on_a_busy_thread_exits_1_with_one_line(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("RAG_THREAD_LOCK_TIMEOUT_S", "0")
    with held_elsewhere(settings, scoped_thread_id(settings.default_tenant, "busy")):
        result = CliRunner().invoke(app, ["ask", "Is Jupiter a planet?", "--thread", "busy"])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: thread 'busy' is busy"), result.stderr
    assert "Traceback" not in result.output + result.stderr


def test_lock_files_do_not_pile_up_with_threads(settings: Settings) -> None:
    """One lock file per thread id ever used used to stay under <data_dir>/locks forever; a released lock
    now removes its file, so after many threads' turns the folder holds none."""
    for index in range(50):
        with thread_lock(settings, f"thread-{index}"):
            assert lock_path(settings, f"thread-{index}").exists()  # held: the file is there
    assert list((settings.data_dir / "locks").iterdir()) == []


def test_a_waiter_on_a_removed_lock_file_still_excludes_the_next_holder(settings: Settings) -> None:
    """The holder removes the file on release while a waiter may have it open: the waiter must notice and
    lock the new file, so two holders never overlap."""
    inside = threading.Lock()
    overlaps: list[int] = []

    def turn(_: int) -> None:
        for _attempt in range(20):
            with thread_lock(settings, "contended", timeout_s=30):
                if not inside.acquire(blocking=False):
                    overlaps.append(1)
                    continue
                time.sleep(0.001)
                inside.release()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(turn, range(4)))
    assert overlaps == []
