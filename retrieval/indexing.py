"""Indexing one source's documents: chunk, embed in batches, publish atomically (the write order of
retrieval.ingest); for callers that index a text they hold (an API body, an event) without a file walk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from core.types import LoadedDocument, MetadataValue, Section
from retrieval import chunk_records
from retrieval.chunk_records import build_chunks, embedding_input
from retrieval.embeddings import content_hash
from retrieval.knowledge_base import KnowledgeBase
from retrieval.loaders import LoaderError, StopRequested

#: Progress callback: (event, amount) with event "file" (one source done) or "chunks" (n chunks embedded).
ProgressCallback = Callable[[str, int], None]
#: Stop hook: returns True once the caller no longer wants the run (e.g. `threading.Event().is_set`).
StopCallback = Callable[[], bool]


def noop_progress(_event: str, _amount: int) -> None:
    """The progress callback of a caller that shows none."""
    return None


def index_documents(
    kb: KnowledgeBase,
    documents: Sequence[LoadedDocument],
    *,
    source: str,
    source_hash: str,
    tenant: str,
    collection: str,
    progress: ProgressCallback = noop_progress,
    should_stop: StopCallback | None = None,
) -> int:
    """Chunk, embed and atomically store the documents of one source; the number of chunks. `should_stop` is
    asked before each embedding batch; True raises StopRequested before the catalog commit."""
    chunks = build_chunks(documents, kb, tenant=tenant, collection=collection, doc_hash=source_hash)
    if not chunks:
        raise LoaderError("empty document: no text to index")
    # Chroma writes batch i while the model embeds batch i + 1; all finish before the catalog commit.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chroma-upsert") as writer:
        pending: list[Future[None]] = []
        for start in range(0, len(chunks), chunk_records.EMBED_BATCH_CHUNKS):
            if should_stop is not None and should_stop():
                raise StopRequested("ingestion stopped by the caller")
            batch = chunks[start : start + chunk_records.EMBED_BATCH_CHUNKS]
            inputs = [embedding_input(str(chunk.metadata["title"]), chunk.text) for chunk in batch]
            vectors = kb.embeddings.for_tenant(tenant).embed_documents(inputs)
            pending.append(writer.submit(kb.vectors.upsert, tenant, collection, batch, vectors))
            progress("chunks", len(batch))
        for write in pending:
            write.result()
    first = documents[0]
    old_ids = kb.catalog.replace_document(
        tenant=tenant,
        collection=collection,
        source=source,
        file_hash=source_hash,
        doc_type=first.doc_type,
        title=first.title if len(documents) == 1 else Path(source).name,
        chunks=chunks,
    )
    stale = sorted(set(old_ids) - {chunk.chunk_id for chunk in chunks})
    kb.vectors.delete(tenant, collection, stale)
    return len(chunks)


def _index_text(
    kb: KnowledgeBase,
    text: str,
    document: LoadedDocument,
    tenant: str,
    collection: str,
    stop: StopCallback | None,
) -> int:
    """Index one text given by a caller (not read from a file) as `document`; its chunk count."""
    return index_documents(
        kb,
        [document],
        source=document.source,
        source_hash=content_hash(text),
        tenant=tenant,
        collection=collection,
        should_stop=stop,
    )


def index_event(
    kb: KnowledgeBase,
    text: str,
    *,
    tenant: str,
    collection: str,
    title: str = "",
    metadata: dict[str, MetadataValue] | None = None,
    should_stop: StopCallback | None = None,
) -> str:
    """Index one event (a message, a note) as a single unchunked chunk; return its source key. An event of a
    conversation (`metadata.conversation_id`) is also written into the conversation's director scope of the
    long-term store (persistence.summary_store)."""
    if not text.strip():
        raise LoaderError("empty event: no text")
    source = f"event:{content_hash(text)[:16]}"
    document = LoadedDocument(
        source, title, "event", [Section(text)], doc_id=source, unchunked=True, metadata=dict(metadata or {})
    )
    _index_text(kb, text, document, tenant, collection, should_stop)
    if (metadata or {}).get("conversation_id"):  # the director recalls it from the long-term store
        from retrieval.summary_migration import store_director_event

        store_director_event(kb, tenant=tenant, collection=collection, source=source)
    return source


def index_raw_text(
    kb: KnowledgeBase,
    text: str,
    *,
    tenant: str,
    collection: str,
    title: str = "",
    doc_id: str | None = None,
    metadata: dict[str, MetadataValue] | None = None,
    should_stop: StopCallback | None = None,
) -> tuple[str, int]:
    """Index raw text chunked like a file, under the source `text:<doc_id or content hash>`; return the
    source key and the chunk count (`doc_type` from the metadata, else "text")."""
    key = doc_id or content_hash(text)[:16]
    source = f"text:{key}"
    doc_type = str((metadata or {}).get("doc_type") or "text")
    document = LoadedDocument(
        source,
        title or key,
        doc_type,
        [Section(text)],
        doc_id=doc_id or source,
        metadata=dict(metadata or {}),
    )
    return source, _index_text(kb, text, document, tenant, collection, should_stop)
