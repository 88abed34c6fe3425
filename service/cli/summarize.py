"""`rag summarize --thread ID [--conversation-id C]`: write a stored conversation into the tenant's store as
conversation memory (turns as detail events, block summaries above them; retrieval/conversation_index.py).
`rag summarize --idle`: the idle sweep once (retrieval/auto_summary.py): every conversation without a turn
for RAG_SUMMARY_IDLE_S seconds whose memory misses some of its turns.

Why a command beside the automatic summaries: conversations with a conversation id summarize themselves
every RAG_SUMMARY_EVERY_TURNS turns and when idle (in a running API server); this command writes any thread
by hand (with the character / background / plot ids it should carry), and `--idle` lets a scheduled job
(cron) sweep where no API server runs. A strong generation model writes the summaries; the embedded one gets
the extractive summary. Registered in service/cli/__init__.py with one line; imports stay inside the function
so `rag` starts fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

#: The options of `rag summarize`, declared once as types so the command's signature stays short.
SummarizeThreadOption = Annotated[
    str | None, typer.Option("--thread", help="The conversation (thread id) to summarize.")
]
SummarizeIdleOption = Annotated[
    bool,
    typer.Option("--idle", help="Summarize every conversation idle for RAG_SUMMARY_IDLE_S seconds."),
]
SummarizeCharacterIdOption = Annotated[
    str | None, typer.Option("--character-id", help="Character id the memory's chunks carry.")
]
SummarizeBackgroundIdOption = Annotated[
    str | None, typer.Option("--background-id", help="Background id the memory's chunks carry.")
]
SummarizeRelatedPlotIdOption = Annotated[
    str | None, typer.Option("--related-plot-id", help="Plot id the memory's chunks carry.")
]
SummarizeConversationIdOption = Annotated[
    str | None,
    typer.Option(
        "--conversation-id",
        help="Conversation id of the memory (default: the one the thread's turns were given, else the "
        "thread id).",
    ),
]
SummarizeTenantOption = Annotated[
    str | None, typer.Option(help="Tenant that owns the thread (default: RAG_DEFAULT_TENANT).")
]
SummarizeCollectionOption = Annotated[
    str | None, typer.Option(help="Collection for the memory (default: conversations).")
]
SummarizeAsJsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def summarize(
    thread: SummarizeThreadOption = None,
    idle: SummarizeIdleOption = False,
    character_id: SummarizeCharacterIdOption = None,
    background_id: SummarizeBackgroundIdOption = None,
    related_plot_id: SummarizeRelatedPlotIdOption = None,
    conversation_id: SummarizeConversationIdOption = None,
    tenant: SummarizeTenantOption = None,
    collection: SummarizeCollectionOption = None,
    as_json: SummarizeAsJsonOption = False,
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
