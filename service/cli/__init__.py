"""The `rag` command line: one module per command group, the shared helpers in service/cli/common.py, and
the registration below, in the order `rag --help` lists the commands. Bad input is one line on stderr and
exit 2 (1 for a store or model that is down), never a stack trace; commands import heavy modules inside.
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
from service.cli.common import EXIT_BAD_INPUT, EXIT_UNAVAILABLE, configure_logging
from service.cli.evaluations import eval_app
from service.cli.memory import memory_app
from service.cli.model import model_app
from service.cli.summarize import summarize
from service.cli.threads import threads_app
from service.doctor import doctor

__all__ = ["EXIT_BAD_INPUT", "EXIT_UNAVAILABLE", "app"]

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


# Registration: a benchmark campaign goes to benchmarks/commands/ instead.

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
