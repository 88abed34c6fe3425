"""Plain data types shared by loading, chunking, indexing and search."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

#: Metadata values allowed on a chunk (Chroma accepts only scalars).
MetadataValue = str | int | float | bool

#: Every chunk carries every one of these keys, so filters behave the same in Chroma and in BM25
#: (Chroma's `where` silently drops records that lack a key). Missing values use these defaults.
CHUNK_METADATA_DEFAULTS: dict[str, MetadataValue] = {
    "collection": "",
    "source": "",
    "doc_id": "",
    "title": "",
    "page": -1,
    "section": "",
    "chapter": "",
    "tenant": "",
    "conversation_id": "",
    "doc_type": "",
    "created_at": "",
    "created_ts": 0.0,
    "character_id": "",
    "background_id": "",
    "chunk_index": 0,
    "content_hash": "",
    "doc_hash": "",
    "level": "detail",
}

#: Keys ingestion sets itself on every chunk: a record's own value for one of them is never kept.
ENGINE_METADATA_KEYS = frozenset(
    {"collection", "source", "doc_id", "tenant", "chunk_index", "content_hash", "doc_hash", "created_ts"}
)
#: Custom metadata keys (`category`, `session_id`...): identifier-like, as each becomes a Chroma field and a
#: JSON path in SQL.
CUSTOM_METADATA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def is_custom_metadata_key(key: str) -> bool:
    """A key outside the schema that a record may carry and a filter may use."""
    return (
        CUSTOM_METADATA_KEY.fullmatch(key) is not None
        and key not in CHUNK_METADATA_DEFAULTS
        and key not in ENGINE_METADATA_KEYS
    )


@dataclass
class Section:
    """A piece of a loaded file that keeps its own page or heading (a PDF page, a markdown section)."""

    text: str
    page: int | None = None
    section: str | None = None
    chapter: str | None = None


@dataclass
class LoadedDocument:
    """One document read from a file: a whole file, or one record of a JSON/JSONL file."""

    source: str
    """Path of the file it came from (records of one file share it)."""
    title: str
    doc_type: str
    """md | txt | html | pdf | docx | record."""
    sections: list[Section]
    doc_id: str = ""
    """Stable id inside the source: the record id for JSON records, else the file path."""
    unchunked: bool = False
    """An "event": indexed as a single chunk, never split."""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    """Extra metadata from the record (chapter, conversation_id, doc_type, level, created_at...)."""
    metadata_left_out: int = 0
    """Fields of the record's metadata left out by the bounds of core.metadata (ingestion reports them)."""

    @property
    def text(self) -> str:
        """All section texts joined by blank lines."""
        return "\n\n".join(section.text for section in self.sections if section.text)


@dataclass
class Chunk:
    """A unit of retrieval: text plus the full metadata schema."""

    chunk_id: str
    text: str
    metadata: dict[str, MetadataValue]


@dataclass
class SearchHit:
    """One search result. `score` is the fused score the ranking used; the per-retriever scores explain it."""

    chunk_id: str
    text: str
    metadata: dict[str, Any]
    score: float
    dense_score: float | None = None
    bm25_score: float | None = None

    @property
    def doc_id(self) -> str:
        """The document this chunk belongs to."""
        return str(self.metadata.get("doc_id") or self.metadata.get("source") or self.chunk_id)
