"""The catalog's tables (documents, chunks) and the records read from them (also read directly by
retrieval.deletion).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata_obj = MetaData()
documents_table = Table(
    "documents",
    metadata_obj,
    Column("id", Integer, primary_key=True),
    Column("tenant", String, nullable=False),
    Column("collection", String, nullable=False),
    Column("source", String, nullable=False),
    Column("file_hash", String, nullable=False),
    Column("doc_type", String, nullable=False, default=""),
    Column("title", String, nullable=False, default=""),
    Column("n_chunks", Integer, nullable=False, default=0),
    Column("updated_at", Float, nullable=False),
    UniqueConstraint("tenant", "collection", "source", name="uq_document_source"),
)
chunks_table = Table(
    "chunks",
    metadata_obj,
    Column("id", Integer, primary_key=True),
    Column("chunk_id", String, nullable=False, unique=True),
    Column("document_id", Integer, ForeignKey("documents.id", ondelete="CASCADE"), nullable=False),
    Column("tenant", String, nullable=False),
    Column("collection", String, nullable=False),
    Column("content_hash", String, nullable=False),
    Column("text", Text, nullable=False),
    Column("metadata", Text, nullable=False),
    Index("ix_chunks_scope", "tenant", "collection"),
    Index("ix_chunks_document", "document_id"),
)


@dataclass(frozen=True)
class DocumentRecord:
    """What the catalog knows about one indexed source."""

    id: int
    tenant: str
    collection: str
    source: str
    file_hash: str
    n_chunks: int


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as the catalog stores it."""

    chunk_id: str
    text: str
    metadata: dict[str, Any]


def document_record(row: Any) -> DocumentRecord:
    """The record of a `documents` row (a mapping of its columns)."""
    return DocumentRecord(
        id=row["id"],
        tenant=row["tenant"],
        collection=row["collection"],
        source=row["source"],
        file_hash=row["file_hash"],
        n_chunks=row["n_chunks"],
    )
