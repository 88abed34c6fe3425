"""Memories (the baseline design's add_memory / search_memories): short notes kept per tenant and,
optionally, per conversation, found again by meaning and recalled into answers (nodes.memory_recall).

They live in the long-term store, one item per memory in ("memories", tenant, conversation or "_"), so
Studio and a LangGraph server see the same memories as the REST routes and the CLI. Embeddings rather than
keywords: a memory is searched later with other words. Every function reads one tenant's namespace, so
another tenant's id answers exactly like an id that does not exist; ids are 16 random hex digits, so they
say nothing of others' memories and are never reused (older memories keep their number), checked by
`parse_memory_id`.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, Item

from config.settings import Settings
from core.metadata import MAX_METADATA_KEYS
from persistence.audit import write_audit
from persistence.database import get_database, to_json, utcnow
from persistence.long_term_store import (
    MEMORIES,
    TEXT_FIELD,
    LongTermStore,
    all_items,
    delete_items,
    namespace,
)
from persistence.memory_migration import memory_store, memory_value
from persistence.process import process_knowledge_base, process_settings
from persistence.store_search import STORE_PAGE, put_embedded, ranked, resolve_store
from persistence.vector_store import InvalidCollectionError, validate_collection_name

#: Longest conversation id and kind accepted (the columns' sizes).
MAX_ID_CHARS = 128
MAX_KIND_CHARS = 64
#: Metadata of one memory: its JSON size at most (it is kept as given, not searched); its keys are bounded
#: like a document's own (core.metadata.MAX_METADATA_KEYS).
MAX_METADATA_CHARS = 4000
#: Random bytes of a new memory id (written as twice as many hex digits).
MEMORY_ID_BYTES = 8
#: A memory id: 16 hex digits (any case; stored lower-case).
MEMORY_ID_PATTERN = re.compile(rf"[0-9a-fA-F]{{{MEMORY_ID_BYTES * 2}}}")
#: The id of a memory made before ids were opaque: its integer key, a positive signed 64-bit number.
LEGACY_MEMORY_ID_PATTERN = re.compile(r"[0-9]{1,19}")
MAX_LEGACY_MEMORY_ID = 2**63 - 1
#: New ids tried when one collides with an existing id of the tenant (2^-64 each: one try in practice).
MEMORY_ID_ATTEMPTS = 3
#: Longest memory text accepted: a note, not a document (documents are ingested).
MEMORY_MAX_CHARS = 20_000
#: Memories a search returns when the caller does not say how many.
MEMORY_SEARCH_K = 5


class InvalidMemoryError(ValueError):
    """Bad input to a memory function (empty text, no tenant, nothing chosen to delete...)."""


def new_memory_id() -> str:
    """A fresh memory id: 16 random hex digits, so ids say nothing of other memories or tenants."""
    return secrets.token_hex(MEMORY_ID_BYTES)


def parse_memory_id(value: object) -> str:
    """The memory id `value` names, as stored: 16 hex digits (lower-cased), or the number of a memory made
    before ids were opaque. InvalidMemoryError naming `id` for anything else (every caller's validation:
    the REST routes, the CLI and Python callers reject a malformed id alike, before any lookup)."""
    text = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else None
    if text is not None and MEMORY_ID_PATTERN.fullmatch(text):
        return text.lower()
    if text is not None and LEGACY_MEMORY_ID_PATTERN.fullmatch(text):
        number = int(text)
        if 1 <= number <= MAX_LEGACY_MEMORY_ID:
            return str(number)
    shown = repr(value) if len(repr(value)) <= MAX_KIND_CHARS else f"{repr(value)[:MAX_KIND_CHARS]}..."
    raise InvalidMemoryError(f"id: {shown} is not a memory id ({MEMORY_ID_BYTES * 2} hex digits)")


@dataclass(frozen=True)
class Memory:
    """A stored memory; `id` is its opaque id (see parse_memory_id); `score` is the cosine similarity to the
    query in search results."""

    id: str
    tenant: str
    conversation_id: str
    kind: str
    content: str
    created_at: str
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return asdict(self)


def _embeddings() -> tuple[Embeddings, str]:
    """The knowledge base's embedding model and its key (the one retrieval uses)."""
    embeddings = process_knowledge_base().embeddings
    return embeddings, embeddings.model_key


def _check_tenant(tenant: str) -> str:
    """The tenant, named like the tenants of documents and threads (so 'a b!' cannot become a tenant here
    that no other part of the engine could serve)."""
    tenant = (tenant or "").strip()
    if not tenant:
        raise InvalidMemoryError("tenant: a memory belongs to one tenant; pass a non-empty tenant")
    if len(tenant) > MAX_ID_CHARS:
        raise InvalidMemoryError(f"tenant: at most {MAX_ID_CHARS} characters")
    try:
        return validate_collection_name(tenant, "tenant")
    except InvalidCollectionError as error:
        raise InvalidMemoryError(f"tenant: {error}") from None


def _check_metadata(metadata: Mapping[str, Any] | None) -> str:
    """The metadata as JSON text: an object of at most MAX_METADATA_KEYS keys and MAX_METADATA_CHARS."""
    if metadata is None:
        return "{}"
    if not isinstance(metadata, Mapping):
        raise InvalidMemoryError("metadata: a JSON object of key -> value")
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidMemoryError(f"metadata: at most {MAX_METADATA_KEYS} keys")
    if any(not isinstance(key, str) or not key.strip() for key in metadata):
        raise InvalidMemoryError("metadata: keys must be non-empty strings")
    text = to_json(dict(metadata))
    if len(text) > MAX_METADATA_CHARS:
        raise InvalidMemoryError(f"metadata: at most {MAX_METADATA_CHARS} characters of JSON")
    return text


def _check_conversation(conversation_id: str | None) -> str | None:
    if conversation_id is not None and len(conversation_id) > MAX_ID_CHARS:
        raise InvalidMemoryError(f"conversation_id: at most {MAX_ID_CHARS} characters")
    return conversation_id


def _memory(item: Item, score: float | None = None) -> Memory:
    value = item.value
    return Memory(
        id=str(value["id"]),
        tenant=str(value["tenant"]),
        conversation_id=str(value["conversation_id"]),
        kind=str(value["kind"]),
        content=str(value[TEXT_FIELD]),
        created_at=str(value["created_at"]),
        metadata=dict(value.get("metadata") or {}),
        score=None if score is None else round(float(score), 4),
    )


def _find(store: BaseStore, tenant: str, public_ids: Sequence[str]) -> list[Item]:
    """The tenant's memories with these ids (any conversation)."""
    found: list[Item] = []
    for public_id in dict.fromkeys(public_ids):
        found.extend(store.search(namespace(MEMORIES, tenant), filter={"id": public_id}, limit=1))
    return found


def add_memory(
    content: str,
    *,
    tenant: str,
    conversation_id: str = "",
    kind: str = "note",
    metadata: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
    embeddings: Embeddings | None = None,
    model_key: str | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> Memory:
    """Store a memory for `tenant` (and `conversation_id`, '' = the whole tenant), embedded for search,
    with the caller's `metadata` kept as given. Raises InvalidMemoryError on bad input and the embedding
    model's error when it is down (nothing is stored then)."""
    tenant = _check_tenant(tenant)
    text = (content or "").strip()
    if not text:
        raise InvalidMemoryError("text: empty memory")
    metadata_value = json.loads(_check_metadata(metadata))
    settings = settings or process_settings()
    if len(text) > MEMORY_MAX_CHARS:
        raise InvalidMemoryError(f"text: at most {MEMORY_MAX_CHARS} characters")
    kind = (kind or "note").strip()[:MAX_KIND_CHARS] or "note"
    conversation_id = _check_conversation(conversation_id or "") or ""
    if embeddings is None:
        embeddings, model_key = _embeddings()
    found = resolve_store(settings, store, memory_store)
    memory_id = new_memory_id()
    for _ in range(MEMORY_ID_ATTEMPTS - 1):
        if not _find(found.store, tenant, [memory_id]):
            break
        memory_id = new_memory_id()  # the id is the tenant's already: draw another
    value = memory_value(
        memory_id=memory_id,
        tenant=tenant,
        conversation_id=conversation_id,
        kind=kind,
        text=text,
        created_at=utcnow().isoformat(),
        metadata=metadata_value,
    )
    now = utcnow()
    draft = Item(
        value=value,
        key=memory_id,
        namespace=namespace(MEMORIES, tenant, conversation_id),
        created_at=now,
        updated_at=now,
    )
    (written,) = put_embedded(found, [draft], embeddings, model_key or "custom")
    memory = _memory(written)
    write_audit(
        "memory_add",
        tenant=tenant,
        conversation_id=conversation_id,
        database=get_database(settings),
        detail={"memory_id": memory.id, "kind": kind},
    )
    return memory


def search_memories(
    query: str,
    *,
    tenant: str,
    conversation_id: str | None = None,
    k: int | None = None,
    settings: Settings | None = None,
    embeddings: Embeddings | None = None,
    model_key: str | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> list[Memory]:
    """The `k` memories of `tenant` most similar to `query` (cosine), best first; only those of
    `conversation_id` when one is given ('' = the tenant-wide ones)."""
    tenant = _check_tenant(tenant)
    conversation_id = _check_conversation(conversation_id)
    text = (query or "").strip()
    if not text:
        raise InvalidMemoryError("query: empty search")
    settings = settings or process_settings()
    k = k if k is not None else MEMORY_SEARCH_K
    if k < 1:
        raise InvalidMemoryError("k: at least 1")
    if embeddings is None:
        embeddings, model_key = _embeddings()
    scope = namespace(MEMORIES, tenant, conversation_id)
    found = ranked(
        resolve_store(settings, store, memory_store), scope, text, k, embeddings, model_key or "custom"
    )
    return [_memory(item, score) for item, score in found]


def has_memories(
    tenant: str,
    conversation_id: str = "",
    *,
    settings: Settings | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> bool:
    """Whether recall_memories could find anything: the tenant has a memory of this conversation or a
    tenant-wide one. One item read per scope, no model: the price every answer pays when a tenant keeps no
    memories. Never cached in the process: another process (the CLI beside the API, another worker) may add
    a memory to the same store at any time."""
    tenant = _check_tenant(tenant)
    return _any_stored(
        resolve_store(settings or process_settings(), store, memory_store), tenant, _scopes(conversation_id)
    )


def _any_stored(found: LongTermStore, tenant: str, scopes: list[str]) -> bool:
    return any(found.store.search(namespace(MEMORIES, tenant, scope), limit=1) for scope in scopes)


def _scopes(conversation_id: str | None) -> list[str]:
    """The conversation ids recall reads: this conversation's and the tenant-wide ('')."""
    conversation_id = _check_conversation(conversation_id or "") or ""
    return [conversation_id, ""] if conversation_id else [""]


def recall_memories(
    query: str,
    *,
    tenant: str,
    conversation_id: str = "",
    k: int,
    min_score: float,
    settings: Settings | None = None,
    embeddings: Embeddings | None = None,
    model_key: str | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> list[Memory]:
    """The memories an answer to `query` should see: at most `k` of the tenant's memories of
    `conversation_id` and its tenant-wide ones (conversation ''), each at least `min_score` similar to the
    query; the conversation's own first, then the tenant-wide, each by similarity. Another conversation's
    memories are never recalled (they were kept for it). No memory in scope: no embedding call."""
    tenant = _check_tenant(tenant)
    text = (query or "").strip()
    if not text or k < 1:
        return []
    found = resolve_store(settings or process_settings(), store, memory_store)
    scopes = _scopes(conversation_id)
    if not _any_stored(found, tenant, scopes):
        return []
    if embeddings is None:
        embeddings, model_key = _embeddings()
    kept: list[tuple[Item, float]] = []
    for scope in scopes:  # own conversation first: a note kept for it is the most specific
        nearest = ranked(
            found, namespace(MEMORIES, tenant, scope), text, k, embeddings, model_key or "custom"
        )
        kept.extend((item, score) for item, score in nearest if score >= min_score)
    return [_memory(item, score) for item, score in kept[:k]]


def _newest_first(items: Sequence[Item]) -> list[Item]:
    return sorted(
        items,
        key=lambda item: (datetime.fromisoformat(str(item.value["created_at"])), item.key),
        reverse=True,
    )


def list_memories(
    *,
    tenant: str,
    conversation_id: str | None = None,
    limit: int = 100,
    settings: Settings | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> list[Memory]:
    """The tenant's memories (of one conversation when given, '' = the tenant-wide ones), newest first."""
    tenant = _check_tenant(tenant)
    scope = namespace(MEMORIES, tenant, _check_conversation(conversation_id))
    items = all_items(
        resolve_store(settings or process_settings(), store, memory_store).store, scope, page=STORE_PAGE
    )
    return [_memory(item) for item in _newest_first(items)[: max(1, limit)]]


def get_memory(
    memory_id: str | int,
    *,
    tenant: str,
    settings: Settings | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> Memory | None:
    """The tenant's memory with this id, or None (also for another tenant's id: the same answer as for an
    id nobody has). InvalidMemoryError for a malformed id."""
    tenant = _check_tenant(tenant)
    public_id = parse_memory_id(memory_id)
    found = _find(
        resolve_store(settings or process_settings(), store, memory_store).store, tenant, [public_id]
    )
    return _memory(found[0]) if found else None


def delete_memories(
    *,
    tenant: str,
    memory_ids: Sequence[str | int] | None = None,
    conversation_id: str | None = None,
    everything: bool = False,
    settings: Settings | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> int:
    """Delete the tenant's memories with these ids, or of this conversation, or all of them
    (`everything=True`); return how many were deleted. Ids of another tenant's memories match nothing."""
    tenant = _check_tenant(tenant)
    conversation_id = _check_conversation(conversation_id)
    public_ids = [parse_memory_id(memory_id) for memory_id in memory_ids or []]
    if not public_ids and conversation_id is None and not everything:
        raise InvalidMemoryError(
            "choose what to delete: memory ids, a conversation id, or everything of the tenant"
        )
    settings = settings or process_settings()
    target = resolve_store(settings, store, memory_store).store
    if public_ids:
        chosen = _find(target, tenant, public_ids)
        if conversation_id is not None:
            chosen = [item for item in chosen if item.value["conversation_id"] == conversation_id]
    else:
        chosen = all_items(target, namespace(MEMORIES, tenant, conversation_id), page=STORE_PAGE)
    deleted = delete_items(target, chosen)
    if deleted:
        write_audit(
            "memory_delete",
            tenant=tenant,
            conversation_id=conversation_id or "",
            database=get_database(settings),
            detail={"deleted": deleted, "ids": public_ids},
        )
    return deleted
