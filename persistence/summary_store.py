"""Conversation summaries and director events in the long-term store.

("summaries", tenant, conversation) holds a thread's block summaries (`level=summary`) and per-turn details
(`level=detail`), their links flat in the value for the store's filters; ("summaries", tenant, "_") one record
per summarized thread (its conversation, turns and digest); ("director", tenant, conversation) the events
the director recalls. Items carry `doc_type=event`, thread records do not, so a doc-type filter never returns
a record. A read names its tenant's namespace prefix, so no filter can reach another tenant's items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, Item

from core.types import SearchHit
from persistence.long_term_store import (
    DIRECTOR,
    SUMMARIES,
    TEXT_FIELD,
    LongTermStore,
    all_items,
    delete_items,
    namespace,
)
from persistence.store_search import STORE_PAGE, put_embedded, ranked

#: Levels of the two-level conversation memory (deep search expands a summary into its details).
SUMMARY_LEVEL = "summary"
DETAIL_LEVEL = "detail"
#: `doc_type` of every summary, detail and director event (what the director recalls).
EVENT_DOC_TYPE = "event"
#: Value fields that are not the item's metadata when it is read back as a search hit.
_NOT_METADATA = frozenset({TEXT_FIELD, "vector", "model_key"})
#: With a caller's predicate, nearest items fetched per item wanted (the predicate then drops some).
FILTERED_FETCH_FACTOR = 10


class ThreadRecord(NamedTuple):
    """What the store holds of one summarized thread (its record in the tenant-wide scope)."""

    thread_id: str
    conversation_id: str
    turns: int
    digest: str


def summary_scope(tenant: str, conversation_id: str) -> tuple[str, ...]:
    """The namespace of one conversation's summaries and details."""
    return namespace(SUMMARIES, tenant, conversation_id)


def director_scope(tenant: str, conversation_id: str) -> tuple[str, ...]:
    """The namespace of one conversation's director events."""
    return namespace(DIRECTOR, tenant, conversation_id)


def threads_scope(tenant: str) -> tuple[str, ...]:
    """The namespace of the tenant's thread records (the tenant-wide label no conversation maps to)."""
    return namespace(SUMMARIES, tenant, "")


def thread_record(store: BaseStore, tenant: str, thread_id: str) -> ThreadRecord | None:
    """The thread's record, or None when it was never summarized into this store."""
    item = store.get(threads_scope(tenant), thread_id)
    if item is None:
        return None
    value = item.value
    return ThreadRecord(
        str(value.get("thread_id", thread_id)),
        str(value.get("conversation_id", "")),
        int(value.get("turns", 0)),
        str(value.get("digest", "")),
    )


def put_thread_record(store: BaseStore, tenant: str, record: ThreadRecord) -> None:
    """Write the thread's record (last, after its items: a record always describes items that exist)."""
    store.put(threads_scope(tenant), record.thread_id, record._asdict(), index=False)


def thread_items(store: BaseStore, tenant: str, conversation_id: str, thread_id: str) -> list[Item]:
    """The thread's summaries and details stored under `conversation_id`."""
    scope = summary_scope(tenant, conversation_id)
    return all_items(store, scope, page=STORE_PAGE, filter={"thread_id": thread_id})


def replace_thread(
    found: LongTermStore,
    tenant: str,
    record: ThreadRecord,
    entries: Sequence[tuple[str, dict[str, Any]]],
    embeddings: Embeddings,
    model_key: str,
) -> int:
    """Replace everything the thread had in the store by `entries` ((key, value) pairs, written under the
    record's conversation) and write its record; how many items were written. The items the thread left
    under an earlier conversation go too."""
    store = found.store
    earlier = thread_record(store, tenant, record.thread_id)
    conversations = {record.conversation_id} | ({earlier.conversation_id} if earlier else set())
    keep = {key for key, _ in entries}
    stale = [
        item
        for conversation_id in sorted(conversations)
        for item in thread_items(store, tenant, conversation_id, record.thread_id)
        if conversation_id != record.conversation_id or item.key not in keep
    ]
    delete_items(store, stale)
    scope = summary_scope(tenant, record.conversation_id)
    drafts = [
        Item(value=value, key=key, namespace=scope, created_at=_now(), updated_at=_now())
        for key, value in entries
    ]
    put_embedded(found, drafts, embeddings, model_key)
    put_thread_record(store, tenant, record)
    return len(drafts)


def _now() -> datetime:
    return datetime.now(UTC)


def nearest(
    found: LongTermStore,
    scopes: Sequence[tuple[str, ...]],
    text: str,
    k: int,
    embeddings: Embeddings,
    model_key: str,
    *,
    filter: dict[str, Any] | None = None,  # noqa: A002 - the store's own name for it
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> list[tuple[Item, float]]:
    """The `k` items nearest `text` over `scopes` (each ranked by persistence.store_search, then merged by
    score, best first), matching the store `filter` and the caller's `keep` predicate over their metadata."""
    if k <= 0 or not text.strip():
        return []
    fetch = k * FILTERED_FETCH_FACTOR if keep is not None else k
    merged: list[tuple[Item, float]] = []
    for scope in scopes:
        merged.extend(ranked(found, scope, text, fetch, embeddings, model_key, filter=filter))
    if keep is not None:
        merged = [(item, score) for item, score in merged if keep(item_metadata(item))]
    merged.sort(key=lambda pair: -pair[1])
    return merged[:k]


def item_metadata(item: Item) -> dict[str, Any]:
    """An item's value without its text and vector: the metadata its search hit carries."""
    return {key: value for key, value in item.value.items() if key not in _NOT_METADATA}


def item_hit(item: Item, score: float) -> SearchHit:
    """A stored summary, detail or director event as a search hit (its key is the chunk id)."""
    return SearchHit(
        chunk_id=item.key,
        text=str(item.value.get(TEXT_FIELD, "")),
        metadata=item_metadata(item),
        score=score,
        dense_score=score,
    )


def has_items(store: BaseStore, prefix: tuple[str, ...]) -> bool:
    """Whether anything is stored under `prefix` (one read, no model)."""
    return bool(store.search(prefix, limit=1))


def delete_conversation(store: BaseStore, tenant: str, conversation_id: str) -> int:
    """Delete a conversation's summaries, details, director events and its threads' records; how many."""
    scopes = (summary_scope(tenant, conversation_id), director_scope(tenant, conversation_id))
    items = [item for scope in scopes for item in all_items(store, scope, page=STORE_PAGE)]
    records = all_items(
        store, threads_scope(tenant), page=STORE_PAGE, filter={"conversation_id": conversation_id}
    )
    return delete_items(store, [*items, *records])
