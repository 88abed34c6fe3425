"""Agreement between the catalog and the vector store, and its repair from the catalog alone.

Why the catalog is the reference: it holds every chunk's text and metadata and is written atomically
(see persistence.catalog), while Chroma is a derived index that can be lost on its own (a deleted folder, a
Chroma server reset). Such a loss was silent: dense search just found nothing, hybrid quietly degraded to
BM25. So the counts are compared per (tenant, collection) the first time a process searches or ingests, a
gap is reported once, and the missing vectors are rebuilt from the catalog's stored text through the
embedding cache (keyed by content hash, so no file is re-read and, for the same model, nothing re-embedded).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.types import Chunk
from persistence.errors import StoreUnavailableError
from retrieval.chunk_records import EMBED_BATCH_CHUNKS, embedding_input
from retrieval.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

#: Data folders (or Chroma servers) already checked by this process: the warning is given once.
_checked: set[str] = set()


@dataclass(frozen=True)
class ScopeDrift:
    """One tenant's collection whose vector count differs from the catalog's chunk count."""

    tenant: str
    collection: str
    catalog_chunks: int
    vectors: int

    @property
    def missing(self) -> int:
        """Catalog chunks without a vector, at least (counts cannot tell which)."""
        return max(self.catalog_chunks - self.vectors, 0)


@dataclass(frozen=True)
class ScopeGap:
    """One tenant's collection compared id by id: catalog chunks without a vector, vectors without a chunk."""

    tenant: str
    collection: str
    catalog_chunks: int
    missing: int
    strays: int


@dataclass(frozen=True)
class VectorRepair:
    """What a repair did: vectors restored from the catalog and stray vectors removed."""

    restored: int = 0
    removed: int = 0


def vector_drift(kb: KnowledgeBase) -> list[ScopeDrift]:
    """Scopes whose vector count differs from the catalog (both directions), cheapest check: counts only."""
    counts = kb.catalog.chunk_counts()
    scopes = set(counts) | set(kb.vectors.scopes())
    drift = [
        ScopeDrift(
            tenant, collection, counts.get((tenant, collection), 0), kb.vectors.count(tenant, collection)
        )
        for tenant, collection in sorted(scopes)
    ]
    return [scope for scope in drift if scope.catalog_chunks != scope.vectors]


def vector_gaps(kb: KnowledgeBase) -> list[ScopeGap]:
    """Every scope of either store compared id by id (thorough; `rag doctor` uses it)."""
    counts = kb.catalog.chunk_counts()
    gaps = []
    for tenant, collection in sorted(set(counts) | set(kb.vectors.scopes())):
        catalog_ids = kb.catalog.chunk_ids(tenant, collection)
        vector_ids = kb.vectors.ids(tenant, collection)
        gaps.append(
            ScopeGap(
                tenant,
                collection,
                len(catalog_ids),
                len(catalog_ids - vector_ids),
                len(vector_ids - catalog_ids),
            )
        )
    return gaps


def drift_message(drift: list[ScopeDrift], kb: KnowledgeBase) -> str | None:
    """One line describing vectors missing from the store, or None when none are missing."""
    missing = [scope for scope in drift if scope.missing]
    if not missing:
        return None
    total = sum(scope.missing for scope in missing)
    chunks = sum(scope.catalog_chunks for scope in missing)
    where = ", ".join(f"{scope.tenant}/{scope.collection}" for scope in missing[:5])
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    store = kb.settings.chroma_host or str(kb.settings.chroma_dir)
    return (
        f"the vector store {store} lacks {total} of {chunks} chunks the catalog holds ({where}{more}); dense "
        "search misses them until `rag ingest` (any path) or `rag doctor --repair` rebuilds them"
    )


def warn_once(kb: KnowledgeBase, warn: Callable[[str], None] | None = None) -> str | None:
    """Compare the stores the first time this process uses a data folder; report missing vectors once.

    `warn` receives the line (default: a logging warning). A store that cannot be read is not reported
    here: the search or ingest that follows raises its own clear error."""
    key = kb.settings.chroma_host or str(kb.settings.data_dir.resolve())
    if key in _checked:
        return None
    _checked.add(key)
    try:
        message = drift_message(vector_drift(kb), kb)
    except StoreUnavailableError as error:
        logger.debug("store check skipped: %s", error)
        return None
    if message:
        (warn or logger.warning)(message)
    return message


def repair_vectors(
    kb: KnowledgeBase,
    drift: Sequence[ScopeDrift | ScopeGap] | None = None,
    *,
    remove_strays: bool = False,
) -> VectorRepair:
    """Upsert every catalog chunk the vector store lacks, re-embedded from the catalog's stored text.

    Only scopes in `drift` (default: all whose counts disagree) are compared id by id. Stray vectors (no
    catalog row) are harmless, since search keeps only hits the catalog confirms, and a concurrent ingest
    briefly has some (Chroma is written before the catalog commits), so they are removed only on request."""
    drift = vector_drift(kb) if drift is None else drift
    restored = removed = 0
    for scope in drift:
        catalog_ids = kb.catalog.chunk_ids(scope.tenant, scope.collection)
        vector_ids = kb.vectors.ids(scope.tenant, scope.collection)
        missing = sorted(catalog_ids - vector_ids)
        for start in range(0, len(missing), EMBED_BATCH_CHUNKS):
            stored = kb.catalog.chunks_by_id(missing[start : start + EMBED_BATCH_CHUNKS], scope.tenant)
            chunks = [Chunk(item.chunk_id, item.text, item.metadata) for item in stored.values()]
            inputs = [embedding_input(str(chunk.metadata.get("title", "")), chunk.text) for chunk in chunks]
            kb.vectors.upsert(scope.tenant, scope.collection, chunks, kb.embeddings.embed_documents(inputs))
            restored += len(chunks)
        strays = sorted(vector_ids - catalog_ids)
        if remove_strays and strays:
            kb.vectors.delete(scope.tenant, scope.collection, strays)
            removed += len(strays)
    if restored or removed:
        logger.info("vector store repaired: %d restored, %d stray removed", restored, removed)
    return VectorRepair(restored, removed)


def reset_checks() -> None:
    """Forget which data folders were checked (tests; a long-lived process after `rag doctor --repair`)."""
    _checked.clear()
