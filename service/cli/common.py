"""What every `rag` command shares: consoles, exit codes, one-line errors, settings and progress bars
(imported by each command module without importing the app that registers it).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from config.settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    from retrieval.knowledge_base import KnowledgeBase
    from state.context import Context

console = Console()
error_console = Console(stderr=True)

#: Exit codes: 2 = the user's input was wrong; 1 = a store or model could not be used.
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 1
#: Exit code of `rag ingest` when any file failed to load (the others are indexed; each failure is listed).
EXIT_FILES_FAILED = 1


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print one error line and exit (escaped: it often quotes user input, which rich reads as markup)."""
    error_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def warning(message: str) -> None:
    """Print one warning line on stderr (escaped and unwrapped, like `fail`)."""
    error_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the engine's documented errors into one-line messages (their classes imported only then)."""
    try:
        yield
    except Exception as error:
        from models.errors import ModelUnavailableError
        from persistence.errors import StoreUnavailableError
        from persistence.thread_lock import ThreadBusyError
        from persistence.threads import ThreadAccessError
        from retrieval.embedding_errors import EmbeddingError

        if isinstance(
            error, StoreUnavailableError | EmbeddingError | ModelUnavailableError | ThreadBusyError
        ):
            fail(str(error), EXIT_UNAVAILABLE)
        # another tenant's thread: the caller's input was wrong; settings, filters, queries, names, formats
        if isinstance(error, ThreadAccessError | ValueError | FileNotFoundError):
            fail(str(error))
        raise


def text_or_exit(value: str, what: str) -> str:
    """`value`, or one line and exit 2 when it is not valid UTF-8 text."""
    from core.text import invalid_utf8

    problem = invalid_utf8(value)
    if problem:
        fail(f"{what} is not valid UTF-8 text: {problem}")
    return value


def checked_store(kb: KnowledgeBase) -> KnowledgeBase:
    """The knowledge base after the store checks (a damaged catalog raises before any model or graph): the
    graph's nodes turn a store error into a "not found" answer, which would exit 0."""
    kb.warn = warning
    kb.catalog.chunk_counts()
    return kb


class StoreErrorReportedByCommand(logging.Filter):
    """Leaves out a log record that carries a store error and keeps its text for the command's own line."""

    def __init__(self) -> None:
        super().__init__()
        self.detail = ""

    def filter(self, record: logging.LogRecord) -> bool:
        from persistence.errors import StoreUnavailableError

        arguments = record.args if isinstance(record.args, tuple) else ()
        for argument in arguments:
            if isinstance(argument, StoreUnavailableError):
                self.detail = str(argument)
                return False
        return True


@contextmanager
def store_errors_reported_here() -> Iterator[StoreErrorReportedByCommand]:
    """Run a graph whose store errors the command reports itself: the nodes' log line of it is left out."""
    quiet = StoreErrorReportedByCommand()
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield quiet
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


def store_error_or_exit(result: dict[str, object], reported: StoreErrorReportedByCommand) -> None:
    """Exit 1 with the store's own error (else the output's message) when a graph run could not search."""
    error = str(result.get("error") or "")
    if error:
        fail(reported.detail or error, EXIT_UNAVAILABLE)


#: `--json` of the benchmarks: the file their report is written to (write_json_report).
JsonReportOption = Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")]


def configure_logging(verbose: bool) -> None:
    """The log format and level of a command line (`rag`, `python -m benchmarks`): INFO with --verbose."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


#: Environment variables a report's command line leaves out by name: they may hold credentials.
SECRET_VARIABLE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|URL", re.IGNORECASE)


def command_line() -> str:
    """The command that produced a report, with the RAG_* settings it ran under (credentials left out)."""
    settings = sorted(
        f"{name}={shlex.quote(value)}"
        for name, value in os.environ.items()
        if name.startswith("RAG_") and not SECRET_VARIABLE.search(name)
    )
    return " ".join([*settings, shlex.join(["rag", *sys.argv[1:]])])


def write_json_report(path: Path | None, report: dict[str, object]) -> None:
    """Write a benchmark report as JSON when a path was given, naming the command that produced it."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        stamped = {**report, "command": report.get("command") or command_line()}
        path.write_text(json.dumps(stamped, indent=2, ensure_ascii=False) + "\n")


def print_json(value: object, *, indent: int | None = 2) -> None:
    """What `--json` prints: JSON on stdout outside rich (no markup, no wrapping), non-ASCII kept."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=indent, default=str) + "\n")


def settings_or_exit(**overrides: object) -> Settings:
    """Settings from the environment, or a clear error naming the variable."""
    try:
        return load_settings(**{key: value for key, value in overrides.items() if value is not None})
    except SettingsError as error:
        fail(str(error))


@contextmanager
def progress_bars() -> Iterator[Callable[[str, int], Callable[[int], None]]]:
    """A factory of rich progress bars: `bar = factory(label, total)` then `bar(n)` advances it."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=error_console,
        transient=False,
        disable=not error_console.is_terminal,
    ) as progress:

        def factory(label: str, total: int) -> Callable[[int], None]:
            task = progress.add_task(label, total=total or None)
            return lambda n: progress.advance(task, n)

        yield factory


def context_or_exit(
    mode: str | None, tenant: str | None, collection: str | None, max_iterations: int | None
) -> Context:
    """The run context of ask, chat and threads from their options, or one line naming the bad option."""
    from state.context import context_from

    overrides = {"mode": mode, "tenant": tenant, "collection": collection, "max_iterations": max_iterations}
    try:  # context_from checks each override against its setting's type and range (ValueError)
        return context_from({key: value for key, value in overrides.items() if value is not None})
    except ValueError as error:
        fail(str(error))
