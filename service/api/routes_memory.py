"""Memory routes (the baseline design's add_memory / search_memories over HTTP): add, search, list, delete.
persistence.memories scopes every statement to the caller's tenant, so another tenant's id is the same 404 as
an id nobody has.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request

from persistence.database import DatabaseUnavailableError, InvalidDatabaseUrlError
from persistence.memories import (
    InvalidMemoryError,
    Memory,
    add_memory,
    delete_memories,
    get_memory,
    list_memories,
    parse_memory_id,
    search_memories,
)
from service.api.errors import ApiError
from service.api.runtime import api_state
from service.api.schemas import ID_PATTERN, MemoryRequest

router = APIRouter(prefix="/api/v1/memories", tags=["memories"])

#: Largest `k` of a search and `limit` of a list (a tenant's memories are few; a page is enough).
MAX_SEARCH_K = 100
MAX_LIST_LIMIT = 1000
#: The request field an InvalidMemoryError's message starts with, when it is named differently here.
FIELD_NAMES = {"content": "text", "memory_ids": "id"}
#: A message that starts with a field name and a colon (`text: empty memory`) names that field.
FIELD_PREFIX = re.compile(r"^[a-z_]+$")

T = TypeVar("T")


def _call(action: Callable[[], T]) -> T:
    """Run a memory function; its errors become the API's: 422 naming the field, 503 for the database."""
    try:
        return action()
    except InvalidMemoryError as error:
        message = str(error)
        prefix = message.split(":", 1)[0]
        field = FIELD_NAMES.get(prefix, prefix) if FIELD_PREFIX.match(prefix) else None
        raise ApiError(422, "ValidationError", message, field) from None
    except (DatabaseUnavailableError, InvalidDatabaseUrlError) as error:  # the server's setup, not the call
        raise ApiError(503, "DatabaseUnavailable", str(error)) from None


def _check_ids(memory_ids: list[str] | None) -> list[str] | None:
    """The ids as stored, or 422 naming `id` for one no memory can have."""
    return None if memory_ids is None else _call(lambda: [parse_memory_id(value) for value in memory_ids])


def _memories(tenant: str, memories: list[Memory]) -> dict[str, Any]:
    return {"tenant_id": tenant, "memories": [memory.as_dict() for memory in memories]}


@router.post("")
def add(body: MemoryRequest, request: Request) -> dict[str, Any]:
    """Keep a memory for the caller's tenant (and a conversation when given); returns it with its id."""
    state = api_state(request)
    tenant = state.tenant(request, body.tenant_id)
    memory = _call(
        lambda: add_memory(
            body.text,
            tenant=tenant,
            conversation_id=body.conversation_id or "",
            kind=body.kind,
            metadata=body.metadata,
            settings=state.settings,
        )
    )
    return memory.as_dict()


@router.get("/search")
def search(
    request: Request,
    query: Annotated[str, Query(min_length=1, max_length=5000, description="What to look for (by meaning).")],
    k: Annotated[int | None, Query(ge=1, le=MAX_SEARCH_K, description="How many (default: 5).")] = (None),
    conversation_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    tenant_id: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """The caller's memories most similar to `query`, best first, each with its cosine `score`."""
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    found = _call(
        lambda: search_memories(
            query, tenant=tenant, conversation_id=conversation_id, k=k, settings=state.settings
        )
    )
    return _memories(tenant, found)


@router.get("")
def list_all(
    request: Request,
    conversation_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
    tenant_id: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """The caller's memories (of one conversation when given), newest first."""
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    found = _call(
        lambda: list_memories(
            tenant=tenant, conversation_id=conversation_id, limit=limit, settings=state.settings
        )
    )
    return _memories(tenant, found)


@router.delete("")
def delete(
    request: Request,
    memory_id: Annotated[list[str] | None, Query(alias="id", description="Memory ids (repeatable).")] = None,
    conversation_id: Annotated[str | None, Query(pattern=ID_PATTERN)] = None,
    all_memories: Annotated[bool, Query(alias="all", description="Every memory of the tenant.")] = False,
    tenant_id: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """Delete the caller's memories by id, by conversation, or all (`all=true`); returns how many."""
    memory_ids = _check_ids(memory_id)
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    deleted = _call(
        lambda: delete_memories(
            tenant=tenant,
            memory_ids=memory_ids,
            conversation_id=conversation_id,
            everything=all_memories,
            settings=state.settings,
        )
    )
    return {"tenant_id": tenant, "deleted": deleted}


def _not_found(memory_id: str) -> ApiError:
    """The one answer for an id the caller's tenant has no memory under (nobody's, or another tenant's)."""
    return ApiError(404, "NotFound", f"no memory with id {memory_id!r}")


@router.get("/{memory_id}")
def get_one(
    memory_id: str, request: Request, tenant_id: Annotated[str | None, Query()] = None
) -> dict[str, Any]:
    """One of the caller's memories by id; 404 when the caller's tenant has none with that id."""
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    memory = _call(lambda: get_memory(memory_id, tenant=tenant, settings=state.settings))
    if memory is None:
        raise _not_found(memory_id)
    return memory.as_dict()


@router.delete("/{memory_id}")
def delete_one(
    memory_id: str, request: Request, tenant_id: Annotated[str | None, Query()] = None
) -> dict[str, Any]:
    """Delete one of the caller's memories by id; 404 when the caller's tenant has none with that id."""
    state = api_state(request)
    tenant = state.tenant(request, tenant_id)
    deleted = _call(lambda: delete_memories(tenant=tenant, memory_ids=[memory_id], settings=state.settings))
    if not deleted:
        raise _not_found(memory_id)
    return {"tenant_id": tenant, "deleted": deleted}
