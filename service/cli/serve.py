"""`rag serve` (the HTTP API with uvicorn), `rag delete` (documents, collections, conversations) and
`rag stats` (the API's metrics as figures, plus what is indexed)."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Annotated

import typer
from rich.table import Table

from service.cli.common import (
    EXIT_UNAVAILABLE,
    JsonReportOption,
    checked_store,
    console,
    fail,
    print_json,
    settings_or_exit,
    user_errors,
)

#: Seconds `rag stats` waits for the server's /metrics.
STATS_TIMEOUT_S = 10


def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on (RAG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (RAG_API_PORT).")] = None,
) -> None:
    """Serve the HTTP API: generate, generate/stream (SSE), batch, documents, health and metrics."""
    import uvicorn

    from service.api.app import create_app

    settings = settings_or_exit()
    with user_errors():
        app = create_app(settings)
    uvicorn.run(app, host=host or settings.api_host, port=port or settings.api_port, log_level="info")


def delete(
    source: Annotated[str | None, typer.Option(help="A document's source (its path, or text:KEY).")] = None,
    doc_id: Annotated[str | None, typer.Option(help="A document id (a JSON record's id).")] = None,
    collection: Annotated[
        str | None, typer.Option(help="A collection (alone: the whole collection).")
    ] = None,
    conversation: Annotated[str | None, typer.Option(help="Every chunk of this conversation id.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant whose content is deleted.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Delete indexed content: a document, a collection or a conversation (from every index at once)."""
    from retrieval.deletion import delete_content
    from retrieval.knowledge_base import KnowledgeBase

    if not any((source, doc_id, collection, conversation)):
        fail("give --source, --doc-id, --collection or --conversation")
    settings = settings_or_exit()
    with user_errors():
        kb = checked_store(KnowledgeBase.open(settings))  # a damaged catalog: its one line, exit 1
        summary = delete_content(
            kb,
            tenant or settings.default_tenant,
            source=source,
            doc_id=doc_id,
            collection=collection,
            conversation_id=conversation,
        )
    if as_json:
        print_json(summary.as_dict())
    elif not summary.chunks and not summary.documents:
        fail("nothing matched: no document, collection or conversation deleted")
    else:
        console.print(f"deleted {summary.documents} documents, {summary.chunks} chunks")


def stats(
    url: Annotated[
        str | None, typer.Option(help="Base URL of a running API (default: RAG_API_HOST:PORT).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """The API's figures from its /metrics (requests, errors, answers, strategies, cache, tokens, stage
    latencies) and the indexed documents and chunks of this data folder."""
    from retrieval.knowledge_base import KnowledgeBase
    from service.api.metrics import summarize

    settings = settings_or_exit()
    base = (url or f"http://{settings.api_host}:{settings.api_port}").rstrip("/")
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=STATS_TIMEOUT_S) as reply:
            figures = summarize(reply.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError) as error:
        fail(f"cannot read {base}/metrics: {getattr(error, 'reason', error)}", EXIT_UNAVAILABLE)
    with user_errors():
        catalog = checked_store(KnowledgeBase.open(settings)).catalog
        figures["index"] = {"documents": len(catalog.documents()), "chunks": catalog.count_chunks()}
    if as_json:
        print_json(figures)
        return
    table = Table(title=f"rag stats ({base})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("requests", f"{figures['requests']:g}")
    for group in ("answers", "errors", "strategies", "cache", "tokens"):
        for name, value in sorted(figures[group].items()):
            table.add_row(f"{group} {name}", f"{value:g}")
    if figures["cache_hit_rate"] is not None:
        table.add_row("cache hit rate", f"{figures['cache_hit_rate']:.2%}")
    for stage, ms in figures["stage_mean_ms"].items():
        table.add_row(f"mean ms {stage}", f"{ms:.1f}")
    table.add_row("indexed documents", str(figures["index"]["documents"]))
    table.add_row("indexed chunks", str(figures["index"]["chunks"]))
    console.print(table)


def eval_load(
    url: Annotated[str, typer.Option(help="Base URL of a running API (rag serve).")],
    clients: Annotated[int, typer.Option(help="Concurrent clients.")] = 16,
    requests: Annotated[int, typer.Option(help="Requests of the load phase, in total.")] = 160,
    questions: Annotated[int, typer.Option(help="Distinct questions (samples/questions.jsonl).")] = 4,
    uncached_requests: Annotated[
        int | None,
        typer.Option(help="Requests of the uncached phase (cache bypassed; default = --clients; 0 = skip)."),
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="max_tokens of every request.")] = None,
    api_key: Annotated[str | None, typer.Option(help="X-API-Key header, when the API has keys.")] = None,
    json_out: JsonReportOption = None,
) -> None:
    """Throughput, p50/p95, errors, and cold vs cache-hit latency of the HTTP API under N clients."""
    from evals.load import run_load
    from service.cli.common import error_console, write_json_report

    payload = {"max_tokens": max_tokens} if max_tokens else {}
    try:
        report = run_load(
            url,
            clients=clients,
            requests=requests,
            questions=questions,
            uncached_requests=uncached_requests,
            payload=payload,
            headers={"X-API-Key": api_key} if api_key else None,
            progress=lambda line: error_console.print(line, highlight=False),
        )
    except ValueError as error:
        fail(str(error))
    except (ConnectionError, OSError) as error:
        fail(f"cannot load-test {url}: {error}", EXIT_UNAVAILABLE)
    write_json_report(json_out, report)
    table = Table(
        title=f"load: {clients} clients, {report['load']['requests']} requests ({report['machine']})"
    )
    for column in ("phase", "requests", "errors", "p50 ms", "p95 ms", "req/s"):
        table.add_column(column, justify="right")
    phases = (
        ("cold", "cold"),
        ("cache hits alone", "cache_hit_alone"),
        ("load", "load"),
        ("cache hits under load", "cache_hit"),
        ("uncached load", "uncached_load"),
    )
    for name, key in phases:
        part = report[key]
        if part is None:
            continue
        table.add_row(
            name,
            str(part["requests"]),
            str(part["errors"]),
            "-" if part["p50_ms"] is None else f"{part['p50_ms']:.1f}",
            "-" if part["p95_ms"] is None else f"{part['p95_ms']:.1f}",
            f"{part.get('throughput_rps') or '-'}",
        )
    console.print(table)
    ratio, loaded = report["hit_to_cold_p50_ratio"], report["hit_under_load_to_cold_p50_ratio"]
    console.print(
        f"cache hits {report['load']['cache_hits']} / misses {report['load']['cache_misses']}; "
        f"hit p50 / cold p50 = {'-' if ratio is None else f'{ratio:.2%}'} alone, "
        f"{'-' if loaded is None else f'{loaded:.2%}'} under load; "
        f"errors by status {report['errors_by_status'] or '{}'}; targets {report['targets']}",
        highlight=False,
    )
