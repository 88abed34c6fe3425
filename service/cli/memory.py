"""`rag memory add | search | list | delete | stats`: the memories table (persistence/memories.py) and the
app tables' row counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from config.settings import Settings
    from persistence.memories import Memory

memory_app = typer.Typer(
    help="Memories kept per tenant and conversation: add, search by meaning, list, delete; table row counts.",
    no_args_is_help=True,
)

TenantOption = Annotated[
    str | None, typer.Option(help="Tenant of the memories (default: RAG_DEFAULT_TENANT).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


@contextmanager
def _errors(tenant: str | None = None) -> Iterator[tuple[Settings, str]]:
    """The settings and the tenant (default RAG_DEFAULT_TENANT), with the CLI's one-line errors around the
    command's work."""
    from service.cli.common import settings_or_exit, user_errors

    settings = settings_or_exit()
    with user_errors():
        yield settings, settings.default_tenant if tenant is None else tenant


def _model() -> dict[str, Any]:
    """The knowledge base's embedding model and its key, for add and search."""
    from nodes.resources import get_resources

    embeddings = get_resources().kb().embeddings
    return {"embeddings": embeddings, "model_key": embeddings.model_key}


def _metadata(raw: str | None) -> dict[str, object] | None:
    """--metadata parsed: a JSON object (anything else is bad input, exit 2)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"--metadata: not JSON ({error.msg} at character {error.pos})") from None
    if not isinstance(value, dict):
        raise ValueError("--metadata: must be a JSON object")
    return value


def _show(memories: list[Memory], as_json: bool, empty: str) -> None:
    from service.cli.common import console, print_json

    if as_json:
        print_json([memory.as_dict() for memory in memories], indent=None)
        return
    if not memories:
        console.print(empty, highlight=False, markup=False)
        return
    for memory in memories:
        score = "" if memory.score is None else f"{memory.score:.3f}  "
        scope = f" [{memory.conversation_id}]" if memory.conversation_id else ""
        console.print(f"{memory.id:>16}  {score}{memory.content}{scope}", highlight=False, markup=False)


@memory_app.command("add")
def add(
    text: Annotated[str, typer.Argument(help="What to remember.")],
    tenant: TenantOption = None,
    conversation_id: Annotated[
        str, typer.Option("--conversation-id", help="Keep it for one conversation ('' = the whole tenant).")
    ] = "",
    kind: Annotated[str, typer.Option(help="A label for the memory (note, preference, fact...).")] = "note",
    metadata: Annotated[
        str | None, typer.Option(help='Metadata kept with it, a JSON object: \'{"source": "call"}\'.')
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Store a memory (embedded with the knowledge base's model for search)."""
    from persistence.memories import add_memory
    from service.cli.common import console, print_json

    with _errors(tenant) as (settings, owner):
        memory = add_memory(
            text,
            tenant=owner,
            conversation_id=conversation_id,
            kind=kind,
            metadata=_metadata(metadata),
            settings=settings,
            **_model(),
        )
    if as_json:
        print_json(memory.as_dict(), indent=None)
    else:
        console.print(f"added memory {memory.id} for tenant {memory.tenant}", highlight=False, markup=False)


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What to look for (by meaning, not exact words).")],
    tenant: TenantOption = None,
    conversation_id: Annotated[
        str | None, typer.Option("--conversation-id", help="Only this conversation's memories.")
    ] = None,
    k: Annotated[int | None, typer.Option("--k", help="How many (default: 5).")] = None,
    as_json: JsonOption = False,
) -> None:
    """The tenant's memories most similar to QUERY, best first, with their cosine similarity."""
    from persistence.memories import search_memories

    with _errors(tenant) as (settings, owner):
        found = search_memories(
            query,
            tenant=owner,
            conversation_id=conversation_id,
            k=k,
            settings=settings,
            **_model(),
        )
    _show(found, as_json, "no memories")


@memory_app.command("list")
def list_command(
    tenant: TenantOption = None,
    conversation_id: Annotated[
        str | None, typer.Option("--conversation-id", help="Only this conversation's memories.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 100,
    as_json: JsonOption = False,
) -> None:
    """The tenant's memories, newest first."""
    from persistence.memories import list_memories

    with _errors(tenant) as (settings, owner):
        found = list_memories(tenant=owner, conversation_id=conversation_id, limit=limit, settings=settings)
    _show(found, as_json, "no memories")


@memory_app.command("delete")
def delete(
    ids: Annotated[
        list[str] | None,
        typer.Argument(help="Ids of the memories to delete (as `rag memory list` shows them)."),
    ] = None,
    tenant: TenantOption = None,
    conversation_id: Annotated[
        str | None, typer.Option("--conversation-id", help="Delete this conversation's memories.")
    ] = None,
    everything: Annotated[bool, typer.Option("--all", help="Delete every memory of the tenant.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete memories of the tenant by id, by conversation, or all of them (--all)."""
    from persistence.memories import delete_memories
    from service.cli.common import console, print_json

    with _errors(tenant) as (settings, owner):
        deleted = delete_memories(
            tenant=owner,
            memory_ids=ids or None,
            conversation_id=conversation_id,
            everything=everything,
            settings=settings,
        )
    if as_json:
        print_json({"deleted": deleted}, indent=None)
    else:
        console.print(f"deleted {deleted} memories", highlight=False, markup=False)


@memory_app.command("stats")
def stats(as_json: JsonOption = False) -> None:
    """Row counts of the app tables: sessions, conversations, memories, audit_logs, semantic_cache."""
    from persistence.database import database_stats
    from service.cli.common import console, print_json

    with _errors() as (settings, _):
        counts = database_stats(settings)
    if as_json:
        print_json(counts, indent=None)
        return
    for table, rows in counts.items():
        console.print(f"{table:<16}{rows:>10}", highlight=False, markup=False)
