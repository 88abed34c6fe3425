"""`rag stats`: the engine's figures, from a running API's /metrics or, with no server, from the tables.

The metrics count what one server process saw; the tables (persistence.answer_stats) hold every recorded
answer and answer with no server. `--local` or `--tenant` read the tables; otherwise the API, falling back
to the tables when the default address does not answer (a `--url` that does not answer is an error: other
figures would pass for that server's).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Annotated, Any

import typer
from rich.table import Table

from config.settings import Settings
from service.cli.common import (
    EXIT_UNAVAILABLE,
    checked_store,
    console,
    fail,
    print_json,
    settings_or_exit,
    user_errors,
    warning,
)

#: Seconds `rag stats` waits for the server's /metrics.
STATS_TIMEOUT_S = 10


class ServerUnavailable(Exception):
    """No API answered at the address (its one-line reason)."""


def configuration(settings: Settings) -> dict[str, Any]:
    """The settings a reader of the figures needs to know what produced them (no credentials)."""
    from sqlalchemy.engine import make_url

    from persistence.database import database_url

    try:
        database = make_url(database_url(settings)).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is reported when the tables are opened
        database = "(invalid RAG_DATABASE_URL)"
    return {
        "llm_provider": settings.llm_provider,
        "llm_model": settings.llm_model,
        "grader_model": settings.grader_model or settings.llm_model,
        # the model name is the OpenAI-compatible provider's; the embedded providers are named by themselves
        "embedding": (
            f"openai:{settings.embedding_model}"
            if settings.embedding_provider == "openai"
            else settings.embedding_provider
        ),
        "mode": settings.mode,
        "top_k": settings.top_k,
        "cache_enabled": settings.cache_enabled,
        "record_turns": settings.record_turns,
        "database": database,
        "data_dir": str(settings.data_dir),
        "price_prompt_per_1k": settings.price_prompt_per_1k,
        "price_completion_per_1k": settings.price_completion_per_1k,
    }


def server_figures(base: str, settings: Settings) -> dict[str, Any]:
    """The figures of the API at `base` (ServerUnavailable when nothing answers)."""
    from persistence.answer_stats import Prices
    from service.api.metrics import summarize

    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=STATS_TIMEOUT_S) as reply:
            figures = summarize(reply.read().decode("utf-8"))
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise ServerUnavailable(f"cannot read {base}/metrics: {getattr(error, 'reason', error)}") from None
    tokens = figures["tokens"]
    cost = Prices.of(settings).cost(tokens.get("prompt", 0.0), tokens.get("completion", 0.0))
    if cost is not None:
        figures["cost"] = cost
    return {"source": "api", "url": base, **figures}


def table_figures(settings: Settings, tenant: str | None) -> dict[str, Any]:
    """The figures of the recorded answers (persistence.answer_stats), of one tenant or all."""
    from persistence.answer_stats import Prices, answer_stats
    from persistence.database import get_database

    stats = answer_stats(get_database(settings), tenant=tenant, prices=Prices.of(settings))
    return {"source": "tables", **stats}


def _print_server(figures: dict[str, Any]) -> None:
    table = Table(title=f"rag stats ({figures['url']})")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("requests", f"{figures['requests']:g}")
    for group in ("answers", "errors", "strategies", "cache", "tokens", "feedback"):
        for name, value in sorted(figures.get(group, {}).items()):
            table.add_row(f"{group} {name}", f"{value:g}")
    if figures["cache_hit_rate"] is not None:
        table.add_row("cache hit rate", f"{figures['cache_hit_rate']:.2%}")
    if "cost" in figures:
        table.add_row("token cost", f"{figures['cost']:.4f}")
    for stage, ms in figures["stage_mean_ms"].items():
        table.add_row(f"mean ms {stage}", f"{ms:.1f}")
    table.add_row("indexed documents", str(figures["index"]["documents"]))
    table.add_row("indexed chunks", str(figures["index"]["chunks"]))
    console.print(table)


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _print_tables(figures: dict[str, Any]) -> None:
    scope = f"tenant {figures['tenant']}" if figures["tenant"] else "every tenant"
    priced = "cost" in figures
    strategies = Table(title=f"rag stats: recorded answers, {scope} (tables, no server)")
    columns = (
        "strategy",
        "answers",
        "mean ms",
        "mean confidence",
        "prompt tok.",
        "completion tok.",
        "up",
        "down",
    )
    for column in columns:
        strategies.add_column(column, justify="left" if column == "strategy" else "right")
    if priced:
        strategies.add_column("cost", justify="right")
    for name, group in figures["strategies"].items():
        row = [
            name,
            str(group["answers"]),
            _number(group["mean_latency_ms"], ".1f"),
            _number(group["mean_confidence"], ".3f"),
            str(group["prompt_tokens"]),
            str(group["completion_tokens"]),
            str(group["feedback_up"]),
            str(group["feedback_down"]),
        ]
        strategies.add_row(*row, *([f"{group['cost']:.4f}"] if priced else []))
    console.print(strategies)
    totals = Table(show_header=False)
    totals.add_column("figure")
    totals.add_column("value", justify="right")
    totals.add_row("answers", str(figures["answers"]))
    totals.add_row("not found", str(figures["not_found"]))
    totals.add_row("cache hits", str(figures["cache_hits"]))
    rated = figures["feedback"]
    totals.add_row("feedback up / down (comments)", f"{rated['up']} / {rated['down']} ({rated['comments']})")
    for model, answers in figures["models"].items():
        totals.add_row(f"model {model}", str(answers))
    totals.add_row(
        "tokens prompt / completion", f"{figures['tokens']['prompt']} / {figures['tokens']['completion']}"
    )
    if priced:
        totals.add_row("token cost", f"{figures['cost']:.4f}")
    totals.add_row("indexed documents", str(figures["index"]["documents"]))
    totals.add_row("indexed chunks", str(figures["index"]["chunks"]))
    for name, value in figures["configuration"].items():
        totals.add_row(f"setting {name}", "-" if value is None else str(value))
    console.print(totals)


def stats(
    url: Annotated[
        str | None, typer.Option(help="Base URL of a running API (default: RAG_API_HOST:PORT).")
    ] = None,
    local: Annotated[
        bool, typer.Option("--local", help="Read the tables; contact no server (also when none answers).")
    ] = False,
    tenant: Annotated[
        str | None, typer.Option(help="Only this tenant's answers (read from the tables).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """The engine's figures: a running API's /metrics, or (--local, --tenant, no server answering) the
    recorded answers in the tables with the configuration; plus the indexed documents and chunks."""
    from persistence.vector_store import validate_collection_name
    from retrieval.knowledge_base import KnowledgeBase

    settings = settings_or_exit()
    if tenant is not None:
        try:
            validate_collection_name(tenant, "tenant")
        except ValueError as error:
            fail(f"--tenant: {error}")
    figures: dict[str, Any] | None = None
    if not local and tenant is None:
        base = (url or f"http://{settings.api_host}:{settings.api_port}").rstrip("/")
        try:
            figures = server_figures(base, settings)
        except ServerUnavailable as error:
            if url is not None:
                fail(str(error), EXIT_UNAVAILABLE)
            warning(f"{error}; figures from the tables instead (--local)")
    elif url is not None:
        fail("--url reads a server's metrics: leave it out with --local or --tenant")
    with user_errors():
        if figures is None:
            figures = {**table_figures(settings, tenant), "configuration": configuration(settings)}
        catalog = checked_store(KnowledgeBase.open(settings)).catalog
        figures["index"] = {
            "documents": len(catalog.documents(tenant=tenant)),
            "chunks": catalog.count_chunks(tenant=tenant),
        }
    if as_json:
        print_json(figures)
    elif figures["source"] == "api":
        _print_server(figures)
    else:
        _print_tables(figures)
