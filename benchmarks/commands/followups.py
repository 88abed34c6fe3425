"""`python -m benchmarks followups`: follow-up questions made standalone (before / after reading the previous
answer, and
with --model the contextualize node), scored on referents named and keyword retrieval
(benchmarks/followups.py); `python -m benchmarks followups-docs`: follow-ups about installed libraries'
documentation, scored on whether the rewrite names what the previous turn was about
(benchmarks/followups_docs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from service.cli.common import (
    JsonReportOption,
    console,
    fail,
    settings_or_exit,
    user_errors,
    write_json_report,
)


def eval_followups(
    fixture: Annotated[
        Path | None, typer.Option(help="Conversations (JSONL; default benchmarks/fixtures/followups.jsonl).")
    ] = None,
    model: Annotated[
        bool,
        typer.Option("--model", help="Also rewrite with the contextualize node and the configured model."),
    ] = False,
    json_out: JsonReportOption = None,
) -> None:
    """Referent named (resolved) and hit@1 / hit@3 of the follow-up's passage, per split (dev / test)."""
    from benchmarks.followups import (
        DEFAULT_FIXTURE,
        load_conversations,
        run_followups_eval,
        run_followups_with_model,
    )
    from evals.environment import machine_description
    from persistence.keyword_index import BM25_TITLE_WEIGHT

    path = fixture or DEFAULT_FIXTURE
    if not path.is_file():
        fail(f"no conversations file at {path}")
    try:
        conversations = load_conversations(path)
    except ValueError as error:
        fail(str(error))
    settings = settings_or_exit()
    with user_errors():
        if model:
            report = run_followups_with_model(conversations, settings)
        else:
            report = run_followups_eval(conversations, title_weight=BM25_TITLE_WEIGHT)
    report = {**report, "fixture": str(path), "machine": machine_description()}
    write_json_report(json_out, report)
    print_followups_report(report)


def print_followups_report(report: dict[str, Any]) -> None:
    """One table: per split, each rewrite's resolved / hit@1 / hit@3."""
    table = Table(
        title=f"follow-up rewrites ({report['conversations']} conversations, {report['passages']} passages)"
    )
    for column in ("split", "rewrite", "n", "resolved", "hit@1", "hit@3"):
        table.add_column(column, justify="right" if column not in ("split", "rewrite") else "left")
    for split, entry in report["splits"].items():
        for name in report["rewriters"]:
            row = entry[name]
            table.add_row(
                split, name, str(row["n"]), str(row["resolved"]), str(row["hit@1"]), str(row["hit@3"])
            )
    console.print(table)
    if "model" in report:
        console.print(f"model: {report['model']['name']} (strength {report['model']['strength']})")


def eval_followups_docs(
    fixture: Annotated[
        Path | None,
        typer.Option(help="Conversations (JSONL; default benchmarks/fixtures/followups_docs.jsonl)."),
    ] = None,
    before: Annotated[
        Path | None,
        typer.Option(help="An earlier report of this command, carried into this one as `before`."),
    ] = None,
    json_out: JsonReportOption = None,
) -> None:
    """Share of follow-ups about real documentation whose rewrite names the referent, per half."""
    import json
    import shlex
    import sys

    from benchmarks.followups_docs import DEFAULT_FIXTURE, load_doc_conversations, run_followups_docs_eval
    from evals.environment import machine_description

    path = fixture or DEFAULT_FIXTURE
    if not path.is_file():
        fail(f"no conversations file at {path}")
    if before is not None and not before.is_file():
        fail(f"no earlier report at {before}")
    try:
        conversations = load_doc_conversations(path)
    except ValueError as error:
        fail(str(error))
    earlier: dict[str, Any] | None = None
    if before is not None:
        try:
            earlier = json.loads(before.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            fail(f"{before} is not a JSON report: {error}")
        if not isinstance(earlier, dict) or "halves" not in earlier:
            fail(f"{before} is not a report of `python -m benchmarks followups-docs` (no halves)")
    report: dict[str, Any] = {
        **run_followups_docs_eval(conversations),
        "fixture": str(path),
        "machine": machine_description(),
        "command": shlex.join(["python", "-m", "benchmarks", *sys.argv[1:]]),
    }
    if earlier is not None:
        report["before"] = {key: earlier[key] for key in ("halves", "machine", "command") if key in earlier}
    write_json_report(json_out, report)
    table = Table(title=f"follow-ups over documentation ({report['conversations']} conversations)")
    for column in ("half", "n", "named (before)", "named", "added words (before)", "added words"):
        table.add_column(column, justify="left" if column == "half" else "right")
    for half, row in report["halves"].items():
        old = (earlier or {}).get("halves", {}).get(half, {})
        table.add_row(
            half,
            str(row["n"]),
            str(old.get("named", "-")),
            str(row["named"]),
            str(old.get("added_words", "-")),
            str(row["added_words"]),
        )
    console.print(table)
