"""What every `rag` command shares: the consoles, the exit codes, one-line errors, settings and progress bars.

Why a module of its own: each command group (service/cli/*.py) and the commands registered from elsewhere
(service/doctor.py, evals) import these without importing the app, so no module imports the package that
registers it.
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
    """Print one error line and exit.

    The message is escaped because it often quotes user input (a filter, a path), which rich would
    otherwise read as markup ("[/x]" raises MarkupError); soft wrap keeps it one line at any width.
    """
    error_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def warning(message: str) -> None:
    """Print one warning line on stderr (escaped and unwrapped, like `fail`)."""
    error_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the engine's documented errors into clear one-line messages. The error classes are imported
    only when something was raised: their modules load SQLAlchemy and LangGraph, which a command that
    hands its question to a running server never needs."""
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
    """`value`, or one line and exit 2 when it is not valid UTF-8 text (`what` names it: "question").

    The same check as `rag search`'s query (core.text.invalid_utf8): argv's undecodable bytes arrive as
    lone surrogates, which fail much later (in SQLite, the tokenizer, a lock file name) with a stack trace."""
    from core.text import invalid_utf8

    problem = invalid_utf8(value)
    if problem:
        fail(f"{what} is not valid UTF-8 text: {problem}")
    return value


def checked_store(kb: KnowledgeBase) -> KnowledgeBase:
    """The knowledge base after the store checks every command that reads it runs first, as `rag search`
    does: the catalog is opened and its chunk counts read, so a damaged file (garbage, a damaged or
    truncated header) raises CatalogDamagedError (one line, exit 1 under `user_errors`) before a model is
    loaded or a graph runs; a vector store that lost chunks is reported on stderr, once (`kb.warn`).

    Why before the graph: its nodes turn a store error into an honest "not found" answer for the API, so
    `rag ask` exited 0 on a damaged catalog, with the semantic cache's stack trace on the way."""
    kb.warn = warning
    kb.catalog.chunk_counts()
    return kb


class StoreErrorReportedByCommand(logging.Filter):
    """Leaves out a log record that carries a store error (the retrieve node's "retrieval failed: ...") and
    keeps its text: the graph's output holds only our public message, the operator at the command line gets
    the store's own one."""

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
    """Run a graph whose store errors the command reports itself (`store_error_or_exit`): the nodes' log
    line of the same error is left out of stderr, so the user reads one line, not the same one twice."""
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
    """Exit 1 when a graph run could not search (`error` of its output state): the run answered "cannot
    answer from it", which is not an answer for a command line. The line is the store's own error, kept
    from the log, or else the output's public message."""
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
    """The command that produced a report, with the RAG_* settings it ran under (credentials left out), so a
    result file says how to reproduce it."""
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
    """What `--json` prints: JSON on stdout, non-ASCII kept, outside rich (no markup, no wrapping), so a
    script can parse it; `indent=None` for one line per result."""
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
