"""One turn at a time per thread, across processes and threads: two overlapping turns would start from the
same checkpoint and lose messages.

A `fcntl.flock` on `<data_dir>/locks/<sha1(thread_id)>.lock`, removed on release while still held (a waiter
re-checks the inode after locking), so the folder holds only turns in flight; the kernel drops it when a
process dies. An flock belongs to an open file description, and each acquisition opens the file anew, so it
excludes other threads of this process too. Not the `filelock` package: its FileLock keeps the file after
release by design, one per thread id ever used. With PostgreSQL (RAG_DATABASE_URL: several hosts, where a
file lock excludes nobody) a session advisory lock instead. A caller waits up to
RAG_THREAD_LOCK_TIMEOUT_S, then gets ThreadBusyError (exit 1, HTTP 409). Re-entrant per OS thread.
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
from typing import Any, Protocol

import psycopg

from config.settings import Settings
from persistence.database import libpq_url, postgres_url
from persistence.errors import StoreUnavailableError

#: Folder under the data directory that holds the lock files.
LOCK_DIR = "locks"
#: First and longest pause between two attempts while another turn holds the thread (seconds): short
#: enough that a waiting turn starts soon after the other ends, long enough not to spin.
POLL_FIRST_S = 0.01
POLL_MAX_S = 0.2


class ThreadBusyError(RuntimeError):
    """Another turn is running on this thread and did not finish within RAG_THREAD_LOCK_TIMEOUT_S."""


#: Prefix of the text hashed into a thread's advisory lock key (keeps them apart from other advisory locks).
ADVISORY_KEY_PREFIX = "rag-thread:"


class _Held(Protocol):
    """A held lock: released exactly once."""

    def release(self) -> None: ...


class _FileLock:
    """A flock held on an open lock file, removed on release while still held (a waiter on the removed
    inode sees it in `_try_lock` and retries on a fresh file)."""

    def __init__(self, descriptor: int, path: Path) -> None:
        self.descriptor = descriptor
        self.path = path

    def release(self) -> None:
        try:
            if os.stat(self.path).st_ino == os.fstat(self.descriptor).st_ino:
                self.path.unlink()
        except FileNotFoundError:
            pass  # already removed (`threads delete`)
        finally:
            fcntl.flock(self.descriptor, fcntl.LOCK_UN)
            os.close(self.descriptor)


class _AdvisoryLock:
    """A session-level Postgres advisory lock, held by the connection it was taken on."""

    def __init__(self, connection: psycopg.Connection[Any], key: int) -> None:
        self.connection = connection
        self.key = key

    def release(self) -> None:
        try:
            self.connection.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        except psycopg.Error:
            pass  # the connection is gone: the server has released the lock with it
        finally:
            self.connection.close()


#: Locks this process holds: lock name -> (holding OS thread, depth, lock). Guarded by _HELD_GUARD.
_HELD: dict[str, tuple[int, int, _Held]] = {}
_HELD_GUARD = threading.Lock()


def advisory_key(thread_id: str) -> int:
    """The signed 64-bit advisory lock key of a thread (Postgres' bigint)."""
    digest = hashlib.sha1(f"{ADVISORY_KEY_PREFIX}{thread_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class _FileLocker:
    def __init__(self, settings: Settings, thread_id: str) -> None:
        self.path = lock_path(settings, thread_id)
        self.name = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def attempt(self) -> _Held | None:
        descriptor = _try_lock(self.path)
        return None if descriptor is None else _FileLock(descriptor, self.path)

    def close(self) -> None:
        """Nothing to close: each attempt opens and keeps (or closes) its own descriptor."""


class _AdvisoryLocker:
    """Takes the advisory lock on a connection of its own, opened once for all attempts of one wait."""

    def __init__(self, url: str, thread_id: str, connect_timeout_s: float) -> None:
        self.url = url
        self.key = advisory_key(thread_id)
        self.name = f"pg:{libpq_url(url)}#{self.key}"
        self.connect_timeout_s = connect_timeout_s
        self.connection: psycopg.Connection[Any] | None = None

    def _unavailable(self, error: psycopg.Error) -> StoreUnavailableError:
        from persistence.urls import unavailable_message

        return StoreUnavailableError(unavailable_message(self.url, error, what="thread lock database"))

    def attempt(self) -> _Held | None:
        try:
            if self.connection is None:
                self.connection = psycopg.connect(
                    libpq_url(self.url),
                    autocommit=True,
                    connect_timeout=max(1, round(self.connect_timeout_s)),
                )
            row = self.connection.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        except psycopg.Error as error:
            self.close()
            raise self._unavailable(error) from error
        if row is None or not row[0]:
            return None
        held, self.connection = _AdvisoryLock(self.connection, self.key), None
        return held

    def close(self) -> None:
        """Close the waiting connection (a lock never taken on it)."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _locker(settings: Settings, thread_id: str) -> _FileLocker | _AdvisoryLocker:
    """The lock kind the settings call for: advisory on PostgreSQL, a lock file otherwise."""
    url = postgres_url(settings)
    if url is None:
        return _FileLocker(settings, thread_id)
    return _AdvisoryLocker(url, thread_id, settings.database_connect_timeout_s)


def lock_path(settings: Settings, thread_id: str) -> Path:
    """The lock file of a thread (its name is the SHA-1 of the thread id)."""
    digest = hashlib.sha1(thread_id.encode("utf-8")).hexdigest()
    return settings.data_dir / LOCK_DIR / f"{digest}.lock"


def _try_lock(path: Path) -> int | None:
    """A descriptor holding the exclusive lock on `path`, or None when another holder has it (repeated when
    the file was removed between open and flock: a lock on it would exclude nobody)."""
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
def thread_lock(
    settings: Settings, thread_id: str, timeout_s: float | None = None, *, shown_as: str | None = None
) -> Iterator[None]:
    """Hold the thread's lock for the block; wait up to `timeout_s` (default RAG_THREAD_LOCK_TIMEOUT_S),
    then raise ThreadBusyError naming `shown_as` (the caller's id of the thread) or `thread_id`."""
    locker = _locker(settings, thread_id)
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.get(locker.name)
        if held is not None and held[0] == me:
            _HELD[locker.name] = (me, held[1] + 1, held[2])
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _HELD_GUARD:
                owner, depth, entered = _HELD[locker.name]
                _HELD[locker.name] = (owner, depth - 1, entered)
        return

    wait = settings.thread_lock_timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + wait
    pause = POLL_FIRST_S
    try:
        lock = locker.attempt()
        while lock is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ThreadBusyError(
                    f"thread {shown_as or thread_id!r} is busy: another turn is running "
                    f"(waited {wait:g} s, RAG_THREAD_LOCK_TIMEOUT_S); try again when it has finished"
                )
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, POLL_MAX_S)
            lock = locker.attempt()
    finally:
        locker.close()
    with _HELD_GUARD:
        _HELD[locker.name] = (me, 1, lock)
    try:
        yield
    finally:
        try:
            with _HELD_GUARD:
                # only our own entry: after `remove_lock_file` another holder may have replaced it
                if _HELD.get(locker.name, (0, 0, None))[2] is lock:
                    del _HELD[locker.name]
        finally:
            lock.release()


def remove_lock_file(settings: Settings, thread_id: str) -> None:
    """Remove a deleted thread's lock file; call it while holding that thread's lock (waiters that opened
    the old file notice the removal and retry on a new one). Advisory locks leave nothing to remove."""
    if postgres_url(settings) is not None:
        return
    try:
        lock_path(settings, thread_id).unlink()
    except FileNotFoundError:
        pass
