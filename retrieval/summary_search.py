"""Reads of conversation memory in the long-term store: the summaries a turn's retrieval adds ("deep search"
adds their details), and the events the director recalls. Every read names its tenant's namespaces, so no
caller input reaches another tenant's items; scores are cosines of the knowledge base's embedding model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph.store.base import BaseStore

from core.types import SearchHit
from persistence.long_term_store import DIRECTOR, SUMMARIES, LongTermStore, namespace
from persistence.summary_store import (
    DETAIL_LEVEL,
    EVENT_DOC_TYPE,
    SUMMARY_LEVEL,
    director_scope,
    has_items,
    item_hit,
    nearest,
    summary_scope,
)
from retrieval.filters import matches, parse_filter
from retrieval.knowledge_base import KnowledgeBase
from retrieval.summary_migration import summaries_store


def conversation_summaries(
    kb: KnowledgeBase,
    text: str,
    *,
    tenant: str,
    conversation_id: str,
    k: int,
    details_per_summary: int = 0,
    store: BaseStore | LongTermStore | None = None,
) -> list[SearchHit]:
    """The conversation's `k` block summaries nearest `text`, each followed by its `details_per_summary`
    detail events nearest `text` (deep search; 0: summaries only). [] without a conversation."""
    if not conversation_id or k <= 0 or not text.strip():
        return []
    found = summaries_store(kb, store)
    scope = summary_scope(tenant, conversation_id)
    if not has_items(found.store, scope):
        return []
    embeddings = kb.embeddings.for_tenant(tenant)
    model_key = embeddings.model_key
    summaries = nearest(found, [scope], text, k, embeddings, model_key, filter={"level": SUMMARY_LEVEL})
    hits: list[SearchHit] = []
    for item, score in summaries:
        hits.append(item_hit(item, score))
        if details_per_summary <= 0:
            continue
        block = {"level": DETAIL_LEVEL, "doc_id": item.value.get("doc_id", "")}
        details = nearest(found, [scope], text, details_per_summary, embeddings, model_key, filter=block)
        hits.extend(item_hit(detail, detail_score) for detail, detail_score in details)
    return hits


@dataclass(frozen=True)
class DirectorHits:
    """What the director found: this conversation's events, then the other conversations' (best first)."""

    conversation: list[SearchHit]
    others: list[SearchHit]


def director_search(
    kb: KnowledgeBase,
    question: str,
    *,
    tenant: str,
    conversation_id: str,
    conversation_k: int,
    other_k: int,
    filters: dict[str, Any] | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> DirectorHits:
    """The events nearest `question`: `conversation_k` of `conversation_id`, `other_k` of the tenant's other
    conversations, each narrowed by `filters`; nothing without a conversation id."""
    if not conversation_id or not question.strip():
        return DirectorHits([], [])
    node = parse_filter(filters) if filters else None

    def keep(metadata: dict[str, Any]) -> bool:
        return matches(node, metadata)

    found = summaries_store(kb, store)
    inside_scopes = [summary_scope(tenant, conversation_id), director_scope(tenant, conversation_id)]
    outside_scopes = [namespace(SUMMARIES, tenant), namespace(DIRECTOR, tenant)]
    if not any(has_items(found.store, scope) for scope in outside_scopes):
        return DirectorHits([], [])
    embeddings = kb.embeddings.for_tenant(tenant)
    model_key = embeddings.model_key
    predicate = keep if node is not None else None
    events = {"doc_type": EVENT_DOC_TYPE}
    inside = nearest(
        found, inside_scopes, question, conversation_k, embeddings, model_key, filter=events, keep=predicate
    )
    others = {**events, "conversation_id": {"$ne": conversation_id}}
    outside = nearest(
        found, outside_scopes, question, other_k, embeddings, model_key, filter=others, keep=predicate
    )
    return DirectorHits(
        [item_hit(item, score) for item, score in inside], [item_hit(item, score) for item, score in outside]
    )
