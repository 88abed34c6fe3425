"""A thread's conversation memory as the long-term store holds it, in the catalog's chunk form (tests)."""

from __future__ import annotations

from persistence.catalog_tables import StoredChunk
from persistence.long_term_store import all_items
from persistence.store_search import STORE_PAGE
from persistence.summary_store import item_metadata, summary_scope, thread_record
from retrieval.knowledge_base import KnowledgeBase
from retrieval.summary_migration import summaries_store


def stored_thread(kb: KnowledgeBase, tenant: str, thread_id: str) -> list[StoredChunk]:
    """The thread's summaries and details in `tenant`'s namespace ([] when it has none)."""
    store = summaries_store(kb).store
    record = thread_record(store, tenant, thread_id)
    if record is None:
        return []
    scope = summary_scope(tenant, record.conversation_id)
    items = all_items(store, scope, page=STORE_PAGE, filter={"thread_id": thread_id})
    return [StoredChunk(item.key, str(item.value["text"]), item_metadata(item)) for item in items]
