"""The `rag` command line: ingest, search, ask, chat, threads and evaluations.

Every command turns bad input into one clear line on stderr and exit code 2 (1 for a store or model that is
down), never a stack trace; `--help` on every command documents its options.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from config.settings import SearchMode, Settings, SettingsError, load_settings
from evals.report import DEFAULT_RESULTS_DIR
from service.cli_memory import memory_app
from service.cli_summarize import summarize
from service.doctor import doctor

app = typer.Typer(
    help="Agentic RAG engine: ingest your documents, search them, ask questions with cited answers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
eval_app = typer.Typer(
    help="Benchmarks: retrieval quality and speed, graph latency, QA, routing, relevance graders.",
    no_args_is_help=True,
)
app.add_typer(eval_app, name="eval")
app.command("summarize")(summarize)
app.command("doctor")(doctor)
app.add_typer(memory_app, name="memory")

console = Console()
error_console = Console(stderr=True)

#: Exit codes: 2 = the user's input was wrong; 1 = a store or model could not be used.
EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 1
#: Exit code of `rag ingest` when any file failed to load (the others are indexed; each failure is listed).
EXIT_FILES_FAILED = 1
#: Largest --top-k of `rag eval graders` (the context's own bound on top_k).
MAX_GRADED_TOP_K = 100


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print one error line and exit.

    The message is escaped because it often quotes user input (a filter, a path), which rich would
    otherwise read as markup ("[/x]" raises MarkupError); soft wrap keeps it one line at any width.
    """
    error_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def warning(message: str) -> None:
    """Print one warning line on stderr (escaped and unwrapped, like `fail`)."""
    error_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the engine's documented errors into clear one-line messages."""
    from models.errors import ModelUnavailableError
    from persistence.thread_lock import ThreadBusyError
    from persistence.threads import ThreadAccessError
    from persistence.vector_store import StoreUnavailableError
    from retrieval.embeddings import EmbeddingError

    try:
        yield
    except (StoreUnavailableError, EmbeddingError, ModelUnavailableError, ThreadBusyError) as error:
        fail(str(error), EXIT_UNAVAILABLE)
    except ThreadAccessError as error:  # another tenant's thread: the caller's input was wrong
        fail(str(error))
    except (ValueError, FileNotFoundError) as error:  # settings, filters, queries, names, dataset formats
        fail(str(error))


def write_json_report(path: Path | None, report: dict[str, object]) -> None:
    """Write a benchmark report as JSON when a path was given."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


def settings_or_exit(**overrides: object) -> Settings:
    """Settings from the environment, or a clear error naming the variable."""
    try:
        return load_settings(**{key: value for key, value in overrides.items() if value is not None})
    except SettingsError as error:
        fail(str(error))


@contextmanager
def progress_bars() -> Iterator[Callable[[str, int], Callable[[int], None]]]:
    """A factory of rich progress bars: `bar = factory(label, total)` then `bar(n)` advances it."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=error_console,
        transient=False,
        disable=not error_console.is_terminal,
    ) as progress:

        def factory(label: str, total: int) -> Callable[[int], None]:
            task = progress.add_task(label, total=total or None)
            return lambda n: progress.advance(task, n)

        yield factory


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")] = False,
) -> None:
    """Configure logging for every command."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


@app.command()
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
    from retrieval.knowledge_base import KnowledgeBase

    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        kb = KnowledgeBase.open(settings)
        bar_files: dict[str, Callable[[int], None]] = {}

        def on_files(files: list[Path]) -> None:
            bar_files["file"] = bars("files", len(files))
            bar_files["chunks"] = bars("chunks embedded", 0)

        summary = ingest_paths(
            kb,
            paths,
            collection=collection,
            tenant=tenant,
            prune=prune,
            progress=lambda event, n: bar_files[event](n),
            on_files=on_files,
        )
    report = summary.as_dict()
    if summary.vectors_restored:
        warning(f"restored {summary.vectors_restored} vectors the vector store had lost (from the catalog)")
    if as_json:
        console.print_json(json.dumps(report))
    else:
        console.print(
            f"files {report['files']}  indexed {report['indexed']}  chunks {report['chunks']}  "
            f"skipped {report['skipped']}  failed {report['failed']}  pruned {report['pruned']}  "
            f"in {report['seconds']:.1f}s ({report['chunks_per_s']} chunks/s)"
        )
        for failure in report["failures"]:  # type: ignore[union-attr]
            error_console.print(
                f"[yellow]failed[/] {escape(str(failure['source']))}: {escape(str(failure['reason']))}",
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


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int | None, typer.Option("--k", help="Number of results.")] = None,
    mode: Annotated[str | None, typer.Option(help="dense | bm25 | hybrid.")] = None,
    filter_json: Annotated[
        str | None, typer.Option("--filter", help='Metadata filter, e.g. \'{"doc_type": "pdf"}\'.')
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant to search (one per search).")] = None,
    collection: Annotated[list[str] | None, typer.Option(help="Restrict to these collections.")] = None,
    mmr: Annotated[bool | None, typer.Option(help="Diversify results with MMR.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
) -> None:
    """Search the indexed documents."""
    from retrieval.knowledge_base import KnowledgeBase
    from retrieval.search import QueryError, Searcher

    settings = settings_or_exit()
    with user_errors():
        if mode is not None and mode not in ("dense", "bm25", "hybrid"):
            raise QueryError(f"unknown search mode {mode!r}; choose one of dense, bm25, hybrid")
        kb = KnowledgeBase.open(settings)
        kb.warn = warning  # a vector store that lost chunks is reported on stderr, once
        result = Searcher(kb).search(
            query,
            k=k,
            mode=mode,
            filters=filter_json,
            tenant=tenant,
            collections=collection,
            mmr=mmr,  # type: ignore[arg-type]
        )
    if as_json:
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
                    "metadata": hit.metadata,
                }
                for hit in result.hits
            ],
        }
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
        return
    if not result.hits:
        console.print("no results")
        return
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


threads_app = typer.Typer(help="Conversations stored in the checkpoint file.", no_args_is_help=True)
app.add_typer(threads_app, name="threads")


def _context(
    mode: str | None, tenant: str | None, collection: str | None, max_iterations: int | None
) -> object:
    from state.context import Context

    overrides = {"mode": mode, "tenant": tenant, "collection": collection, "max_iterations": max_iterations}
    try:
        return Context(**{key: value for key, value in overrides.items() if value is not None})
    except ValueError as error:
        fail(str(error))


def _print_answer(result: dict[str, object], prefix: str = "") -> None:
    """The stored answer (once), a warning line for each reason not to trust it, sources and strategy."""
    from service.answer_warnings import answer_warnings

    if prefix:
        console.print(prefix, end="")
    console.print(str(result.get("answer", "")), highlight=False, markup=False)
    for item in answer_warnings(result):
        console.print(f"[bold yellow]warning:[/] {escape(item['message'])}", highlight=False, soft_wrap=True)
    citations = result.get("citations") or []
    if citations:
        console.print("\n[bold]Sources[/]")
        for citation in citations:  # type: ignore[union-attr]
            page = citation.get("page", -1)
            where = Path(str(citation.get("source", ""))).name + (f" p.{page}" if page and page > 0 else "")
            flag = " (inferred)" if citation.get("inferred") else ""
            console.print(
                f"  \\[{citation['marker']}] {escape(str(citation.get('title') or where))} — {escape(where)} "
                f"(confidence {citation.get('confidence', 0):.2f}){flag}",
                highlight=False,
            )
    retrieval_rounds, answer_rounds = result.get("retrieval_rounds", 0), result.get("generation_rounds", 0)
    rounds = f"{retrieval_rounds} retrieval / {answer_rounds} answer rounds"
    strategy = result.get("strategy") or "-"
    console.print(f"[dim]strategy {strategy} · {rounds} · thread {result.get('thread_id')}[/]")


#: `--conversation-id` of ask and chat: the graph input `conversation_id` (retrieval scoped to it).
CONVERSATION_OPTION = typer.Option(
    "--conversation-id",
    help="Search only this conversation's documents (its events and summaries); RAG_CROSS_CONVERSATION_SHARE "
    "> 0 adds a minority from other conversations.",
)


def conversation_input(conversation_id: str | None) -> dict[str, str]:
    """The graph input for `--conversation-id` (none when omitted: a thread keeps its earlier one)."""
    if conversation_id is None:
        return {}
    if not conversation_id.strip():
        fail("--conversation-id is empty")
    return {"conversation_id": conversation_id.strip()}


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    thread: Annotated[
        str | None, typer.Option("--thread", help="Conversation id (new one if omitted).")
    ] = None,
    graph: Annotated[str, typer.Option(help="rag (agentic) | baseline (naive RAG).")] = "rag",
    mode: Annotated[
        str | None, typer.Option(help="Answer template: auto | simple | advanced | precise.")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant whose documents are searched.")] = None,
    collection: Annotated[str | None, typer.Option(help="Collection to search.")] = None,
    filter_json: Annotated[str | None, typer.Option("--filter", help="Metadata filter (JSON).")] = None,
    max_iterations: Annotated[int | None, typer.Option(help="Bound of the Self-RAG loops.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the output state as JSON.")] = False,
    conversation_id: Annotated[str | None, CONVERSATION_OPTION] = None,
) -> None:
    """Answer a question from the indexed documents, with citations; follow-ups with --thread.
    Unsupported sentences and citations the model did not give itself are shown as warnings."""
    from retrieval.filters import parse_filter
    from service.answer_warnings import answer_warnings
    from service.runner import Session, output_json

    if graph not in ("rag", "baseline"):
        fail(f"unknown graph {graph!r}; choose rag or baseline")
    settings = settings_or_exit()
    context = _context(mode, tenant, collection, max_iterations)
    with user_errors():
        filters = parse_filter(filter_json) and json.loads(filter_json or "{}")
        session = Session(settings, graph_name=graph, interface="cli")  # type: ignore[arg-type]
        try:
            result = session.ask(
                question,
                thread_id=thread,
                context=context,  # type: ignore[arg-type]
                filters=filters or {},
                **conversation_input(conversation_id),
            )
        except ValueError as error:
            fail(str(error))
    if as_json:
        payload = {**output_json(result), "warnings": answer_warnings(result)}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        _print_answer(result)


def _chat_turn(
    session: Any, question: str, *, thread_id: str, context: object, inputs: dict[str, str]
) -> dict[str, Any]:
    """Run one chat turn, showing the answer being written as a preview; return the output state.

    Why a preview that disappears: the streamed tokens are a draft, which `cite` renumbers and cleans, a
    regeneration replaces, or the extractive fallback replaces entirely. Printing the stream and then the
    stored answer showed two different answers per turn. The preview is erased when the turn ends (and
    never written when stdout is not a terminal), so the one answer printed is the stored one.
    """
    from rich.live import Live
    from rich.text import Text

    draft: list[str] = []
    result: dict[str, Any] = {}
    with Live(Text(""), console=console, transient=True, refresh_per_second=8) as preview:
        for kind, payload in session.stream(
            question, thread_id=thread_id, context=context, events=True, **inputs
        ):
            if kind == "token":
                draft.append(payload)
                preview.update(Text("rag (writing)> " + "".join(draft), style="dim"))
            elif kind == "event" and payload.get("event") == "generation_start":
                draft.clear()  # a new attempt replaces the previous draft
            elif kind == "result":
                result = payload
    return result


@app.command()
def chat(
    thread: Annotated[str | None, typer.Option("--thread", help="Continue this conversation.")] = None,
    mode: Annotated[
        str | None, typer.Option(help="Answer template: auto | simple | advanced | precise.")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant whose documents are searched.")] = None,
    conversation_id: Annotated[str | None, CONVERSATION_OPTION] = None,
) -> None:
    """Interactive conversation: one answer per turn (the stored one; a preview shows it being written on a
    terminal), with its warnings, citations and strategy. A turn with no evidence in the documents is
    answered from the conversation (chat mode). A model or store that is down ends the chat with exit 1."""
    from dataclasses import replace

    from persistence.thread_lock import ThreadBusyError
    from service.runner import Session, new_thread_id

    settings = settings_or_exit()
    context = replace(_context(mode, tenant, None, None), answer_source="chat")  # type: ignore[type-var]
    extra_inputs = conversation_input(conversation_id)
    thread_id = thread or new_thread_id()
    with user_errors():
        session = Session(settings, interface="cli")
        session.check_access(thread_id, context.tenant)  # another tenant's thread: refused before any turn
    console.print(f"[dim]thread {thread_id} — empty line or Ctrl-D to quit[/]")
    while True:
        try:
            question = console.input("[bold green]you>[/] ")
        except (EOFError, KeyboardInterrupt):
            break
        if not question.strip():
            break
        with user_errors():  # a model or store that is down: exit 1; another tenant's thread: exit 2
            try:
                result = _chat_turn(
                    session, question, thread_id=thread_id, context=context, inputs=extra_inputs
                )
            except (ValueError, ThreadBusyError) as error:  # this turn only: the next one may succeed
                error_console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
                continue
        _print_answer(result, prefix="[bold blue]rag>[/] ")


#: `--tenant` of the `rag threads` commands: each lists and acts on one tenant's threads only.
THREADS_TENANT_OPTION = typer.Option(
    "--tenant", help="Tenant whose threads these are (default: the default tenant, as for rag ask)."
)


def _threads_tenant(tenant: str | None) -> str:
    """The tenant of a `rag threads` command: --tenant, else the one `rag ask` runs as without it."""
    if tenant is not None and not tenant.strip():
        fail("--tenant is empty")
    return str(_context(None, tenant, None, None).tenant)  # type: ignore[attr-defined]


@threads_app.command("list")
def threads_list(tenant: Annotated[str | None, THREADS_TENANT_OPTION] = None) -> None:
    """The tenant's conversations, most recent first."""
    from persistence.threads import list_threads

    settings = settings_or_exit()
    owner = _threads_tenant(tenant)
    with user_errors():
        threads = list_threads(settings.checkpoint_path, owner)
    for summary in threads:
        console.print(f"{summary.thread_id}  {summary.checkpoints} checkpoints", highlight=False)
    if not threads:
        console.print("no threads")


@threads_app.command("show")
def threads_show(
    thread_id: Annotated[str, typer.Argument(help="Conversation id.")],
    tenant: Annotated[str | None, THREADS_TENANT_OPTION] = None,
) -> None:
    """The messages of one of the tenant's conversations."""
    from service.runner import Session

    settings = settings_or_exit()
    owner = _threads_tenant(tenant)
    with user_errors():
        values = Session(settings).history(thread_id, tenant=owner)
    if not values:
        fail(f"unknown thread {thread_id!r}")
    for message in values.get("messages", []):
        console.print(f"[bold]{message.type}>[/] {escape(str(message.content))}", highlight=False)


@threads_app.command("delete")
def threads_delete(
    thread_id: Annotated[str, typer.Argument(help="Conversation id.")],
    tenant: Annotated[str | None, THREADS_TENANT_OPTION] = None,
) -> None:
    """Delete one of the tenant's conversations (after a turn running on it has finished)."""
    from persistence.thread_lock import remove_lock_file, thread_lock
    from persistence.threads import delete_thread

    settings = settings_or_exit()
    owner = _threads_tenant(tenant)
    with user_errors():
        if not settings.checkpoint_path.exists():
            raise FileNotFoundError(f"no checkpoint file at {settings.checkpoint_path} (no conversation yet)")
        with thread_lock(settings, thread_id):
            deleted = delete_thread(settings.checkpoint_path, thread_id, owner)
            if deleted:
                remove_lock_file(settings, thread_id)
    if not deleted:
        fail(f"unknown thread {thread_id!r}")
    console.print(f"deleted {thread_id}", highlight=False)


@threads_app.command("prune")
def threads_prune(
    keep: Annotated[int, typer.Option(help="Newest threads to keep.")] = 50,
    tenant: Annotated[str | None, THREADS_TENANT_OPTION] = None,
) -> None:
    """Keep the tenant's newest threads (each with its latest checkpoint only) so the file stays bounded;
    other tenants' threads are not touched."""
    from functools import partial

    from persistence.thread_lock import thread_lock
    from persistence.threads import prune_threads

    settings = settings_or_exit()
    owner = _threads_tenant(tenant)
    with user_errors():
        try:
            guard = partial(thread_lock, settings)  # a turn running on a thread finishes first
            removed = prune_threads(settings.checkpoint_path, keep, owner, guard=guard)
        except ValueError as error:
            fail(str(error))
    console.print(
        f"removed {removed['threads_removed']} threads and {removed['checkpoints_removed']} old checkpoints"
    )


@eval_app.command("retrieval")
def eval_retrieval(
    dataset: Annotated[Path, typer.Option(help="BEIR folder, or a CMRC 2018 / SQuAD-format file.")],
    mode: Annotated[
        list[str] | None, typer.Option(help="Modes to run (repeatable); default all three.")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N queries.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
) -> None:
    """Retrieval quality (nDCG@10, Recall@10/100, MRR@10) and speed per mode; ingest throughput."""
    from evals.retrieval import run_retrieval_eval

    settings = settings_or_exit()
    modes: list[SearchMode] = [m for m in (mode or ["bm25", "dense", "hybrid"])]  # type: ignore[misc]
    for name in modes:
        if name not in ("dense", "bm25", "hybrid"):
            fail(f"unknown search mode {name!r}; choose among dense, bm25, hybrid")
    with user_errors(), progress_bars() as bars:
        report = run_retrieval_eval(dataset, settings, modes=modes, limit=limit, progress=bars)
    write_json_report(json_out, report)
    table = Table(title=f"{report['dataset']}: {report['queries']} queries ({report['machine']})")
    metrics = [name for name in next(iter(report["modes"].values())) if name not in ("p50_ms", "p95_ms")]
    for column in ["mode", *metrics, "p50 ms", "p95 ms"]:
        table.add_column(column)
    for name, values in report["modes"].items():
        table.add_row(
            name, *[f"{values[m]:.3f}" for m in metrics], f"{values['p50_ms']:.1f}", f"{values['p95_ms']:.1f}"
        )
    console.print(table)
    console.print(
        f"ingest {report['chunks']} chunks at {report['ingest_chunks_per_s']} chunks/s; re-ingest "
        f"{report['reingest_seconds']}s ({report['reingest_speedup']}x faster); query embedding p50 "
        f"{report['embed_query_ms']} ms"
    )


@eval_app.command("latency")
def eval_latency(
    questions: Annotated[
        int, typer.Option(help="Questions to run (cycling through samples/questions.jsonl).")
    ] = 50,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
) -> None:
    """Per-node time and graph overhead (wall - model - retrieval) with the embedded model."""
    from evals.latency import run_latency_eval

    if questions < 1:
        fail("--questions must be at least 1")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_latency_eval(settings, questions=questions, progress=bars)
    write_json_report(json_out, report)
    table = Table(title=f"graph latency over {report['questions']} questions ({report['machine']})")
    table.add_column("node")
    table.add_column("mean ms per question", justify="right")
    for node, value in report["per_node_ms"].items():
        table.add_row(node, f"{value:.1f}")
    console.print(table)
    console.print(
        f"wall {report['wall_s']}s (model {report['model_s']}s, retrieval {report['retrieval_s']}s); "
        "overhead "
        f"{report['overhead_fraction'] * 100:.2f}% = {report['overhead_ms_per_question']} ms/question; "
        f"{report['llm_calls_per_question']} LLM calls/question"
    )


@eval_app.command("qa")
def eval_qa(
    dataset: Annotated[
        Path, typer.Option(help="HotpotQA file (JSON array or JSONL) or CMRC 2018 / SQuAD-format file.")
    ],
    pipeline: Annotated[str, typer.Option(help="naive | agentic | no-retrieval.")],
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N questions.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write qa_f1_vs_llm_calls.png into DIR from its QA JSON reports plus this run."),
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(
            help="Per-question JSONL, appended as questions finish; a rerun resumes from it. "
            "Default: evals/results/runs/<dataset>-<pipeline>-<limit>.jsonl."
        ),
    ] = None,
) -> None:
    """EM / F1, support recall, citation precision, not-found rate, LLM calls, tokens and latency of a
    pipeline over the pooled paragraphs of the evaluated questions."""
    from evals.qa import PIPELINES, run_qa_eval
    from evals.report import write_qa_plot

    if pipeline not in PIPELINES:
        fail(f"unknown pipeline {pipeline!r}; choose one of {', '.join(PIPELINES)}")
    if limit is not None and limit < 1:
        fail("--limit must be at least 1")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_qa_eval(
            dataset, settings, pipeline=pipeline, limit=limit, results_path=results, progress=bars
        )
    write_json_report(json_out, report)
    table = Table(
        title=f"{report['dataset']} · {report['pipeline']}: {report['n']} questions ({report['model']})"
    )
    for column in (
        "EM",
        "F1",
        "support R@5",
        "cit. precision",
        "not found",
        "LLM calls/q",
        "tokens/q",
        "p50 s",
    ):
        table.add_column(column, justify="right")
    table.add_row(
        *[
            "-" if report[key] is None else f"{report[key]:.3f}"
            for key in ("em", "f1", "support_recall@5", "citation_precision", "not_found_rate")
        ],
        f"{report['llm_calls_per_question']:.2f}",
        f"{report['tokens_per_question']:.0f}",
        "-" if report["latency_p50_s"] is None else f"{report['latency_p50_s']:.2f}",
    )
    console.print(table)
    for title, key in (("strategy", "by_strategy"), ("type", "by_type")):
        for group, values in report[key].items():
            console.print(
                f"  {title} {group}: n {values['n']}  EM {values['em']:.3f}  F1 {values['f1']:.3f}  "
                f"{values['llm_calls']:.2f} LLM calls",
                highlight=False,
            )
    if report["errors"]:
        error_console.print(f"[yellow]{report['errors']} questions failed[/] (see {report['results_file']})")
    console.print(f"[dim]per-question records: {report['results_file']} ({report['resumed']} resumed)[/]")
    if plot:
        written = write_qa_plot(plot, extra=[report])
        console.print(f"plot: {written}")


@eval_app.command("router")
def eval_router(
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
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
        typer.Option(help="Folder with hotpotqa/, beir-scifact/, cmrc2018/ (default: ../shared/data)."),
    ] = None,
) -> None:
    """Single- vs multi-hop accuracy of analyze + select_strategy: heuristic and model side by side."""
    from evals.router import DEFAULT_LLM_LIMIT, SHARED_DATA_DIR, run_router_eval

    if llm_limit is not None and llm_limit < 0:
        fail("--llm-limit must be at least 0")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_router_eval(
            settings,
            data_dir=data_dir or SHARED_DATA_DIR,
            extra=dataset or [],
            llm_limit=DEFAULT_LLM_LIMIT if llm_limit is None else llm_limit,
            progress=bars,
        )
    write_json_report(json_out, report)
    table = Table(title=f"router: {report['n']} labelled questions ({', '.join(report['sources'])})")
    for column in ("analyzer", "n", "accuracy", "single->multi", "multi->single"):
        table.add_column(column)
    rows = [("heuristic", report["n"], report["heuristic_accuracy"], report["confusion"]["heuristic"])]
    if report["llm_n"]:
        rows.append(("llm", report["llm_n"], report["llm_accuracy"], report["confusion"]["llm"]))
    for name, count, accuracy, matrix in rows:
        table.add_row(
            name,
            str(count),
            f"{accuracy:.3f}",
            str(matrix["single"]["multi"]),
            str(matrix["multi"]["single"]),
        )
    console.print(table)
    console.print(
        f"default analyzer {report['default_analyzer']}: accuracy {report['accuracy']:.3f}"
        + (
            f"; heuristic on the LLM subset {report['heuristic_accuracy_on_llm_subset']:.3f}, LLM fallbacks "
            f"{report['llm_fallback_rate']:.2f}, {report['llm_seconds_per_question']} s/question"
            if report["llm_n"]
            else ""
        ),
        highlight=False,
    )


@eval_app.command("report")
def eval_report(
    results_dir: Annotated[
        Path, typer.Option(help="Folder of the JSON reports; README.md and the PNGs are written there.")
    ] = DEFAULT_RESULTS_DIR,
) -> None:
    """Write README.md (tables) and PNG plots from the benchmarks' JSON reports."""
    from evals.report import write_report

    if not results_dir.is_dir():
        fail(f"results folder not found: {results_dir}")
    written = write_report(results_dir)
    counts = ", ".join(f"{count} {kind}" for kind, count in written["reports"].items())
    console.print(f"wrote {written['readme']} from {counts} report(s)")
    for path in written["plots"]:
        console.print(f"  {path}")


@eval_app.command("graders")
def eval_graders(
    dataset: Annotated[
        Path, typer.Option(help="HotpotQA file (JSON array or JSONL) or CMRC 2018 / SQuAD-format file.")
    ],
    limit: Annotated[int, typer.Option(help="Grade the passages of the first N questions.")] = 30,
    top_k: Annotated[int, typer.Option(help="Passages retrieved (and graded) per question, 1-100.")] = 8,
    no_llm: Annotated[
        bool, typer.Option("--no-llm", help="Measure only the score grader (no model call).")
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
) -> None:
    """Accuracy, precision, recall and F1 of the score and LLM relevance graders against the gold supporting
    passages, with their cost, over the pooled paragraphs of the evaluated questions."""
    from evals.graders import run_grader_eval

    if limit < 1:
        fail("--limit must be at least 1")
    if not 1 <= top_k <= MAX_GRADED_TOP_K:
        fail(f"--top-k must be between 1 and {MAX_GRADED_TOP_K}")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_grader_eval(dataset, settings, limit=limit, top_k=top_k, llm=not no_llm, progress=bars)
    write_json_report(json_out, report)
    table = Table(
        title=f"{report['dataset']}: {report['passages']} passages of {report['questions']} questions "
        f"(base rate {report['base_rate']}; {report['model']})"
    )
    for column in (
        "grader",
        "accuracy",
        "precision",
        "recall",
        "F1",
        "judged rel.",
        "LLM calls",
        "ms/q",
        "failed",
    ):
        table.add_column(column, justify="right")
    for name, values in report["graders"].items():
        table.add_row(
            name,
            *[
                "-" if values[key] is None else f"{values[key]:.3f}"
                for key in ("accuracy", "precision", "recall", "f1", "judged_relevant")
            ],
            str(values["llm_calls"]),
            "-" if values["mean_ms_per_question"] is None else f"{values['mean_ms_per_question']:.1f}",
            str(values["failed_replies"]),
        )
    console.print(table)
    score = report["graders"]["score"]
    console.print(
        f"score grader ranking: AUC {score['auc']}, mean score relevant {score['mean_score_relevant']} vs "
        f"irrelevant {score['mean_score_irrelevant']} (threshold {report['relevance_threshold']}); "
        f"default grader under these settings: {report['default_grader']}",
        highlight=False,
    )


@eval_app.command("chaos")
def eval_chaos(
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
    suite: Annotated[
        list[str] | None,
        typer.Option(
            help="Suites to run (repeatable): tenants, turns, injection, hostile, storage. Default all."
        ),
    ] = None,
    code_root: Annotated[
        Path | None,
        typer.Option(
            help="Attack another checkout of the engine (for before/after figures). Default: this one."
        ),
    ] = None,
) -> None:
    """Attack the engine as a hostile tenant would and count harm: tenant leaks, lost or mixed turns, obeyed
    injections, stack traces, hangs, wrong exit codes, checkpoint bytes per turn. Real models, temp data."""
    from evals.chaos import REPO_ROOT, SUITES, run_chaos

    with user_errors():
        report = run_chaos(
            code_root=code_root or REPO_ROOT,
            suites=suite or list(SUITES),
            progress=lambda line: error_console.print(escape(line), highlight=False),
        )
    write_json_report(json_out, report)
    table = Table(title=f"chaos ({report['machine']}, {report['seconds']} s)")
    table.add_column("figure")
    table.add_column("count", justify="right")
    for name, value in report["figures"].items():
        table.add_row(name, f"{value:g}")
    if report["bytes_per_turn"] is not None:
        table.add_row(
            "bytes per turn", f"{report['bytes_per_turn']:.0f} (target <= {report['bytes_per_turn_target']})"
        )
        table.add_row("checkpoints per turn", f"{report['checkpoints_per_turn']:.1f}")
    console.print(table)
    for probe in report["probes"]:
        if not probe["passed"]:
            console.print(
                f"FAIL {probe['suite']}/{probe['name']}: {probe['detail']}", highlight=False, markup=False
            )
    console.print(f"{report['passed']} passed, {report['failed']} failed", highlight=False)


@eval_app.command("groundedness")
def eval_groundedness(
    fixture: Annotated[
        Path | None,
        typer.Option(help="Planted-error cases (JSONL); default: evals/fixtures/planted_errors.jsonl."),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full result here.")] = None,
) -> None:
    """How often the score grader's per-sentence groundedness check catches planted errors (wrong names,
    numbers, dates, titles) and how often it flags correct answers. No model: runs in a second."""
    from evals.groundedness import DEFAULT_FIXTURE, run_groundedness

    raise typer.Exit(run_groundedness(fixture or DEFAULT_FIXTURE, json_out))


if __name__ == "__main__":
    # `python -m service.cli` runs this file as `__main__`, a copy the command modules below cannot import
    # back (they import `service.cli`): run the real module's app, as the `rag` entry point does.
    from service.cli import app as _module_app

    _module_app()

# Commands in their own modules (they use the helpers above, so they are registered after them).
from evals import answerability  # noqa: E402
from service import cli_serve  # noqa: E402

app.command("serve")(cli_serve.serve)
app.command("delete")(cli_serve.delete)
app.command("stats")(cli_serve.stats)
eval_app.command("load")(cli_serve.eval_load)
eval_app.command("answerability")(answerability.eval_answerability)
