"""`python -m benchmarks scale`: retrieval latency at 5k / 50k / 500k synthetic chunks, embedded and server
set-ups.

Its own module (not benchmarks.py) because it manages servers and large stores of its own; the command is
registered in service/cli/__init__.py like every benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from benchmarks.data import ScifactOption, scifact_folder
from service.cli.common import (
    JsonReportOption,
    console,
    fail,
    progress_bars,
    settings_or_exit,
    user_errors,
    write_json_report,
)

SETUPS = ("embedded", "server")


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        fail(f"--sizes must be comma-separated whole numbers, got {text!r}")
    if not sizes or any(size < 1 for size in sizes):
        fail(f"--sizes must name at least one positive size, got {text!r}")
    return sizes


def eval_scale(
    sizes: Annotated[
        str, typer.Option(help="Corpus sizes in chunks, comma-separated.")
    ] = "5000,50000,500000",
    setup: Annotated[str, typer.Option(help="embedded | server | both.")] = "both",
    root: Annotated[
        Path | None,
        typer.Option(help="Where the stores are built once and reused (default: <data_dir>/eval/scale)."),
    ] = None,
    queries: Annotated[int, typer.Option(help="SciFact claims timed per mode and size.")] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic corpus and of the query sample.")] = 0,
    database_url: Annotated[
        str | None,
        typer.Option(help="Database of the server set-up's catalog and keyword index (postgresql://...)."),
    ] = None,
    scifact: ScifactOption = None,
    build_only: Annotated[
        bool, typer.Option("--build-only", help="Build the stores, measure nothing.")
    ] = False,
    json_out: JsonReportOption = None,
) -> None:
    """Dense, keyword and hybrid p50/p95 at each size (synthetic SciFact corpus; stores built once)."""
    from benchmarks.scale import run_scale_eval
    from benchmarks.scale_corpus import base_encoder
    from retrieval.embeddings import EMBEDDING_BATCH_SIZE, MiniLMEmbeddings

    chosen = SETUPS if setup == "both" else (setup,)
    if setup != "both" and setup not in SETUPS:
        fail(f"--setup must be embedded, server or both, got {setup!r}")
    if queries < 1:
        fail("--queries must be at least 1")
    size_list = _sizes(sizes)
    folder = scifact_folder(scifact)
    settings = settings_or_exit()
    model = MiniLMEmbeddings(batch_size=EMBEDDING_BATCH_SIZE)
    with user_errors(), progress_bars() as bars:
        report = run_scale_eval(
            settings,
            root=root or settings.data_dir / "eval" / "scale",
            sizes=size_list,
            setups=chosen,
            queries=queries,
            seed=seed,
            database_url=database_url,
            scifact_dir=folder,
            embed=base_encoder(model),
            embed_query=model.embed_query,
            base_model=model,
            build_only=build_only,
            progress=bars,
        )
    write_json_report(json_out, report)
    if build_only:
        for size, entry in report["sizes"].items():
            console.print(f"{size}: built ({entry['build']['build_s']} s)")
        return
    table = Table(
        title=f"retrieval latency, ms (k={report['k']}, {report['queries']} queries; {report['machine']})"
    )
    for column in ("chunks", "set-up", "dense p50/p95", "keyword p50/p95", "hybrid p50/p95"):
        table.add_column(column, justify="right")
    for size, entry in report["sizes"].items():
        for name in chosen:
            if name in entry:
                row = entry[name]
                cells = [
                    f"{row[mode]['p50_ms']:.1f} / {row[mode]['p95_ms']:.1f}"
                    for mode in ("dense", "bm25", "hybrid")
                ]
                table.add_row(size, name, *cells)
    console.print(table)
    console.print(f"query embedding (not included): p50 {report['embed_query_ms']['p50']} ms")
