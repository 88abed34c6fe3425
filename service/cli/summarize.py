"""`rag summarize --thread ID`: write a stored conversation into the tenant's store as conversation memory
(retrieval/conversation_index.py); `rag summarize --idle`: the idle sweep once (retrieval/auto_summary.py),
for a scheduled job where no API server runs.
"""

from __future__ import annotations

from typing import Annotated

import typer

#: The ids the written memory carries, declared once as types so the command's signature stays short.
CharacterIdOption = Annotated[
    str | None, typer.Option("--character-id", help="Character id the memory's chunks carry.")
]
BackgroundIdOption = Annotated[
    str | None, typer.Option("--background-id", help="Background id the memory's chunks carry.")
]
RelatedPlotIdOption = Annotated[
    str | None, typer.Option("--related-plot-id", help="Plot id the memory's chunks carry.")
]
ConversationIdOption = Annotated[
    str | None,
    typer.Option(
        "--conversation-id",
        help="Conversation id of the memory (default: the one the thread's turns were given, else the "
        "thread id).",
    ),
]


def summarize(
    thread: Annotated[
        str | None, typer.Option("--thread", help="The conversation (thread id) to summarize.")
    ] = None,
    idle: Annotated[
        bool, typer.Option("--idle", help="Summarize every conversation idle for RAG_SUMMARY_IDLE_S seconds.")
    ] = False,
    character_id: CharacterIdOption = None,
    background_id: BackgroundIdOption = None,
    related_plot_id: RelatedPlotIdOption = None,
    conversation_id: ConversationIdOption = None,
    tenant: Annotated[
        str | None, typer.Option(help="Tenant that owns the thread (default: RAG_DEFAULT_TENANT).")
    ] = None,
    collection: Annotated[
        str | None, typer.Option(help="Collection for the memory (default: conversations).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Write a conversation into the store: each turn as a detail event, with summaries linked above them."""
    from nodes.conversation_memory import summary_model
    from nodes.resources import get_resources
    from retrieval.conversation_index import summarize_thread
    from service.cli.common import console, fail, print_json, settings_or_exit, user_errors

    if thread is not None and idle:
        fail("give --thread ID (one conversation) or --idle (every idle one), not both")
    if conversation_id is not None and not conversation_id.strip():
        fail("--conversation-id is empty")
    settings = settings_or_exit()
    if idle:
        _sweep(settings.summary_idle_s, as_json)
        return
    if thread is None:
        fail("give --thread ID (one conversation) or --idle (every idle one)")
    ids = {"character_id": character_id, "background_id": background_id, "related_plot_id": related_plot_id}
    with user_errors():
        resources = get_resources()
        result = summarize_thread(
            resources.kb(),
            thread,
            conversation_id=conversation_id.strip() if conversation_id else None,
            tenant=tenant,
            collection=collection,
            model=summary_model(resources),
            metadata={key: value for key, value in ids.items() if value is not None},
        )
    if as_json:
        print_json(result.as_dict(), indent=None)
        return
    verb = "summarized" if result.status == "indexed" else "unchanged, kept"
    console.print(
        f"{verb} thread {result.thread_id}: {result.turns} turns, {result.summaries} summaries "
        f"({result.summarizer}) -> tenant {result.tenant}, collection {result.collection}, "
        f"conversation {result.conversation_id}",
        highlight=False,
        markup=False,
    )


def _sweep(idle_s: float, as_json: bool) -> None:
    """`--idle`: one sweep over every idle conversation (RAG_SUMMARY_IDLE_S = 0 sweeps every conversation)."""
    from nodes.conversation_memory import summary_model
    from nodes.resources import get_resources
    from retrieval.auto_summary import sweep_idle
    from service.cli.common import console, print_json, user_errors

    with user_errors():
        resources = get_resources()
        report = sweep_idle(resources.kb(), idle_s=idle_s, model=summary_model(resources))
    if as_json:
        print_json(report.as_dict(), indent=None)
        return
    console.print(
        f"idle sweep: {report.checked} idle conversations checked, {len(report.summarized)} summarized, "
        f"{len(report.failed)} failed",
        highlight=False,
        markup=False,
    )
    for failure in report.failed:
        console.print(
            f"failed: thread {failure['thread_id']} of tenant {failure['tenant']} ({failure['error']})",
            highlight=False,
            markup=False,
        )
