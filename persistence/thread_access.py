"""Who may use a thread: its owning tenant (that of its first turn, in the `owner_tenant` channel), the ids
it is stored under, and the access check. The owner is read from the latest checkpoint rather than a table
of its own, since every interface writes threads through the graph. start_turn's check alone is not enough:
LangGraph stores a run's input before the first node runs, and `invoke(None, config)` runs no node at all, so
the runner and the savers check the owner too. Pure functions, no saver.
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
    """The owning tenant in a thread's stored state values: `owner_tenant`, or with `legacy` (stored values
    only: inside a run `tenant` may already hold the run's input) the `tenant` of a thread with messages
    written before ownership was stored."""
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
    """The stored id that `thread_id` means for `tenant`: its scoped thread when it exists, else an unscoped
    legacy thread this tenant owns, else the scoped id (a new thread): another tenant's legacy thread looks
    exactly like an unknown id."""
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
