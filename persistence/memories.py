"""Memories (seed 1's add_memory / search_memories): short notes kept per tenant and, optionally, per
conversation, found again by meaning, and recalled into answers (recall_memories, nodes.memory_recall).

Why embeddings rather than keywords: a memory is a sentence someone wrote once ("the customer prefers
metric units") and is searched later with other words ("which units should I use?"); keyword overlap misses
most such paraphrases, while the knowledge base's embedding model (already loaded for retrieval, so no
second model) ranks them by cosine similarity. Memories are few per tenant, so the search is an exact
cosine over that tenant's rows in numpy, with no vector index to keep in sync. Vectors are stored with the
model's key; a row embedded by another model is re-embedded on the next search.

Every function is scoped to exactly one tenant by its own SQL (`WHERE tenant = ...`): a tenant can neither
find nor delete another tenant's memories, whatever ids it passes, and another tenant's id answers exactly
like an id that does not exist.

Why opaque ids: a memory's id is 16 random hex digits, unique within its tenant, rather than the table's
integer key. That key is one sequence over every tenant (a tenant adding two memories learned how many the
others added in between) and SQLite reuses a deleted key (an id a caller kept could name another memory
later). Memories made before keep their number as their id (revision 0006); `parse_memory_id` is the one
place that says what an id may look like, for the REST routes, the CLI and Python callers alike.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from sqlalchemy import Select, bindparam, delete, exists, literal, select
from sqlalchemy.exc import IntegrityError

from config.settings import Settings
from core.metadata import MAX_METADATA_KEYS
from persistence.audit import write_audit
from persistence.database import Database, MemoryRow, as_utc, get_database, to_json
from persistence.process import process_knowledge_base, process_settings
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


def _memory(row: MemoryRow, score: float | None = None) -> Memory:
    return Memory(
        id=row.public_id,
        tenant=row.tenant,
        conversation_id=row.conversation_id,
        kind=row.kind,
        content=row.content,
        created_at=as_utc(row.created_at).isoformat(),
        metadata=json.loads(row.metadata_json or "{}"),
        score=None if score is None else round(float(score), 4),
    )


def _embeddings() -> tuple[Embeddings, str]:
    """The knowledge base's embedding model and its key (the one retrieval uses)."""
    embeddings = process_knowledge_base().embeddings
    return embeddings, embeddings.model_key


def _settings(settings: Settings | None) -> Settings:
    """The given settings, else the process resources' (those the graph and the knowledge base use)."""
    if settings is not None:
        return settings
    return process_settings()


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


def _vector_bytes(vector: Sequence[float]) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


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
) -> Memory:
    """Store a memory for `tenant` (and `conversation_id`, '' = the whole tenant), embedded for search,
    with the caller's `metadata` kept as given. Raises InvalidMemoryError on bad input and the embedding
    model's error when it is down (nothing is stored then)."""
    tenant = _check_tenant(tenant)
    text = (content or "").strip()
    if not text:
        raise InvalidMemoryError("text: empty memory")
    metadata_json = _check_metadata(metadata)
    settings = _settings(settings)
    database = get_database(settings)
    limit = settings.memory_max_chars
    if len(text) > limit:
        raise InvalidMemoryError(f"text: at most {limit} characters (RAG_MEMORY_MAX_CHARS)")
    kind = (kind or "note").strip()[:MAX_KIND_CHARS] or "note"
    conversation_id = _check_conversation(conversation_id or "") or ""
    if embeddings is None:
        embeddings, model_key = _embeddings()
    vector = embeddings.embed_documents([text])[0]
    for attempt in range(MEMORY_ID_ATTEMPTS):
        try:
            with database.session() as session:
                row = MemoryRow(
                    public_id=new_memory_id(),
                    tenant=tenant,
                    conversation_id=conversation_id,
                    kind=kind,
                    content=text,
                    embedding=_vector_bytes(vector),
                    model_key=model_key or "custom",
                    metadata_json=metadata_json,
                )
                session.add(row)
                session.flush()
                memory = _memory(row)
            break
        except IntegrityError:  # the id is the tenant's already: draw another
            if attempt == MEMORY_ID_ATTEMPTS - 1:
                raise
    write_audit(
        "memory_add",
        tenant=tenant,
        conversation_id=conversation_id,
        database=database,
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
) -> list[Memory]:
    """The `k` memories of `tenant` most similar to `query` (cosine), best first; only those of
    `conversation_id` when one is given."""
    tenant = _check_tenant(tenant)
    conversation_id = _check_conversation(conversation_id)
    text = (query or "").strip()
    if not text:
        raise InvalidMemoryError("query: empty search")
    settings = _settings(settings)
    database = get_database(settings)
    k = k if k is not None else settings.memory_search_k
    if k < 1:
        raise InvalidMemoryError("k: at least 1")
    if embeddings is None:
        embeddings, model_key = _embeddings()
    statement = select(MemoryRow).where(MemoryRow.tenant == tenant)
    if conversation_id is not None:
        statement = statement.where(MemoryRow.conversation_id == conversation_id)
    rows, scores = _scored_rows(statement, text, database, embeddings, model_key or "custom")
    order = np.argsort(-scores, kind="stable")[:k]
    return [_memory(rows[index], scores[index]) for index in order]


def _scored_rows(
    statement: Select[MemoryRow], text: str, database: Database, embeddings: Embeddings, model_key: str
) -> tuple[list[MemoryRow], np.ndarray]:
    """The rows `statement` selects and their cosine similarity to `text`; ([], empty) without any row, and
    then no embedding call at all. Rows embedded by another model (or never) are embedded again first."""
    with database.session() as session:
        rows = list(session.scalars(statement))
        if not rows:
            return [], np.zeros(0, dtype=np.float32)
        stale = [row for row in rows if row.embedding is None or row.model_key != model_key]
        if stale:  # embedded by another model (or never): bring them to the current one
            for row, vector in zip(
                stale, embeddings.embed_documents([row.content for row in stale]), strict=True
            ):
                row.embedding, row.model_key = _vector_bytes(vector), model_key
    # The query is embedded after the session ends: a model call must not hold a connection and a transaction.
    matrix = np.stack([np.frombuffer(row.embedding or b"", dtype=np.float32) for row in rows])
    probe = np.asarray(embeddings.embed_query(text), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(probe) or 1.0)
    return rows, matrix @ probe / np.where(norms == 0, 1.0, norms)


def has_memories(tenant: str, conversation_id: str = "", *, settings: Settings | None = None) -> bool:
    """Whether recall_memories could find anything: the tenant has a memory of this conversation or a
    tenant-wide one. One indexed EXISTS query (ix_memories_scope), no model: the price every answer pays
    when a tenant keeps no memories."""
    tenant = _check_tenant(tenant)
    scope = _check_conversation(conversation_id or "") or ""
    # One statement built at import with bound parameters, run on a Core connection rather than an ORM
    # session: building the expression and the session's bookkeeping were most of this query's time (issue
    # 22 §6). Not cached in the process: another process (the CLI beside the API, another worker) may add a
    # memory to the same database at any time.
    with get_database(_settings(settings)).engine.connect() as connection:
        return bool(connection.scalar(_HAS_MEMORIES, {"tenant": tenant, "scope": scope}))


#: has_memories' query: a memory of the tenant in the conversation `scope` or tenant-wide ('' when `scope` is
#: '' too, the same scopes as `_scopes`).
_HAS_MEMORIES = select(
    exists().where(
        MemoryRow.tenant == bindparam("tenant"),
        MemoryRow.conversation_id.in_([bindparam("scope"), literal("")]),
    )
)


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
) -> list[Memory]:
    """The memories an answer to `query` should see: at most `k` of the tenant's memories of
    `conversation_id` and its tenant-wide ones (conversation ''), each at least `min_score` similar to the
    query; the conversation's own first, then the tenant-wide, each by similarity. Another conversation's
    memories are never recalled (they were kept for it). No memory in scope: no embedding call."""
    tenant = _check_tenant(tenant)
    text = (query or "").strip()
    if not text or k < 1:
        return []
    scopes = _scopes(conversation_id)
    settings = _settings(settings)
    database = get_database(settings)
    statement = select(MemoryRow).where(MemoryRow.tenant == tenant, MemoryRow.conversation_id.in_(scopes))
    if embeddings is None:
        embeddings, model_key = _embeddings()
    rows, scores = _scored_rows(statement, text, database, embeddings, model_key or "custom")
    kept = [index for index in range(len(rows)) if scores[index] >= min_score]
    # Own conversation first (a note kept for this conversation is the most specific), then by similarity.
    kept.sort(key=lambda index: (rows[index].conversation_id == "", -scores[index]))
    return [_memory(rows[index], scores[index]) for index in kept[:k]]


def list_memories(
    *,
    tenant: str,
    conversation_id: str | None = None,
    limit: int = 100,
    settings: Settings | None = None,
) -> list[Memory]:
    """The tenant's memories (of one conversation when given), newest first."""
    tenant = _check_tenant(tenant)
    statement = select(MemoryRow).where(MemoryRow.tenant == tenant)
    if _check_conversation(conversation_id) is not None:
        statement = statement.where(MemoryRow.conversation_id == conversation_id)
    statement = statement.order_by(MemoryRow.id.desc()).limit(max(1, limit))
    with get_database(_settings(settings)).session() as session:
        return [_memory(row) for row in session.scalars(statement)]


def get_memory(memory_id: str | int, *, tenant: str, settings: Settings | None = None) -> Memory | None:
    """The tenant's memory with this id, or None (also for another tenant's id: the same answer as for an
    id nobody has). InvalidMemoryError for a malformed id."""
    tenant = _check_tenant(tenant)
    public_id = parse_memory_id(memory_id)
    statement = select(MemoryRow).where(MemoryRow.tenant == tenant, MemoryRow.public_id == public_id)
    with get_database(_settings(settings)).session() as session:
        row = session.scalars(statement).first()
        return _memory(row) if row is not None else None


def delete_memories(
    *,
    tenant: str,
    memory_ids: Sequence[str | int] | None = None,
    conversation_id: str | None = None,
    everything: bool = False,
    settings: Settings | None = None,
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
    statement = delete(MemoryRow).where(MemoryRow.tenant == tenant)
    if public_ids:
        statement = statement.where(MemoryRow.public_id.in_(public_ids))
    if conversation_id is not None:
        statement = statement.where(MemoryRow.conversation_id == conversation_id)
    database = get_database(_settings(settings))
    with database.session() as session:
        deleted = int(session.execute(statement).rowcount or 0)
    if deleted:
        write_audit(
            "memory_delete",
            tenant=tenant,
            conversation_id=conversation_id or "",
            database=database,
            detail={"deleted": deleted, "ids": public_ids},
        )
    return deleted
