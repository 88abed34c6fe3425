"""`rag eval router`: single- vs multi-hop accuracy of the router on a user's labelled questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import (
    JsonReportOption,
    fail,
    progress_bars,
    settings_or_exit,
    user_errors,
    write_json_report,
)


def eval_router(
    json_out: JsonReportOption = None,
    dataset: Annotated[
        list[Path] | None,
        typer.Option(
            help="Extra labelled file (repeatable): HotpotQA format = multi-hop; "
            "BEIR queries.jsonl, BEIR folder or SQuAD format = single-hop."
        ),
    ] = None,
    llm_limit: Annotated[
        int | None,
        typer.Option(
            help="Questions analysed by the model, an equal share per source (default 100; 0 = none)."
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder in the shared-data layout: hotpotqa/*.json* (multi-hop), beir-scifact/ and "
            "cmrc2018/cmrc2018_dev.json.gz (single-hop)."
        ),
    ] = None,
    squad: Annotated[
        Path | None, typer.Option(help="SQuAD-format file of single-hop questions (source 'squad').")
    ] = None,
) -> None:
    """Single- vs multi-hop accuracy of analyze + select_strategy: heuristic and model side by side, on the
    labelled questions of --data-dir, --squad and --dataset (at least one)."""
    from evals.router import DEFAULT_LLM_LIMIT, run_router_eval
    from service.cli.router_report import print_router_report

    if llm_limit is not None and llm_limit < 0:
        fail("--llm-limit must be at least 0")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_router_eval(
            settings,
            data_dir=data_dir,
            squad_file=squad,
            extra=dataset or [],
            llm_limit=DEFAULT_LLM_LIMIT if llm_limit is None else llm_limit,
            progress=bars,
        )
    write_json_report(json_out, report)
    print_router_report(report)
