"""`rag threads list | show | delete | prune`: the tenant's conversations in the checkpoint store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from service.cli.common import console, context_or_exit, fail, settings_or_exit, user_errors

if TYPE_CHECKING:
    from config.settings import Settings

#: Characters of a thread's first question shown by `rag threads list`.
FIRST_QUESTION_CHARS = 60

threads_app = typer.Typer(help="Conversations stored in the checkpoint file.", no_args_is_help=True)


#: `--tenant` of the `rag threads` commands: each lists and acts on one tenant's threads only.
THREADS_TENANT_OPTION = typer.Option(
    "--tenant", help="Tenant whose threads these are (default: the default tenant, as for rag ask)."
)


def _settings_and_tenant(tenant: str | None) -> tuple[Settings, str]:
    """The settings and the tenant of a `rag threads` command: --tenant, else the one `rag ask` runs as."""
    settings = settings_or_exit()
    if tenant is not None and not tenant.strip():
        fail("--tenant is empty")
    return settings, context_or_exit(None, tenant, None, None).tenant


@threads_app.command("list")
def threads_list(tenant: Annotated[str | None, THREADS_TENANT_OPTION] = None) -> None:
    """The tenant's conversations, most recent first: id, turns, last activity (UTC), checkpoints and the
    first question."""
    from persistence.checkpointer import checkpoint_location
    from persistence.threads import list_threads, visible_thread_id

    settings, owner = _settings_and_tenant(tenant)
    with user_errors():
        threads = list_threads(checkpoint_location(settings), owner)
    for summary in threads:
        shown = visible_thread_id(summary.thread_id, owner)
        first = summary.first_question
        first = first if len(first) <= FIRST_QUESTION_CHARS else first[: FIRST_QUESTION_CHARS - 1] + "…"
        console.print(
            f"{escape(shown)}  {summary.turns} turns  last {summary.last_activity[:19] or '-'}  "
            f"{summary.checkpoints} checkpoints  {escape(first)}",
            highlight=False,
        )
    if not threads:
        console.print("no threads")


@threads_app.command("show")
def threads_show(
    thread_id: Annotated[str, typer.Argument(help="Conversation id.")],
    tenant: Annotated[str | None, THREADS_TENANT_OPTION] = None,
) -> None:
    """The messages of one of the tenant's conversations."""
    from graphs.runner import Session

    settings, owner = _settings_and_tenant(tenant)
    with user_errors():
        values = Session(settings).history(thread_id, tenant=owner)
    if not values:
        fail(f"unknown thread {thread_id!r}")
    for message in values.get("messages", []):
        console.print(f"[bold]{message.type}>[/] {escape(message.text)}", highlight=False)


@threads_app.command("delete")
def threads_delete(
    thread_id: Annotated[str, typer.Argument(help="Conversation id.")],
    tenant: Annotated[str | None, THREADS_TENANT_OPTION] = None,
) -> None:
    """Delete one of the tenant's conversations (after a turn running on it has finished)."""
    from persistence.checkpointer import checkpoint_location
    from persistence.thread_lock import remove_lock_file, thread_lock
    from persistence.threads import delete_thread, require_checkpoints, stored_thread_id

    settings, owner = _settings_and_tenant(tenant)
    with user_errors():
        location = checkpoint_location(settings)
        require_checkpoints(location)
        stored = stored_thread_id(location, owner, thread_id)
        with thread_lock(settings, stored):
            deleted = delete_thread(location, stored, owner)
            if deleted:
                remove_lock_file(settings, stored)
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

    from persistence.checkpointer import checkpoint_location
    from persistence.thread_lock import thread_lock
    from persistence.threads import prune_threads

    settings, owner = _settings_and_tenant(tenant)
    with user_errors():  # a bad --keep (ValueError) is bad input there, like every other command's
        guard = partial(thread_lock, settings)  # a turn running on a thread finishes first
        removed = prune_threads(checkpoint_location(settings), keep, owner, guard=guard)
    console.print(
        f"removed {removed['threads_removed']} threads and {removed['checkpoints_removed']} old checkpoints"
    )
