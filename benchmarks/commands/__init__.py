"""`python -m benchmarks ...`: one command per campaign, registered here in the order `--help` lists them.

Each command keeps the options it had as `rag eval <name>`; the product's `rag eval` keeps only what a
user runs on their own corpus (retrieval, qa, latency, load, router, calibrate).
"""

from __future__ import annotations

from typing import Annotated

import typer

from benchmarks.cold_start import eval_cold_start
from benchmarks.commands import (
    chaos,
    fairness,
    followups,
    keyword_backends,
    models,
    prompts,
    quality,
    reader_confidence,
    scale,
)
from service.cli.common import configure_logging

app = typer.Typer(
    help="Benchmark campaigns of this checkout (not installed): they write the result files under results/.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")] = False,
) -> None:
    """Configure logging for every campaign."""
    configure_logging(verbose)


app.command("report")(quality.report)
app.command("graders")(quality.graders)
app.command("groundedness")(quality.groundedness)
app.command("answerability")(quality.answerability)
app.command("scale")(scale.eval_scale)
app.command("keyword-backends")(keyword_backends.eval_keyword_backends)
app.command("keyword-pruning")(keyword_backends.eval_keyword_pruning)
app.command("models")(models.eval_models)
app.command("choose-model")(models.eval_choose_model)
app.command("reader-confidence")(reader_confidence.eval_reader_confidence)
app.command("prompts")(prompts.eval_prompts)
app.command("prompt-cache")(prompts.eval_prompt_cache)
app.command("followups")(followups.eval_followups)
app.command("followups-docs")(followups.eval_followups_docs)
app.command("fairness")(fairness.eval_fairness)
app.command("chaos")(chaos.eval_chaos)
app.command("cold-start")(eval_cold_start)
