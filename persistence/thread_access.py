"""Who may use a thread (conversation): its owning tenant, the ids it is stored under, the access check.

Ownership: a thread belongs to the tenant of its first turn. `start_turn` writes that tenant to the state
channel `owner_tenant` on the first turn and never again, and refuses a turn whose context names another
tenant. Before a run, the runner (graphs.runner.Session) and the checkpoint savers
(persistence.saver_mixins.OwnerCheckedSaver) check the owner again, so that a refused caller writes nothing
into the other tenant's thread (LangGraph stores a run's input before the first node runs) and cannot
replay it (`invoke(None, config)` on a finished thread runs no node at all, it only returns the stored
state).

Why the owner is read from the thread's latest checkpoint, not from a separate `thread_owners` table: every
interface (CLI, Python `graph.invoke`, the LangGraph server, the HTTP API) creates threads through the graph,
and only the graph's own state is written by all of them; a second table would be one more thing to keep in
step with deletes, prunes and the server's saver.

Pure functions over stored values and ids: no saver, no database, so the nodes, the runner and the savers
all import it without importing one another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple


class ThreadAccessError(PermissionError):
    """The thread belongs to another tenant (CLI exit 2, HTTP 403). The owner is never named."""


#: Between the tenant and the caller's thread id in a stored thread id. Tenants never contain it (letters,
#: digits, '.', '_', '-': persistence.vector_store.validate_collection_name), so the split is unambiguous.
THREAD_SCOPE_SEPARATOR = "/"

#: Reads the latest root checkpoint of a stored thread id (None: no such thread).
CheckpointLookup = Callable[[str], "CheckpointTuple | None"]


def thread_owner(values: Mapping[str, Any] | None, *, legacy: bool = True) -> str | None:
    """The owning tenant recorded in a thread's stored state values.

    `owner_tenant` when set; with `legacy`, for threads written before ownership was stored, the tenant of
    their earlier turns (`tenant`, which start_turn has always set) when the thread has messages. Only stored
    values may use `legacy`: inside a run, `tenant` may already hold the run's input."""
    if not values:
        return None
    owner = values.get("owner_tenant")
    if isinstance(owner, str) and owner:
        return owner
    if not legacy:
        return None
    tenant = values.get("tenant")
    if values.get("messages") and isinstance(tenant, str) and tenant:
        return tenant
    return None


def check_thread_access(thread_id: str, owner: str | None, tenant: str) -> None:
    """Raise ThreadAccessError unless `tenant` may use the thread (it owns it, or nobody does yet)."""
    if owner is not None and owner != tenant:
        thread_id = visible_thread_id(thread_id, owner)  # a scoped id would name the owner
        raise ThreadAccessError(
            f"thread {thread_id!r} belongs to another tenant; tenant {tenant!r} may not read, continue, "
            "replay or delete it"
        )


def scoped_thread_id(tenant: str, thread_id: str) -> str:
    """The stored id of a tenant's thread: thread ids are one namespace per tenant, so the same id in two
    tenants is two threads, and a tenant can neither claim nor probe the ids another one uses."""
    return f"{tenant}{THREAD_SCOPE_SEPARATOR}{thread_id}"


def visible_thread_id(stored: str, tenant: str) -> str:
    """The id the tenant knows a stored thread by (a legacy, unscoped id is shown as stored)."""
    prefix = f"{tenant}{THREAD_SCOPE_SEPARATOR}"
    return stored[len(prefix) :] if stored.startswith(prefix) else stored


def resolve_thread_id(tenant: str, thread_id: str, lookup: CheckpointLookup) -> str:
    """The stored id that `thread_id` means for `tenant`.

    The tenant's scoped thread when it exists; else a thread stored before ids were scoped (its raw id)
    when this tenant owns it, so upgrading loses no conversation; else the scoped id, which starts a new
    thread. Another tenant's legacy thread therefore looks exactly like an unknown id from outside."""
    scoped = scoped_thread_id(tenant, thread_id)
    if lookup(scoped) is not None:
        return scoped
    legacy = lookup(thread_id)
    if legacy is not None and thread_owner(checkpoint_values(legacy)) == tenant:
        return thread_id
    return scoped


def root_config(thread_id: str) -> RunnableConfig:
    """The config that reads a thread's latest root checkpoint."""
    return {"configurable": {"thread_id": str(thread_id), "checkpoint_ns": ""}}


def checkpoint_values(saved: CheckpointTuple | None) -> dict[str, Any]:
    """The state values stored in a checkpoint (empty for no checkpoint)."""
    return dict(saved.checkpoint.get("channel_values") or {}) if saved is not None else {}
