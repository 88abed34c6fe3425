"""The errors every loader raises and the `LoadGuard` each parse runs under.

Ingestion must survive files built to be slow: a 1.1 MB HTML file of nested <div>s hung it (time grew with
the square of the depth). So nesting is capped (LOADER_MAX_DEPTH) and every parse runs under a
`LoadGuard`: a per-file time budget (RAG_LOADER_FILE_TIMEOUT_S) and the caller's stop hook, checked inside
the parse loops (cooperatively: no thread or signal, so nothing is left running when a file is given up).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from config.settings import Settings

#: Parse-loop iterations between two checks of the time budget and the stop hook.
GUARD_CHECK_EVERY = 256
#: Nesting depth cap of parsed files (a 1.1 MB file of nested <div>s hung ingestion): JSON nested deeper
#: is refused; HTML elements opened deeper are taken as closed (legacy pages leave <p> and <li> unclosed,
#: which the parser nests). DOCX XML is capped at 256 by libxml2.
LOADER_MAX_DEPTH = 512


class LoaderError(Exception):
    """A file that cannot be loaded; the message is a short reason shown to the user as-is."""


class StopRequested(Exception):
    """`should_stop()` returned True: the parse was abandoned; the file neither loaded nor failed.

    Not a LoaderError, so that ingestion does not record it as the file's failure but stops the run.
    """


@dataclass
class LoadGuard:
    """Bounds of one file's parse: a nesting depth cap, a time budget and the caller's stop hook.

    Why cooperative: a thread cannot be killed and a signal only reaches the main thread (the API parses in
    worker threads), so the loaders call `tick()` in their loops instead. A step that is one call into C
    (json.loads, lxml) or one PDF page cannot be interrupted; `load_bytes` checks the budget after it, so a
    file over budget still fails. The clock starts when the guard is made: make one per file.
    """

    max_depth: int = LOADER_MAX_DEPTH
    #: Seconds the parse may take (0 = no limit).
    timeout_s: float = Settings.model_fields["loader_file_timeout_s"].default
    #: Called at each check; True abandons the parse with StopRequested (a client that went away).
    should_stop: Callable[[], bool] | None = None
    _deadline: float | None = field(init=False, default=None)
    _countdown: int = field(init=False, default=GUARD_CHECK_EVERY)

    def __post_init__(self) -> None:
        if self.timeout_s > 0:
            self._deadline = time.monotonic() + self.timeout_s

    @classmethod
    def from_settings(cls, settings: Settings, should_stop: Callable[[], bool] | None = None) -> LoadGuard:
        """A guard with these settings' time budget (RAG_LOADER_FILE_TIMEOUT_S) and LOADER_MAX_DEPTH."""
        return cls(LOADER_MAX_DEPTH, settings.loader_file_timeout_s, should_stop)

    def check(self) -> None:
        """StopRequested when the caller asked to stop; LoaderError when the time budget is spent."""
        if self.should_stop is not None and self.should_stop():
            raise StopRequested("ingestion stopped by the caller")
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise LoaderError(f"took longer than {self.timeout_s:g} s to parse (RAG_LOADER_FILE_TIMEOUT_S)")

    def tick(self) -> None:
        """`check()` every GUARD_CHECK_EVERY calls: cheap enough for a loop over every element."""
        self._countdown -= 1
        if self._countdown <= 0:
            self._countdown = GUARD_CHECK_EVERY
            self.check()

    def too_deep(self) -> LoaderError:
        """The reason for a file nested deeper than the cap."""
        return LoaderError(f"nested deeper than {self.max_depth} levels (LOADER_MAX_DEPTH)")
