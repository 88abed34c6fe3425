"""The errors every loader raises and the `LoadGuard` each parse runs under: a nesting cap (LOADER_MAX_DEPTH),
a per-file time budget (RAG_LOADER_FILE_TIMEOUT_S) and the caller's stop hook, so a file built to be slow
fails alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from config.settings import Settings

#: Parse-loop iterations between two checks of the time budget and the stop hook.
GUARD_CHECK_EVERY = 256
#: Nesting depth cap of parsed files: JSON nested deeper is refused, HTML elements opened deeper are taken
#: as closed (DOCX XML is capped at 256 by libxml2).
LOADER_MAX_DEPTH = 512


class LoaderError(Exception):
    """A file that cannot be loaded; the message is a short reason shown to the user as-is."""


class StopRequested(Exception):
    """`should_stop()` returned True: the parse was abandoned (not a LoaderError: the run stops, the file has
    not failed)."""


@dataclass
class LoadGuard:
    """Bounds of one file's parse: a nesting depth cap, a time budget (its clock starts when made: one per
    file) and the caller's stop hook. Cooperative, since a worker thread cannot be killed: loaders call
    `tick()` in their loops."""

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
