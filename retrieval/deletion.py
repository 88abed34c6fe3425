"""Deleting indexed content: a document (by source or doc id), a collection, or a conversation's chunks. As in
ingestion, the catalog and keyword index change in one transaction first (the content leaves every search
at that commit), then Chroma drops the vectors; a crash between leaves stray vectors that search ignores.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

from sqlalchemy import delete, func, select, update

from persistence.catalog_tables import chunks_table, documents_table
from retrieval.knowledge_base import KnowledgeBase


@dataclass
class DeleteSummary:
    """What a deletion removed."""

    documents: int = 0
    chunks: int = 0
    sources: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """JSON-ready summary."""
        return asdict(self)


def delete_content(
    kb: KnowledgeBase,
    tenant: str,
    *,
    source: str | None = None,
    doc_id: str | None = None,
    collection: str | None = None,
    conversation_id: str | None = None,
) -> DeleteSummary:
    """Delete what matches, within one tenant: a source or doc id (optionally in one collection), a whole
    collection, or a conversation's chunks. Raises ValueError when nothing selects what to delete."""
    if not any((source, doc_id, collection, conversation_id)):
        raise ValueError("nothing to delete: give a document, a collection or a conversation")
    if conversation_id or doc_id:
        summary = _delete_chunks(
            kb, tenant, collection, doc_id=doc_id, conversation_id=conversation_id, source=source
        )
        if conversation_id and not (doc_id or source):
            # The conversation's summaries and director events live in the long-term store (not chunks).
            from persistence.summary_store import delete_conversation
            from retrieval.summary_migration import summaries_store

            delete_conversation(summaries_store(kb).store, tenant, conversation_id)
        return summary
    summary = DeleteSummary()
    for record in kb.catalog.documents(tenant, collection):
        if source is not None and record.source != source:
            continue
        removed = kb.catalog.delete_document(record)
        kb.vectors.delete(tenant, record.collection, removed)
        summary.documents += 1
        summary.chunks += len(removed)
        summary.sources.append(record.source)
    return summary


def _delete_chunks(
    kb: KnowledgeBase,
    tenant: str,
    collection: str | None,
    *,
    doc_id: str | None,
    conversation_id: str | None,
    source: str | None,
) -> DeleteSummary:
    """Delete single chunks selected by their metadata (doc id, conversation), in one transaction."""
    catalog = kb.catalog
    query = select(
        chunks_table.c.id, chunks_table.c.chunk_id, chunks_table.c.document_id, chunks_table.c.collection
    )
    query = query.where(chunks_table.c.tenant == tenant)
    if collection:
        query = query.where(chunks_table.c.collection == collection)
    if doc_id:
        query = query.where(catalog.metadata_value("doc_id") == doc_id)
    if conversation_id:
        query = query.where(catalog.metadata_value("conversation_id") == conversation_id)
    if source:
        query = query.where(catalog.metadata_value("source") == source)
    summary = DeleteSummary()
    by_collection: dict[str, list[str]] = defaultdict(list)
    with catalog.engine.begin() as connection:
        rows = connection.execute(query).all()
        if not rows:
            return summary
        catalog.keyword_index.remove(connection, [row.id for row in rows])
        connection.execute(delete(chunks_table).where(chunks_table.c.id.in_([row.id for row in rows])))
        for document_id in {row.document_id for row in rows}:
            left = connection.execute(
                select(func.count())
                .select_from(chunks_table)
                .where(chunks_table.c.document_id == document_id)
            ).scalar_one()
            if left:
                connection.execute(
                    update(documents_table).where(documents_table.c.id == document_id).values(n_chunks=left)
                )
                continue
            removed_source = connection.execute(
                select(documents_table.c.source).where(documents_table.c.id == document_id)
            ).scalar_one()
            connection.execute(delete(documents_table).where(documents_table.c.id == document_id))
            summary.documents += 1
            summary.sources.append(removed_source)
        for row in rows:
            by_collection[row.collection].append(row.chunk_id)
    for name, chunk_ids in by_collection.items():
        kb.vectors.delete(tenant, name, chunk_ids)
    summary.chunks = len(rows)
    return summary
