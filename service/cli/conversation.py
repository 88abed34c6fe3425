"""`rag ask` and `rag chat`: questions answered with citations, one at a time or as a conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from service.cli.common import (
    checked_store,
    console,
    context_or_exit,
    error_console,
    fail,
    print_json,
    settings_or_exit,
    store_error_or_exit,
    store_errors_reported_here,
    text_or_exit,
    user_errors,
)

if TYPE_CHECKING:  # imported when a command runs: `rag --help` loads no settings nor LangGraph
    from config.settings import Settings
    from graphs.runner import GraphName
    from state.context import Context

#: The graphs `rag ask --graph` runs, by name.
ASK_GRAPHS: dict[str, GraphName] = {"rag": "rag", "baseline": "baseline"}
#: The style of the judgement line under the answer, per band.
BAND_STYLES = {"confident": "green", "tentative": "yellow", "not_found": "dim"}


def _print_answer(result: dict[str, object], prefix: str = "") -> None:
    """The stored answer, its judgement in words, its warnings, sources and strategy."""
    from retrieval.answer_text import answer_parts
    from service.answer_judgement import judgement, judgement_line
    from service.answer_warnings import answer_warnings

    if prefix:
        console.print(prefix, end="")
    short, explanation = answer_parts(str(result.get("answer") or ""))
    if short:  # the short answer first, on its own line, then the cited explanation
        console.print(f"[bold]{escape(short)}[/]", highlight=False)
        if explanation:
            console.print(explanation, highlight=False, markup=False)
    else:
        console.print(str(result.get("answer", "")), highlight=False, markup=False)
    style = BAND_STYLES[judgement(result)["band"]]
    console.print(f"[{style}]{escape(judgement_line(result))}[/]", highlight=False, soft_wrap=True)
    for item in answer_warnings(result):
        console.print(f"[bold yellow]warning:[/] {escape(item['message'])}", highlight=False, soft_wrap=True)
    citations = result.get("citations") or []
    if isinstance(citations, list) and citations:
        console.print("\n[bold]Sources[/]")
        for citation in citations:
            page = citation.get("page", -1)
            where = Path(str(citation.get("source", ""))).name + (f" p.{page}" if page and page > 0 else "")
            flag = " (inferred)" if citation.get("inferred") else ""
            console.print(
                f"  \\[{citation['marker']}] {escape(str(citation.get('title') or where))} — {escape(where)} "
                f"(support {citation.get('confidence', 0):.2f}){flag}",
                highlight=False,
            )
    retrieval_rounds, answer_rounds = result.get("retrieval_rounds", 0), result.get("generation_rounds", 0)
    rounds = f"{retrieval_rounds} retrieval / {answer_rounds} answer rounds"
    strategy = result.get("strategy") or "-"
    answer_id = f" · answer {result['answer_id']}" if result.get("answer_id") else ""
    console.print(f"[dim]strategy {strategy} · {rounds} · thread {result.get('thread_id')}{answer_id}[/]")


#: `--conversation-id` of ask and chat: the graph input `conversation_id` (retrieval scoped to it).
CONVERSATION_OPTION = typer.Option(
    "--conversation-id",
    help="Search only this conversation's documents (its events and summaries); RAG_CROSS_CONVERSATION_SHARE "
    "> 0 adds a minority from other conversations.",
)
USER_OPTION = typer.Option(
    "--user", help="Who asks, recorded beside the tenant in the tables (default: RAG_DEFAULT_USER)."
)
#: `--local` of ask: never hand the question to a running server.
LOCAL_OPTION = typer.Option(
    "--local", help="Answer in this process even when a `rag serve` of this data directory is running."
)
#: `--dir` of ask and chat: the run's directory scope (retrieval.directory_scope).
DIR_OPTION = typer.Option(
    "--dir",
    help="Search only documents under this directory (whole path components; relative to the working "
    "directory; default RAG_DIRECTORY).",
)


def with_directory(context: Context, directory: str | None) -> Context:
    """The run context scoped to `--dir` (resolved like ingested paths), or one line naming the option."""
    from dataclasses import replace

    from retrieval.directory_scope import cli_directory

    if directory is None:
        return context
    try:
        return replace(context, directory=cli_directory(text_or_exit(directory, "--dir")))
    except ValueError as error:
        fail(f"--dir: {error}")


def with_user(context: Context, user: str | None) -> Context:
    """The run context with `--user` as its user_id (one line naming the option when it is not valid)."""
    from dataclasses import replace

    if user is None:
        return context
    try:
        return replace(context, user_id=user.strip())
    except ValueError as error:
        fail(f"--user: {error}")


def conversation_input(conversation_id: str | None) -> dict[str, str]:
    """The graph input for `--conversation-id` (none when omitted: a thread keeps its earlier one)."""
    if conversation_id is None:
        return {}
    if not text_or_exit(conversation_id, "--conversation-id").strip():
        fail("--conversation-id is empty")
    return {"conversation_id": conversation_id.strip()}


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
    user: Annotated[str | None, USER_OPTION] = None,
    directory: Annotated[str | None, DIR_OPTION] = None,
    local: Annotated[bool, LOCAL_OPTION] = False,
) -> None:
    """Answer a question from the indexed documents, with citations and how sure the engine is; follow-ups
    with --thread. A running `rag serve` of the same data directory answers it (--local: this process)."""
    from core.questions import check_question
    from retrieval.filters import parse_filter
    from service.cli.server_handoff import ask_on_server, handoff_server

    graph_name = _check_ask_options(graph, thread)
    settings = settings_or_exit()
    context = with_user(context_or_exit(mode, tenant, collection, max_iterations), user)
    context = with_directory(context, directory)
    inputs = conversation_input(conversation_id)
    with user_errors(), store_errors_reported_here() as reported:
        # bad input is refused before a damaged catalog or a missing model is looked at
        check_question(question.strip(), context.max_query_chars)
        filters = parse_filter(filter_json) and json.loads(filter_json or "{}")
        # the generate route has no graph choice, collection or loop bound: those are answered here
        expressible = graph == "rag" and collection is None and max_iterations is None
        server = handoff_server(settings, local) if expressible else None
        if server is not None:
            result = ask_on_server(
                server,
                settings,
                question,
                thread=thread,
                mode=mode,
                tenant=tenant,
                filters=filters or None,
                conversation_id=inputs.get("conversation_id"),
                user=user.strip() if user is not None else None,
                directory=context.directory if directory is not None else None,
            )
        else:
            result = _ask_here(settings, graph_name, question, thread, context, filters or {}, inputs)
    store_error_or_exit(result, reported)
    if as_json:
        _print_answer_json(result)
    else:
        _print_answer(result)


def _check_ask_options(graph: str, thread: str | None) -> GraphName:
    """The graph to run, or exit on an unknown graph or an unusable thread id (before any store opens)."""
    graph_name = ASK_GRAPHS.get(graph)
    if graph_name is None:
        fail(f"unknown graph {graph!r}; choose rag or baseline")
    if thread is not None:
        text_or_exit(thread, "--thread")
    return graph_name


def _print_answer_json(result: dict[str, Any]) -> None:
    """`rag ask --json`: the output state as the API shows it, with the warnings under the answer."""
    from service.answer_json import output_json
    from service.answer_warnings import answer_warnings

    payload = {**output_json(result), "warnings": answer_warnings(result)}
    print_json(payload)


def _ask_here(
    settings: Settings,
    graph: GraphName,
    question: str,
    thread: str | None,
    context: Context,
    filters: dict[str, Any],
    inputs: dict[str, str],
) -> dict[str, Any]:
    """The question answered in this process (the knowledge base checked first, as `rag search` does)."""
    from graphs.runner import Session
    from nodes.resources import get_resources

    if get_resources().uses_store(context):  # RAG_RETRIEVAL=false: none opened
        checked_store(get_resources().kb())  # the graph's knowledge base, checked as `rag search` does
    session = Session(settings, graph_name=graph, interface="cli")
    return session.ask(
        question,
        thread_id=thread,
        context=context,
        filters=filters,
        **inputs,
    )


def _chat_turn(
    session: Any, question: str, *, thread_id: str, context: Context, inputs: dict[str, str]
) -> dict[str, Any]:
    """Run one chat turn, previewing the draft being written (erased at the end); return the output state.
    Erased because the streamed draft is not the answer: `cite` renumbers it, a new round or the extractive
    fallback replaces it, so the one answer printed is the stored one."""
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


def chat(
    thread: Annotated[str | None, typer.Option("--thread", help="Continue this conversation.")] = None,
    mode: Annotated[
        str | None, typer.Option(help="Answer template: auto | simple | advanced | precise.")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Tenant whose documents are searched.")] = None,
    conversation_id: Annotated[str | None, CONVERSATION_OPTION] = None,
    user: Annotated[str | None, USER_OPTION] = None,
    directory: Annotated[str | None, DIR_OPTION] = None,
) -> None:
    """Interactive conversation: one answer per turn with its warnings, citations and strategy (a turn with
    no evidence in the documents is answered from the conversation)."""
    from dataclasses import replace

    from core.questions import InvalidQuestionError, check_question
    from graphs.runner import Session, new_thread_id
    from nodes.resources import get_resources
    from persistence.thread_lock import ThreadBusyError

    if thread is not None:
        text_or_exit(thread, "--thread")
    settings = settings_or_exit()
    scoped = with_directory(with_user(context_or_exit(mode, tenant, None, None), user), directory)
    context = replace(scoped, answer_source="chat")
    extra_inputs = conversation_input(conversation_id)
    thread_id = thread or new_thread_id()
    with user_errors():
        if get_resources().uses_store(context):  # RAG_RETRIEVAL=false: none opened
            checked_store(get_resources().kb())  # a damaged catalog: one line and exit 1 before any turn
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
        try:  # undecodable bytes on stdin, a question too long: this turn only, refused as the graph would
            check_question(question.strip(), context.max_query_chars)
        except InvalidQuestionError as error:
            error_console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
            continue
        # A model or store that is down: exit 1; another tenant's thread: exit 2.
        with user_errors(), store_errors_reported_here() as reported:
            try:
                result = _chat_turn(
                    session, question, thread_id=thread_id, context=context, inputs=extra_inputs
                )
            except (ValueError, ThreadBusyError) as error:  # this turn only: the next one may succeed
                error_console.print(
                    f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True
                )
                continue
        # A store that could not be searched ends the chat, as one that is down.
        store_error_or_exit(result, reported)
        _print_answer(result, prefix="[bold blue]rag>[/] ")
