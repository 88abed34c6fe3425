"""Chunks as the stores keep them: the full metadata schema, deterministic ids, and what is embedded (apart
from ingestion, so the vector repair and search use them without an import cycle).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from core.metadata import bound_record_metadata
from core.types import CHUNK_METADATA_DEFAULTS, Chunk, LoadedDocument, MetadataValue, Section
from retrieval.embeddings import content_hash
from retrieval.knowledge_base import KnowledgeBase

#: Chunks embedded per call: bounds memory and gives the progress bar something to show.
EMBED_BATCH_CHUNKS = 256


def chunk_id_for(tenant: str, collection: str, source: str, doc_id: str, index: int, text_hash: str) -> str:
    """Deterministic chunk id: the same chunk of the same source always gets the same id."""
    key = "\x1f".join((tenant, collection, source, doc_id, str(index), text_hash))
    return hashlib.sha1(key.encode("utf-8")).hexdigest()


def embedding_input(title: str, text: str) -> str:
    """What is embedded for a chunk: its text, headed by the document title when the text lacks it
    (a later chunk of a long document otherwise loses the document's subject)."""
    if title and not text.startswith(title):
        return f"{title}\n{text}"
    return text


def build_chunks(
    documents: Sequence[LoadedDocument],
    kb: KnowledgeBase,
    *,
    tenant: str,
    collection: str,
    doc_hash: str,
) -> list[Chunk]:
    """Chunk documents and attach the full metadata schema to every chunk."""
    now = time.time()
    created_at = datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds")
    chunks: list[Chunk] = []
    for document in documents:
        doc_id = document.doc_id or document.source
        sections = (
            [Section(document.text)]
            if document.unchunked
            else [s for s in document.sections if s.text.strip()]
        )
        # Only settable keys and bounded values reach the stores, whoever built the document.
        given = bound_record_metadata(document.metadata).kept
        index = 0
        for section in sections:
            texts = [section.text.strip()] if document.unchunked else kb.chunk(section.text, tenant)
            for text in texts:
                text_hash = content_hash(text)
                metadata: dict[str, MetadataValue] = dict(CHUNK_METADATA_DEFAULTS)
                metadata.update(given)
                metadata.update(
                    collection=collection,
                    source=document.source,
                    doc_id=doc_id,
                    title=document.title,
                    page=section.page if section.page is not None else -1,
                    section=section.section or "",
                    chapter=section.chapter or str(document.metadata.get("chapter", "")),
                    tenant=tenant,
                    doc_type=str(document.metadata.get("doc_type") or document.doc_type),
                    created_at=str(document.metadata.get("created_at") or created_at),
                    created_ts=now,
                    chunk_index=index,
                    content_hash=text_hash,
                    doc_hash=doc_hash,
                )
                chunk_id = chunk_id_for(tenant, collection, document.source, doc_id, index, text_hash)
                chunks.append(Chunk(chunk_id, text, metadata))
                index += 1
    return chunks


def source_hash(data: bytes, signature: str) -> str:
    """Hash of a file's bytes and the index signature (chunking and model)."""
    digest = hashlib.sha256(signature.encode("utf-8"))
    digest.update(data)
    return digest.hexdigest()
