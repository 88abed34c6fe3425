"""`python -m benchmarks keyword-backends`: the keyword index on PostgreSQL (table BM25 vs tsvector
ts_rank/ts_rank_cd)
against the embedded FTS5 index, quality and latency on SciFact (benchmarks/keyword_backends.py); and
`python -m benchmarks keyword-pruning`: the quality price of query-term pruning
(benchmarks/keyword_pruning.py).

Its own module because it needs a Postgres server (RAG_TEST_DATABASE_URL from scripts/servers.sh, or
--database-url); registered in service/cli/__init__.py like every benchmark.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.table import Table

from benchmarks.data import ScifactOption, scifact_folder
from service.cli.common import (
    JsonReportOption,
    console,
    fail,
    settings_or_exit,
    user_errors,
    write_json_report,
)


def eval_keyword_backends(
    database_url: Annotated[
        str | None,
        typer.Option(
            help="Postgres server whose fresh databases hold the backends (default RAG_TEST_DATABASE_URL)."
        ),
    ] = None,
    copies: Annotated[int, typer.Option(help="Copies of the corpus for the second latency size.")] = 10,
    queries: Annotated[int, typer.Option(help="Queries timed per backend and size.")] = 300,
    scifact: ScifactOption = None,
    json_out: JsonReportOption = None,
) -> None:
    """Keyword backends on SciFact (train qrels as dev): nDCG@10, recall, p50/p95; names the best."""
    from benchmarks.keyword_backends import run_keyword_backends_eval

    url = database_url or os.environ.get("RAG_TEST_DATABASE_URL")
    if not url or not url.startswith(("postgresql", "postgres")):
        fail(
            'give --database-url postgresql://... (or start servers: eval "$(bash scripts/servers.sh start)")'
        )
    if copies < 1 or queries < 1:
        fail("--copies and --queries must be at least 1")
    folder = scifact_folder(scifact)
    settings = settings_or_exit()
    with user_errors():
        report = run_keyword_backends_eval(
            settings,
            scifact_dir=folder,
            database_url=url,
            work_dir=settings.data_dir / "eval" / "keyword-backends",
            copies=copies,
            latency_queries=queries,
            progress=lambda message: console.print(f"[dim]{message}[/dim]"),
        )
    write_json_report(json_out, report)
    table = Table(title=f"keyword backends ({report['dataset']}; {report['machine']})")
    sizes = list(next(iter(report["backends"].values()))["latency"])
    for column in ("backend", "nDCG@10", "R@100", *(f"p50/p95 ms @{size}" for size in sizes)):
        table.add_column(column, justify="right")
    for name, entry in report["backends"].items():
        cells = [
            f"{entry['latency'][size]['p50_ms']:.1f} / {entry['latency'][size]['p95_ms']:.1f}"
            for size in sizes
        ]
        table.add_row(
            name, f"{entry['quality']['ndcg@10']:.4f}", f"{entry['quality']['recall@100']:.4f}", *cells
        )
    console.print(table)
    console.print(f"chosen for Postgres: {report['chosen']}")


def eval_keyword_pruning(
    scifact: ScifactOption = None,
    json_out: JsonReportOption = None,
) -> None:
    """What query-term pruning costs: SciFact nDCG@10 with every term vs the policy as at 50k/500k chunks."""
    from benchmarks.keyword_pruning import run_keyword_pruning_eval

    folder = scifact_folder(scifact)
    settings = settings_or_exit()
    with user_errors():
        report = run_keyword_pruning_eval(
            settings,
            scifact_dir=folder,
            work_dir=settings.data_dir / "eval" / "keyword-pruning",
            progress=lambda message: console.print(f"[dim]{message}[/dim]"),
        )
    write_json_report(json_out, report)
    splits = list(report["judged_queries"])
    table = Table(title=f"keyword pruning ({report['dataset']}; {report['corpus_chunks']} chunks)")
    table.add_column("policy")
    for split in splits:
        table.add_column(f"nDCG@10 {split}", justify="right")
        table.add_column(f"R@100 {split}", justify="right")
    for name, entry in report["policies"].items():
        cells = [f"{entry[split][metric]:.4f}" for split in splits for metric in ("ndcg@10", "recall@100")]
        table.add_row(name, *cells)
    console.print(table)
