"""`rag ingest` and `rag search`: index documents, search them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from service.cli.common import (
    EXIT_FILES_FAILED,
    checked_store,
    console,
    error_console,
    print_json,
    progress_bars,
    settings_or_exit,
    text_or_exit,
    user_errors,
    warning,
)

if TYPE_CHECKING:
    from config.settings import SearchMode, Settings
    from retrieval.ingest import IngestSummary
    from retrieval.search import SearchResult


def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="Files or folders (.md .txt .html .pdf .docx .json .jsonl).")
    ],
    collection: Annotated[str | None, typer.Option(help="Collection (category) to index into.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant that owns these documents.")] = None,
    prune: Annotated[
        bool, typer.Option(help="Remove indexed files under PATHS that no longer exist.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Index documents incrementally: unchanged files are skipped, changed files replaced atomically."""
    from retrieval.ingest import ingest_paths
    from retrieval.ingest_lock import ingest_lock
    from retrieval.knowledge_base import KnowledgeBase

    for path in paths:
        text_or_exit(str(path), "path")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        kb = checked_store(KnowledgeBase.open(settings))
        bar_files: dict[str, Callable[[int], None]] = {}

        def on_files(files: list[Path]) -> None:
            bar_files["file"] = bars("files", len(files))
            bar_files["chunks"] = bars("chunks embedded", 0)

        # another ingest of this collection running: one "waiting for" line, then its files are unchanged
        with ingest_lock(settings, tenant, collection, on_wait=warning):
            summary = ingest_paths(
                kb,
                paths,
                collection=collection,
                tenant=tenant,
                prune=prune,
                progress=lambda event, n: bar_files[event](n),
                on_files=on_files,
            )
    _report_ingest(summary, as_json)


def _report_ingest(summary: IngestSummary, as_json: bool) -> None:
    """Print what an ingest did; exit EXIT_FILES_FAILED when any file failed to load."""
    report = summary.as_dict()
    if summary.vectors_restored:
        warning(f"restored {summary.vectors_restored} vectors the vector store had lost (from the catalog)")
    for result in summary.results:  # one line per file indexed with a loss (metadata over the bounds)
        if result.warning:
            warning(f"{result.source}: {result.warning}")
    if as_json:
        print_json(report)
    else:
        console.print(
            f"files {report['files']}  indexed {report['indexed']}  chunks {report['chunks']}  "
            f"skipped {report['skipped']}  failed {report['failed']}  pruned {report['pruned']}  "
            f"in {report['seconds']:.1f}s ({report['chunks_per_s']} chunks/s)"
        )
        for failure in summary.results:
            if failure.status != "failed":
                continue
            error_console.print(
                f"[yellow]failed[/] {escape(str(failure.source))}: {escape(str(failure.reason))}",
                highlight=False,
                soft_wrap=True,  # one line per file, however long its path
            )
    if report["failed"]:
        error_console.print(
            f"[bold red]error:[/] {report['failed']} of {report['files']} files failed to ingest"
            + ("" if as_json else " (listed above)"),
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_FILES_FAILED)


#: The longer options of `rag search`, declared once as types so the command's signature stays short.
SearchFilterOption = Annotated[
    str | None, typer.Option("--filter", help='Metadata filter, e.g. \'{"doc_type": "pdf"}\'.')
]
SearchDirOption = Annotated[
    str | None,
    typer.Option(
        "--dir", help="Only documents under this directory (whole path components; relative to here)."
    ),
]
SearchLocalOption = Annotated[
    bool,
    typer.Option("--local", help="Search here even when a `rag serve` of this data directory is running."),
]


def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int | None, typer.Option("--k", help="Number of results.")] = None,
    mode: Annotated[str | None, typer.Option(help="dense | bm25 | hybrid.")] = None,
    filter_json: SearchFilterOption = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant to search (one per search).")] = None,
    collection: Annotated[list[str] | None, typer.Option(help="Restrict to these collections.")] = None,
    mmr: Annotated[bool | None, typer.Option(help="Diversify results with MMR.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    directory: SearchDirOption = None,
    local: SearchLocalOption = False,
) -> None:
    """Search the indexed documents (the mock retriever's passages with RAG_RETRIEVER=mock); through a
    running `rag serve` of the same data directory when one answers (--local: always here)."""
    from retrieval.directory_scope import cli_directory
    from retrieval.filters import parse_filter
    from retrieval.search import search_mode
    from service.cli.server_handoff import handoff_server, search_on_server

    settings = settings_or_exit()
    with user_errors():
        checked_mode = search_mode(mode) if mode is not None else None  # QueryError names the choices
        parse_filter(filter_json, max_conditions=settings.filter_max_conditions)  # before opening a store
        # a running `rag serve` of this data directory searches (its route takes no --mmr, one collection)
        server = handoff_server(settings, local) if mmr is None and len(collection or []) <= 1 else None
        if server is not None:
            result = search_on_server(
                server,
                settings,
                query,
                k=k,
                mode=mode,
                filters=json.loads(filter_json) if filter_json else None,
                tenant=tenant,
                collection=collection[0] if collection else None,
                directory=cli_directory(directory) if directory is not None else None,
            )
        else:
            result = _search_here(
                settings,
                query,
                k=k,
                mode=checked_mode,
                filter_json=filter_json,
                tenant=tenant,
                collection=collection,
                mmr=mmr,
                directory=directory,
            )
    if as_json:
        _print_search_json(query, result, settings)
        return
    if not result.hits:
        console.print("no results")
        return
    _print_search_table(result)


def _search_here(
    settings: Settings,
    query: str,
    *,
    k: int | None,
    mode: SearchMode | None,
    filter_json: str | None,
    tenant: str | None,
    collection: list[str] | None,
    mmr: bool | None,
    directory: str | None,
) -> SearchResult:
    """Search in this process (the mock retriever with RAG_RETRIEVER=mock, else the knowledge base)."""
    from retrieval.directory_scope import cli_directory
    from retrieval.knowledge_base import KnowledgeBase
    from retrieval.mock_retriever import MockSearcher
    from retrieval.search import PassageSearcher, Searcher

    searcher: PassageSearcher
    if settings.retriever == "mock":
        searcher = MockSearcher(settings)
    else:  # a lost vector store: one warning line, once
        searcher = Searcher(checked_store(KnowledgeBase.open(settings)))
    return searcher.search(
        query,
        k=k,
        mode=mode,
        filters=filter_json,
        tenant=tenant,
        collections=collection,
        mmr=mmr,
        directory=cli_directory(directory) if directory is not None else None,
    )


def _print_search_json(query: str, result: SearchResult, settings: Settings) -> None:
    """`rag search --json`: the hits with their scores and metadata, sources in public form."""
    from retrieval.public_source import public_metadata

    payload = {
        "query": query,
        "timings_ms": {key: round(value, 2) for key, value in result.timings_ms.items()},
        "hits": [
            {
                "chunk_id": hit.chunk_id,
                "score": hit.score,
                "dense_score": hit.dense_score,
                "bm25_score": hit.bm25_score,
                "text": hit.text,
                # the source and doc id in public form, as the API shows them (never a server path)
                "metadata": public_metadata(
                    hit.metadata, tenant=str(hit.metadata.get("tenant", "")), data_dir=settings.data_dir
                ),
            }
            for hit in result.hits
        ],
    }
    print_json(payload)


def _print_search_table(result: SearchResult) -> None:
    """The hits as a table: rank, score, file name (and page) and the start of the passage."""
    table = Table(show_lines=True)
    for column in ("#", "score", "source", "text"):
        table.add_column(column)
    for rank, hit in enumerate(result.hits, start=1):
        page = hit.metadata.get("page", -1)
        where = Path(str(hit.metadata.get("source", ""))).name + (
            f" p.{page}" if isinstance(page, int) and page > 0 else ""
        )
        table.add_row(str(rank), f"{hit.score:.4f}", escape(where), escape(hit.text[:300]))
    console.print(table)
