"""One turn at a time per thread: a lock that holds across processes and across threads of one process.

Why: a turn reads the thread's checkpoint, runs for seconds, then writes new checkpoints. Two turns that
overlap on one thread both start from the same checkpoint, so one's messages are lost, answers land after
the wrong question, and a follow-up is rewritten with history that is not its own. The checkpoint file has no
notion of a turn, so turns are serialized before the graph runs.

How: `fcntl.flock` on `<data_dir>/locks/<sha1(thread_id)>.lock`. flock locks belong to an open file
description, so they exclude other processes *and* other threads of this process (each acquisition opens
the file anew); the kernel drops them when a process dies, so a crashed turn never leaves a thread stuck.
A caller waits up to `RAG_THREAD_LOCK_TIMEOUT_S`, then gets ThreadBusyError (CLI exit 1, HTTP 409): a clear
refusal the user can retry, never a silently lost turn. The file name is a hash, so any thread id (slashes,
dots, very long) is a safe name.

Re-entrant per OS thread: a caller holding the lock (`with thread_lock(...)`: the HTTP API, a notebook) may
call `Session.ask` on the same thread inside it without deadlocking on itself.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from config.settings import Settings

#: Folder under the data directory that holds the lock files.
LOCK_DIR = "locks"
#: First and longest pause between two attempts while another turn holds the thread (seconds): short
#: enough that a waiting turn starts soon after the other ends, long enough not to spin.
POLL_FIRST_S = 0.01
POLL_MAX_S = 0.2


class ThreadBusyError(RuntimeError):
    """Another turn is running on this thread and did not finish within RAG_THREAD_LOCK_TIMEOUT_S."""


#: Lock files this process holds: path -> (holding OS thread, depth, descriptor). Guarded by _HELD_GUARD.
_HELD: dict[str, tuple[int, int, int]] = {}
_HELD_GUARD = threading.Lock()


def lock_path(settings: Settings, thread_id: str) -> Path:
    """The lock file of a thread (its name is the SHA-1 of the thread id)."""
    digest = hashlib.sha1(thread_id.encode("utf-8")).hexdigest()
    return settings.data_dir / LOCK_DIR / f"{digest}.lock"


def _try_lock(path: Path) -> int | None:
    """A descriptor holding the exclusive lock on `path`, or None when another holder has it.

    The lock file may be removed (by `threads delete`, under the lock) between our open and our flock; a lock
    on a removed file excludes nobody, so the inode is checked after locking and the attempt repeated."""
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(descriptor)
            if error.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None
            raise
        try:
            same = os.stat(path).st_ino == os.fstat(descriptor).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return descriptor
        os.close(descriptor)


@contextmanager
def thread_lock(settings: Settings, thread_id: str, timeout_s: float | None = None) -> Iterator[None]:
    """Hold the thread's lock for the block; wait up to `timeout_s` (default RAG_THREAD_LOCK_TIMEOUT_S),
    then raise ThreadBusyError("thread X is busy: another turn is running")."""
    path = lock_path(settings, thread_id)
    key = str(path)
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None and held[0] == me:
            _HELD[key] = (me, held[1] + 1, held[2])
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _HELD_GUARD:
                owner, depth, descriptor = _HELD[key]
                _HELD[key] = (owner, depth - 1, descriptor)
        return

    wait = settings.thread_lock_timeout_s if timeout_s is None else timeout_s
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait
    pause = POLL_FIRST_S
    descriptor = _try_lock(path)
    while descriptor is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ThreadBusyError(
                f"thread {thread_id!r} is busy: another turn is running "
                f"(waited {wait:g} s, RAG_THREAD_LOCK_TIMEOUT_S); try again when it has finished"
            )
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, POLL_MAX_S)
        descriptor = _try_lock(path)
    with _HELD_GUARD:
        _HELD[key] = (me, 1, descriptor)
    try:
        yield
    finally:
        with _HELD_GUARD:
            del _HELD[key]
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        os.close(descriptor)


def remove_lock_file(settings: Settings, thread_id: str) -> None:
    """Remove a deleted thread's lock file; call it while holding that thread's lock (waiters that opened
    the old file notice the removal and retry on a new one)."""
    try:
        lock_path(settings, thread_id).unlink()
    except FileNotFoundError:
        pass
