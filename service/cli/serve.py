"""`rag serve` (the HTTP API with uvicorn), `rag delete` (documents, collections, conversations) and
`rag eval load` (the API under concurrent clients); `rag stats` is service/cli/stats.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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


def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on (RAG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (RAG_API_PORT).")] = None,
) -> None:
    """Serve the HTTP API: generate, generate/stream and generate/events (SSE), batch, documents, health
    and metrics."""
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


def eval_load(
    url: Annotated[str, typer.Option(help="Base URL of a running API (rag serve).")],
    clients: Annotated[int, typer.Option(help="Concurrent clients.")] = 16,
    requests: Annotated[int, typer.Option(help="Requests of the load phase, in total.")] = 160,
    questions: Annotated[int, typer.Option(help="Distinct questions (the first of --questions-file).")] = 4,
    questions_file: Annotated[
        Path | None,
        typer.Option(help='JSONL of {"question": ...} to send (default: samples/questions.jsonl).'),
    ] = None,
    uncached_requests: Annotated[
        int | None,
        typer.Option(help="Requests of the uncached phase (cache bypassed; default = --clients; 0 = skip)."),
    ] = None,
    max_tokens: Annotated[int | None, typer.Option(help="max_tokens of every request.")] = None,
    api_key: Annotated[str | None, typer.Option(help="X-API-Key header, when the API has keys.")] = None,
    route: Annotated[
        str,
        typer.Option(help="generate (JSON) | stream (SSE, read to its done event) | batch (one item each)."),
    ] = "generate",
    json_out: JsonReportOption = None,
) -> None:
    """Throughput, p50/p95, errors, and cold vs cache-hit latency of the HTTP API under N clients."""
    from evals.load import DEFAULT_QUESTIONS, load_route, run_load
    from service.cli.common import error_console, write_json_report

    payload = {"max_tokens": max_tokens} if max_tokens else {}
    questions_file = questions_file or DEFAULT_QUESTIONS
    if not questions_file.is_file():
        fail(f"questions file not found: {questions_file} (--questions-file)")
    try:
        report = run_load(
            url,
            clients=clients,
            requests=requests,
            questions=questions,
            questions_file=questions_file,
            uncached_requests=uncached_requests,
            payload=payload,
            headers={"X-API-Key": api_key} if api_key else None,
            progress=lambda line: error_console.print(line, highlight=False),
            route=load_route(route),  # a ValueError names the choices
        )
    except ValueError as error:
        fail(str(error))
    except (ConnectionError, OSError) as error:
        fail(f"cannot load-test {url}: {error}", EXIT_UNAVAILABLE)
    write_json_report(json_out, report)
    _print_load_report(report, route=route, clients=clients)


def _print_load_report(report: dict[str, Any], *, route: str, clients: int) -> None:
    """The load test's phases as a table, then the cache-hit ratios, errors and targets."""
    table = Table(
        title=f"load on {route}: {clients} clients, {report['load']['requests']} requests "
        f"({report['machine']})"
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
