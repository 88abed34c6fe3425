"""Agreement between the catalog and the vector store, and its repair from the catalog alone.

The catalog is the reference (every chunk's text, written atomically); Chroma is a derived index that can be
lost on its own, which used to be silent. So counts are compared per (tenant, collection) the first time a
process searches or ingests, a gap is reported once, and missing vectors are rebuilt from the catalog's text
through the embedding cache. A search or ingest checks its own tenant's collections only, so one tenant's
damaged collection (`probe_collection`) stays its own; `rebuild_collection` replaces it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.types import Chunk
from persistence.errors import StoreUnavailableError
from persistence.vector_store import chroma_client, chroma_collection_name
from retrieval.chunk_records import EMBED_BATCH_CHUNKS, embedding_input
from retrieval.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

#: (data folder or Chroma server, tenant) pairs already checked by this process: the warning is given once.
_checked: set[tuple[str, str | None]] = set()


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
class CollectionState:
    """One tenant's Chroma collection as a probe found it: its vector count, or why it cannot be read."""

    tenant: str
    collection: str
    vectors: int | None
    error: str | None = None

    @property
    def damaged(self) -> bool:
        """Chroma could not count, read or query it."""
        return self.error is not None


@dataclass(frozen=True)
class CollectionRebuild:
    """A damaged collection rebuilt from the catalog: chunks written, how many vectors came from the cache."""

    tenant: str
    collection: str
    chunks: int
    cached: int


@dataclass(frozen=True)
class VectorRepair:
    """What a repair did: vectors restored from the catalog and stray vectors removed."""

    restored: int = 0
    removed: int = 0


def known_scopes(kb: KnowledgeBase, tenant: str | None = None) -> list[tuple[str, str]]:
    """(tenant, collection) pairs the catalog or Chroma knows (by name only), of `tenant` only when given."""
    chroma = {scope for scope in kb.vectors.scopes() if tenant is None or scope[0] == tenant}
    if tenant is None:
        return sorted(set(kb.catalog.chunk_counts()) | chroma)
    return sorted({(tenant, collection) for collection in kb.catalog.collections(tenant)} | chroma)


def vector_drift(kb: KnowledgeBase, tenant: str | None = None) -> list[ScopeDrift]:
    """Scopes (of `tenant` when given) whose vector count differs from the catalog's: counts only, cheap."""
    counts = kb.catalog.chunk_counts()
    scopes = known_scopes(kb, tenant)
    drift = [
        ScopeDrift(
            tenant, collection, counts.get((tenant, collection), 0), kb.vectors.count(tenant, collection)
        )
        for tenant, collection in scopes
    ]
    return [scope for scope in drift if scope.catalog_chunks != scope.vectors]


def vector_gaps(kb: KnowledgeBase, scopes: Sequence[tuple[str, str]] | None = None) -> list[ScopeGap]:
    """Scopes (default: every scope of either store) compared id by id (thorough; `rag doctor` uses it)."""
    gaps = []
    for tenant, collection in known_scopes(kb) if scopes is None else scopes:
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
        "search misses them until `rag ingest` (into that tenant) or `rag doctor --repair` rebuilds them"
    )


def warn_once(
    kb: KnowledgeBase, warn: Callable[[str], None] | None = None, tenant: str | None = None
) -> str | None:
    """Compare the stores the first time this process uses a data folder for `tenant` (None: every tenant);
    report missing vectors once to `warn`. An unreadable store is left to the search's own error."""
    key = (kb.settings.chroma_host or str(kb.settings.data_dir.resolve()), tenant)
    if key in _checked:
        return None
    _checked.add(key)
    try:
        message = drift_message(vector_drift(kb, tenant), kb)
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
    """Upsert every catalog chunk the vector store lacks in the scopes of `drift` (default: all whose counts
    disagree). Stray vectors are harmless (search keeps only hits the catalog confirms) and a concurrent
    ingest briefly has some, so they are removed only on request."""
    drift = vector_drift(kb) if drift is None else drift
    restored = removed = 0
    for scope in drift:
        catalog_ids = kb.catalog.chunk_ids(scope.tenant, scope.collection)
        vector_ids = kb.vectors.ids(scope.tenant, scope.collection)
        restored += _upsert_from_catalog(kb, scope.tenant, scope.collection, sorted(catalog_ids - vector_ids))
        strays = sorted(vector_ids - catalog_ids)
        if remove_strays and strays:
            kb.vectors.delete(scope.tenant, scope.collection, strays)
            removed += len(strays)
    if restored or removed:
        logger.info("vector store repaired: %d restored, %d stray removed", restored, removed)
    return VectorRepair(restored, removed)


def _upsert_from_catalog(kb: KnowledgeBase, tenant: str, collection: str, chunk_ids: Sequence[str]) -> int:
    """Write these catalog chunks to the collection through the tenant's embedding cache; how many."""
    embeddings = kb.embeddings.for_tenant(tenant)
    written = 0
    for start in range(0, len(chunk_ids), EMBED_BATCH_CHUNKS):
        stored = kb.catalog.chunks_by_id(chunk_ids[start : start + EMBED_BATCH_CHUNKS], tenant)
        chunks = [Chunk(item.chunk_id, item.text, item.metadata) for item in stored.values()]
        inputs = [embedding_input(str(chunk.metadata.get("title", "")), chunk.text) for chunk in chunks]
        kb.vectors.upsert(tenant, collection, chunks, embeddings.embed_documents(inputs))
        written += len(chunks)
    return written


def probe_collection(kb: KnowledgeBase, tenant: str, collection: str) -> CollectionState:
    """Count, read one record of and query (with a stored vector) one tenant's collection straight through
    Chroma; any failure makes it damaged, with Chroma's reason. A missing collection holds 0 vectors."""
    from chromadb.errors import NotFoundError

    client = chroma_client(kb.settings)
    name = chroma_collection_name(tenant, collection)
    try:
        handle = client.get_collection(name)
    except NotFoundError:
        return CollectionState(tenant, collection, 0)
    except Exception as error:  # noqa: BLE001 - whatever Chroma raises, the collection cannot be used
        return CollectionState(tenant, collection, None, f"{type(error).__name__}: {error}")
    try:
        vectors = int(handle.count())
        sample = handle.get(limit=1, include=["embeddings"])["embeddings"]
        if sample is not None and len(sample):
            handle.query(query_embeddings=[list(sample[0])], n_results=1, include=["distances"])
    except Exception as error:  # noqa: BLE001 - whatever a read raises, the collection cannot be used
        return CollectionState(tenant, collection, None, f"{type(error).__name__}: {error}")
    return CollectionState(tenant, collection, vectors)


def collection_states(kb: KnowledgeBase, tenant: str | None = None) -> list[CollectionState]:
    """Every collection of `tenant` (default: of every tenant) probed (`probe_collection`)."""
    return [probe_collection(kb, owner, collection) for owner, collection in known_scopes(kb, tenant)]


def damaged_collection_message(state: CollectionState) -> str:
    """One line naming a damaged collection, its tenant, why, and its repair."""
    chroma = chroma_collection_name(state.tenant, state.collection)
    return (
        f"collection {state.collection!r} of tenant {state.tenant!r} (Chroma {chroma}) cannot be read "
        f"({state.error}); `rag doctor --repair` rebuilds it from the catalog"
    )


def rebuild_collection(kb: KnowledgeBase, tenant: str, collection: str) -> CollectionRebuild:
    """Drop a tenant's Chroma collection (a damaged one cannot be repaired in place) and write every catalog
    chunk again, under the collection's ingest lock; a rebuild stopped half way shows as missing vectors."""
    from retrieval.ingest_lock import ingest_lock

    with ingest_lock(kb.settings, tenant, collection):
        chunk_ids = sorted(kb.catalog.chunk_ids(tenant, collection))
        kb.vectors.drop_collection(tenant, collection)
        hits = kb.embeddings.hits
        written = _upsert_from_catalog(kb, tenant, collection, chunk_ids)
        cached = kb.embeddings.hits - hits
    _checked.clear()  # the next search or ingest compares again
    logger.info(
        "rebuilt collection %s of tenant %s: %d chunks (%d cached)", collection, tenant, written, cached
    )
    return CollectionRebuild(tenant, collection, written, cached)


def reset_checks() -> None:
    """Forget which data folders were checked (tests; a long-lived process after `rag doctor --repair`)."""
    _checked.clear()
