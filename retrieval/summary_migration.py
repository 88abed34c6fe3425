"""Conversation summaries and director events kept in the knowledge base, copied once into the long-term
store (persistence.summary_store), and the store the summaries' readers and writers use.

A summarized thread's chunks become items of ("summaries", tenant, conversation) and leave the catalog and
Chroma; an event indexed with a conversation id is copied to ("director", tenant, conversation) and stays a
citable document. Done in Python because the vectors live in Chroma, which no Alembic migration sees. The
copy is resumable and never duplicates (ids already there are skipped, a marker item is written last);
vectors are not copied: the first search of a scope embeds the items with the current model.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from langgraph.store.base import BaseStore, GetOp, PutOp

from persistence.catalog_tables import DocumentRecord, StoredChunk
from persistence.long_term_store import MIGRATION_NAMESPACE, TEXT_FIELD, LongTermStore, long_term_store
from persistence.store_search import NOT_INDEXED, resolve_store
from persistence.summary_store import (
    DETAIL_LEVEL,
    EVENT_DOC_TYPE,
    SUMMARY_LEVEL,
    ThreadRecord,
    director_scope,
    put_thread_record,
    summary_scope,
    thread_record,
)
from retrieval.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

#: Marker of the finished copy (in the namespace no tenant's items use).
MARKER_KEY = "summaries_catalog"
#: Start of a summarized thread's catalog source, and of an indexed event's.
CONVERSATION_SOURCE_PREFIX = "conversation:"
EVENT_SOURCE_PREFIX = "event:"
#: Start of a summarized thread's catalog hash (retrieval.conversation_index's digest has the same form).
TURNS_HASH_PREFIX = "turns="

_copied: set[str] = set()
_copied_lock = threading.Lock()


def summaries_store(kb: KnowledgeBase, store: BaseStore | LongTermStore | None = None) -> LongTermStore:
    """The store summaries and director events are read from and written to: the caller's (a graph run's
    `runtime.store`), else the settings' long-term store; the knowledge base's old rows are copied into the
    settings' store first (checked once per location and process)."""
    opened = long_term_store(kb.settings)
    with _copied_lock:
        if opened.location not in _copied:
            copy_legacy_summaries(kb, opened.store)
            _copied.add(opened.location)
    return resolve_store(kb.settings, store) if store is not None else opened


def legacy_copied(store: BaseStore) -> bool:
    """Whether this store already holds the knowledge base's summaries and director events."""
    return store.get(MIGRATION_NAMESPACE, MARKER_KEY) is not None


def copy_legacy_summaries(kb: KnowledgeBase, store: BaseStore) -> int:
    """Copy the catalog's conversation summaries and conversation events into `store` unless its marker
    says it was done; how many items were written (0 when done before, or there was nothing)."""
    if legacy_copied(store):
        return 0
    copied = 0
    for record in kb.catalog.documents():
        if record.source.startswith(CONVERSATION_SOURCE_PREFIX):
            copied += _copy_thread(kb, store, record)
        elif record.source.startswith(EVENT_SOURCE_PREFIX):
            copied += _copy_events(kb, store, record)
    store.put(MIGRATION_NAMESPACE, MARKER_KEY, {"copied": copied}, index=False)
    if copied:
        logger.info("copied %d conversation summaries and events into the long-term store", copied)
    return copied


def _put_missing(store: BaseStore, places: list[tuple[tuple[str, ...], str, dict[str, Any]]]) -> int:
    """Write the (scope, key, value) places not in the store yet; how many."""
    present = store.batch([GetOp(scope, key) for scope, key, _ in places])
    writes = [
        PutOp(scope, key, value, index=False)
        for (scope, key, value), found in zip(places, present, strict=True)
        if found is None
    ]
    if writes:
        store.batch(writes)
    return len(writes)


def _value(record: DocumentRecord, chunk: StoredChunk) -> dict[str, Any]:
    return {
        **chunk.metadata,
        "tenant": record.tenant,
        "collection": record.collection,
        "source": record.source,
        "doc_type": EVENT_DOC_TYPE,
        TEXT_FIELD: chunk.text,
        "model_key": NOT_INDEXED,
    }


def _thread_chunks(kb: KnowledgeBase, record: DocumentRecord) -> Iterator[StoredChunk]:
    for chunk in kb.catalog.source_chunks(record.tenant, record.collection, record.source):
        if chunk.metadata.get("level") in (SUMMARY_LEVEL, DETAIL_LEVEL) and chunk.metadata.get(
            "conversation_id"
        ):
            yield chunk


def _copy_thread(kb: KnowledgeBase, store: BaseStore, record: DocumentRecord) -> int:
    """Copy one summarized thread, write its record, then remove the source from the knowledge base."""
    thread_id = record.source[len(CONVERSATION_SOURCE_PREFIX) :]
    chunks = list(_thread_chunks(kb, record))
    places = [
        (
            summary_scope(record.tenant, str(chunk.metadata["conversation_id"])),
            chunk.chunk_id,
            _value(record, chunk),
        )
        for chunk in chunks
    ]
    copied = _put_missing(store, places)
    if chunks and thread_record(store, record.tenant, thread_id) is None:
        digest = record.file_hash if record.file_hash.startswith(TURNS_HASH_PREFIX) else ""
        count = digest[len(TURNS_HASH_PREFIX) :].split(":", 1)[0] if digest else ""
        conversation_id = str(chunks[0].metadata["conversation_id"])
        turns = int(count) if count.isdigit() else 0
        put_thread_record(store, record.tenant, ThreadRecord(thread_id, conversation_id, turns, digest))
    removed = kb.catalog.delete_document(record)
    kb.vectors.delete(record.tenant, record.collection, removed)
    return copied


def store_director_event(
    kb: KnowledgeBase, *, tenant: str, collection: str, source: str, store: BaseStore | None = None
) -> int:
    """Write an event just indexed with a conversation id into its director scope (retrieval.indexing's
    index_event calls it), replacing an earlier copy of the same chunk; how many items were written."""
    record = kb.catalog.document(tenant, collection, source)
    if record is None:
        return 0
    return _copy_events(kb, summaries_store(kb, store).store, record, replace=True)


def _copy_events(
    kb: KnowledgeBase, store: BaseStore, record: DocumentRecord, *, replace: bool = False
) -> int:
    """Copy an indexed event of a conversation into its director scope (the document stays indexed)."""
    places = [
        (
            director_scope(record.tenant, str(chunk.metadata["conversation_id"])),
            chunk.chunk_id,
            _value(record, chunk),
        )
        for chunk in kb.catalog.source_chunks(record.tenant, record.collection, record.source)
        if chunk.metadata.get("doc_type") == EVENT_DOC_TYPE and chunk.metadata.get("conversation_id")
    ]
    if replace and places:
        store.batch([PutOp(scope, key, value, index=False) for scope, key, value in places])
        return len(places)
    return _put_missing(store, places) if places else 0
