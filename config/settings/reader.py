"""The one way to read the environment's settings: `get_settings()`.

Reads are cached, keyed on the `RAG_*` variables, the working directory and its `.env` size and mtime, so a
changed environment is read afresh (`cache_clear()` after an edit in one clock tick that keeps `.env`'s size).
Inside a running event loop (`langgraph dev` refuses blocking calls) the latest read of the same variables is
reused; state/context.py reads the settings when imported, so a server has one before its loop asks.
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
    """The RAG_* variables, any case (only their values are decoded: it runs on every read)."""
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
    """The environment's settings, read once per environment; a failed read (SettingsError) is not kept."""

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


#: The one reader of the environment's settings (`get_settings()`; `get_settings.cache_clear()`).
get_settings = SettingsReader()
