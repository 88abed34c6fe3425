"""The one way to read the environment's settings: `get_settings()`.

Why one reader with one cache: a settings read parses the environment and `.env` (milliseconds), and it is
asked for on every graph run and store call; but tests and notebooks change `RAG_*` variables and `.env`
after import, and each read must see them. So the reads are kept keyed on what they are read from: the
`RAG_*` variables, the working directory and its `.env` file's size and modification time. A key costs
microseconds; a changed environment is a new key, hence a fresh read. `get_settings.cache_clear()` forgets
every read (after an edit that keeps `.env`'s size and time, which a test may do within one clock tick).

Inside a running event loop (the LangGraph server, `ainvoke`) the working directory and `.env` are not
looked at: those are blocking filesystem calls, which `langgraph dev` refuses (BlockingError). There the
latest read of the same `RAG_*` variables is reused; state/context.py reads the settings when imported, so a
server that imports the graphs has one before its loop asks.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict

from config.settings.engine import ENV_PREFIX, Settings, load_settings

#: Environments whose reads are kept: a test that switches between a few environments reads each once.
SETTINGS_READS_KEPT = 8
_PREFIX_LENGTH = len(ENV_PREFIX)

Variables = tuple[tuple[str, str], ...]
#: (RAG_* variables, working directory, (size, mtime_ns) of its .env file or None).
ReadKey = tuple[Variables, str, tuple[int, int] | None]


def _rag_variables() -> Variables:
    """The RAG_* variables, any case (settings names are case-insensitive); only their values are decoded:
    this runs on every read, and decoding every variable's value made it ~3 times slower."""
    environ = os.environ
    return tuple(
        sorted((name, environ[name]) for name in environ if name[:_PREFIX_LENGTH].upper() == ENV_PREFIX)
    )


def _read_key(variables: Variables) -> ReadKey:
    """What a read depends on besides the variables: the working directory and its `.env` (blocking)."""
    cwd = os.getcwd()
    try:
        stat = os.stat(os.path.join(cwd, ".env"))
    except OSError:
        return variables, cwd, None
    return variables, cwd, (stat.st_size, stat.st_mtime_ns)


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class SettingsReader:
    """The environment's settings, read once per environment (see the module's docstring).

    Raises SettingsError naming the variable when the environment is invalid; a failed read is not kept,
    so fixing the variable is enough."""

    def __init__(self, kept: int = SETTINGS_READS_KEPT) -> None:
        self._kept = kept
        self._reads: OrderedDict[ReadKey, Settings] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self) -> Settings:
        variables = _rag_variables()
        if _in_event_loop():
            with self._lock:
                for key in reversed(self._reads):
                    if key[0] == variables:
                        return self._reads[key]
        key = _read_key(variables)
        with self._lock:
            if key in self._reads:
                self._reads.move_to_end(key)
                return self._reads[key]
        settings = load_settings()
        with self._lock:
            self._reads[key] = settings
            self._reads.move_to_end(key)
            while len(self._reads) > self._kept:
                self._reads.popitem(last=False)
        return settings

    def cache_clear(self) -> None:
        """Forget every read: the next call reads the environment again."""
        with self._lock:
            self._reads.clear()

    def cache_size(self) -> int:
        """Reads kept (for tests of the cache)."""
        with self._lock:
            return len(self._reads)


#: The one reader of the environment's settings (`get_settings()`; `get_settings.cache_clear()`).
get_settings = SettingsReader()
