"""`rag summarize --thread ID [--conversation-id C]`: write a stored conversation into the tenant's store as
conversation memory (turns as detail events, block summaries above them; retrieval/conversation_summary.py).

Why a command (not a node run on every turn): summarizing costs a model call per block with a strong model,
and memory is worth writing when a conversation has run its course, which the operator (or a scheduled
job) knows better than the graph. A strong generation model writes the summaries; the embedded one gets the
extractive summary. Registered in service/cli/__init__.py with one line; imports stay inside the function so
`rag` starts fast.
"""

from __future__ import annotations

from typing import Annotated

import typer


def summarize(
    thread: Annotated[str, typer.Option("--thread", help="The conversation (thread id) to summarize.")],
    conversation_id: Annotated[
        str | None,
        typer.Option("--conversation-id", help="Conversation id of the memory (default: the thread id)."),
    ] = None,
    tenant: Annotated[
        str | None, typer.Option(help="Tenant that owns the thread (default: RAG_DEFAULT_TENANT).")
    ] = None,
    collection: Annotated[
        str | None, typer.Option(help="Collection for the memory (default: RAG_MEMORY_COLLECTION).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Write a conversation into the store: each turn as a detail event, with summaries linked above them."""
    from nodes.resources import get_resources
    from retrieval.conversation_summary import summarize_thread
    from service.cli.common import console, fail, print_json, settings_or_exit, user_errors

    if conversation_id is not None and not conversation_id.strip():
        fail("--conversation-id is empty")
    settings_or_exit()
    with user_errors():
        resources = get_resources()
        strong = resources.strength("generate") == "strong"
        result = summarize_thread(
            resources.kb(),
            thread,
            conversation_id=conversation_id.strip() if conversation_id else None,
            tenant=tenant,
            collection=collection,
            model=resources.model("generate") if strong else None,
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
