"""The `rag` command line: ingest, search, ask, chat, threads and evaluations.

Every command turns bad input into one clear line on stderr and exit code 2 (1 for a store or model that is
down), never a stack trace; `--help` on every command documents its options.

Layout: one module per command group (documents, conversation, threads, evals, serve, memory, model,
summarize; service/doctor.py), the helpers they share in service/cli/common.py, and the registration below,
in one place, in the order `rag --help` lists the commands. A new command is a function in its own module
plus one line here (see the registration block). Commands import their heavy dependencies inside the
function so `rag` starts fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli import (
    conversation,
    documents,
    eval_calibrate,
    eval_router,
    feedback,
    serve,
    stats,
)
from service.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FILES_FAILED,
    EXIT_UNAVAILABLE,
    configure_logging,
    console,
    error_console,
    fail,
    progress_bars,
    settings_or_exit,
    user_errors,
    warning,
    write_json_report,
)
from service.cli.evaluations import eval_app
from service.cli.memory import memory_app
from service.cli.model import model_app
from service.cli.summarize import summarize
from service.cli.threads import threads_app
from service.doctor import doctor

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FILES_FAILED",
    "EXIT_UNAVAILABLE",
    "app",
    "console",
    "error_console",
    "eval_app",
    "fail",
    "progress_bars",
    "settings_or_exit",
    "user_errors",
    "warning",
    "write_json_report",
]

app = typer.Typer(
    help="Agentic RAG engine: ingest your documents, search them, ask questions with cited answers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")] = False,
) -> None:
    """Configure logging for every command."""
    configure_logging(verbose)


# --------------------------------------------------------------------------------------------------------
# Registration: `rag --help` lists the commands in this order, then the groups (eval, memory, model, threads).
# A new top-level command: app.command("name")(module.function). A new evaluation of a user's corpus:
# eval_app.command("name")(module.function); a benchmark campaign goes to benchmarks/commands/ instead.
# A new group: app.add_typer(module.group_app, name="name").

app.command("summarize")(summarize)
app.command("doctor")(doctor)
app.command("ingest")(documents.ingest)
app.command("search")(documents.search)
app.command("ask")(conversation.ask)
app.command("chat")(conversation.chat)
app.command("serve")(serve.serve)
app.command("delete")(serve.delete)
app.command("stats")(stats.stats)
app.command("feedback")(feedback.feedback)

app.add_typer(eval_app, name="eval")
app.add_typer(memory_app, name="memory")
app.add_typer(model_app, name="model")
app.add_typer(threads_app, name="threads")

# Evaluations defined outside service/cli/evaluations.py, listed after its own.
eval_app.command("router")(eval_router.eval_router)
eval_app.command("load")(serve.eval_load)
eval_app.command("calibrate")(eval_calibrate.eval_calibrate)
