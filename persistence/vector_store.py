"""Dense vectors in Chroma: embedded and persistent by default, a Chroma server when RAG_CHROMA_HOST is set.
One Chroma collection per (tenant, category), so a search needs no tenant `where` clause (Chroma would filter
every record before its nearest-neighbour search, and another tenant's neighbours could starve the results);
search still keeps only hits the catalog confirms for the tenant.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from config.settings import Settings
from core.langgraph_compat import chroma_collection
from core.types import Chunk
from persistence.errors import StoreUnavailableError as StoreUnavailableError  # re-exported (its old home)

if TYPE_CHECKING:
    from chromadb.api.types import PyEmbeddings
    from langchain_chroma import Chroma

CHROMA_COLLECTION_PREFIX = "rag_"
COLLECTION_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
#: Collection (category) of a document ingested without one; searches without a collection span them all.
DEFAULT_COLLECTION = "default"
#: Cosine space: with normalised vectors, similarity = 1 - distance.
COLLECTION_METADATA = {"hnsw:space": "cosine"}
UPSERT_BATCH = 1000
#: Ids fetched per page when listing a collection's ids (rag doctor).
ID_PAGE = 5000


TENANT_SEPARATOR = "__"


class InvalidCollectionError(ValueError):
    """A collection or tenant name that cannot be used."""


def validate_collection_name(name: str, kind: str = "collection") -> str:
    """Return `name` if usable as a collection or tenant (letters, digits, . _ -, up to 201 chars)."""
    if not COLLECTION_NAME_PATTERN.match(name) or name.endswith((".", "-", "_")) or TENANT_SEPARATOR in name:
        raise InvalidCollectionError(
            f"invalid {kind} name {name!r}: use letters, digits, '.', '_' or '-', starting and ending "
            "with a letter or digit (no '__')"
        )
    return name


def chroma_collection_name(tenant: str, collection: str) -> str:
    """The Chroma collection holding one tenant's chunks of one collection."""
    tenant = validate_collection_name(tenant, "tenant")
    return f"{CHROMA_COLLECTION_PREFIX}{tenant}{TENANT_SEPARATOR}{validate_collection_name(collection)}"


def unreadable_message(action: str, tenant: str, collection: str, error: Exception) -> str:
    """One line naming the tenant's collection Chroma could not serve and how to rebuild it: the catalog
    holds every chunk, so a collection whose own files are damaged is rebuilt from it."""
    return (
        f"cannot {action} Chroma collection {collection!r} of tenant {tenant!r}: {error}; if it stays "
        "unreadable, `rag doctor --repair` rebuilds it from the catalog"
    )


@dataclass(frozen=True)
class DenseHit:
    """A nearest-neighbour match: its id and cosine similarity (text and metadata come from the catalog)."""

    chunk_id: str
    similarity: float


_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


def chroma_client(settings: Settings) -> Any:
    """The process's Chroma client for these settings (persistent folder or HTTP server); chromadb is
    imported here, on first use, since it costs ~0.9 s."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if settings.chroma_host:
        key = f"http://{settings.chroma_host}:{settings.chroma_port}"
    else:
        key = str(settings.chroma_dir.resolve())
    with _clients_lock:
        if key not in _clients:
            try:
                if settings.chroma_host:
                    _clients[key] = chromadb.HttpClient(
                        host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
                    )
                else:
                    settings.chroma_dir.mkdir(parents=True, exist_ok=True)
                    _clients[key] = chromadb.PersistentClient(path=key, settings=chroma_settings)
            except Exception as error:  # every client failure means the store is down
                raise StoreUnavailableError(f"cannot open the Chroma store at {key}: {error}") from error
        return _clients[key]


class VectorStore:
    """Chroma collections of one data directory or server, keyed by our collection names."""

    def __init__(self, settings: Settings, embeddings: Embeddings) -> None:
        self.settings = settings
        self.embeddings = embeddings
        self._stores: dict[str, Chroma] = {}

    def _store(self, tenant: str, collection: str, create: bool = True) -> Chroma | None:
        from langchain_chroma import Chroma  # with chromadb, on first use (see chroma_client)

        name = chroma_collection_name(tenant, collection)
        if name not in self._stores:
            client = chroma_client(self.settings)
            try:
                if not create and name not in {c.name for c in client.list_collections()}:
                    return None
                self._stores[name] = Chroma(
                    collection_name=name,
                    embedding_function=self.embeddings,
                    client=client,
                    collection_metadata=COLLECTION_METADATA,
                )
            except Exception as error:
                raise StoreUnavailableError(f"cannot open Chroma collection {name}: {error}") from error
        return self._stores[name]

    def upsert(
        self, tenant: str, collection: str, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]
    ) -> None:
        """Write chunks with precomputed vectors (idempotent: same ids overwrite)."""
        store = self._store(tenant, collection)
        assert store is not None
        try:
            for start in range(0, len(chunks), UPSERT_BATCH):
                batch = chunks[start : start + UPSERT_BATCH]
                embeddings: PyEmbeddings = [list(vector) for vector in vectors[start : start + UPSERT_BATCH]]
                chroma_collection(store).upsert(  # langchain-chroma's add_texts would embed them again
                    ids=[chunk.chunk_id for chunk in batch],
                    embeddings=embeddings,
                    documents=[chunk.text for chunk in batch],
                    metadatas=[dict(chunk.metadata) for chunk in batch],
                )
        except Exception as error:
            raise StoreUnavailableError(
                f"cannot write to Chroma collection {collection!r}: {error}"
            ) from error

    def delete(self, tenant: str, collection: str, chunk_ids: Sequence[str]) -> None:
        """Remove chunks by id (missing ids are ignored)."""
        if not chunk_ids:
            return
        store = self._store(tenant, collection, create=False)
        if store is None:
            return
        try:
            for start in range(0, len(chunk_ids), UPSERT_BATCH):
                store.delete(ids=list(chunk_ids[start : start + UPSERT_BATCH]))
        except Exception as error:
            raise StoreUnavailableError(
                f"cannot delete from Chroma collection {collection!r}: {error}"
            ) from error

    def search(
        self, tenant: str, collection: str, vector: Sequence[float], k: int, where: dict[str, Any] | None
    ) -> list[DenseHit]:
        """The `k` nearest chunks of `tenant` in `collection` that satisfy `where`: ids and distances only
        (fetching documents cost 4x the search; the catalog holds the text)."""
        store = self._store(tenant, collection, create=False)
        if store is None:
            return []
        query: PyEmbeddings = [list(vector)]
        try:
            results = chroma_collection(store).query(  # langchain-chroma's own query fetches the documents
                query_embeddings=query, n_results=k, where=where, include=["distances"]
            )
        except Exception as error:
            raise StoreUnavailableError(unreadable_message("query", tenant, collection, error)) from error
        if results["distances"] is None:  # asked for above: Chroma returns them
            missing = ValueError("Chroma returned no distances")
            raise StoreUnavailableError(unreadable_message("query", tenant, collection, missing))
        ids, distances = results["ids"][0], results["distances"][0]
        return [
            DenseHit(str(chunk_id), 1.0 - float(distance))
            for chunk_id, distance in zip(ids, distances, strict=True)
        ]

    def count(self, tenant: str, collection: str) -> int:
        """Number of vectors of a tenant in a collection (0 when it does not exist)."""
        store = self._store(tenant, collection, create=False)
        try:
            return 0 if store is None else chroma_collection(store).count()
        except Exception as error:
            raise StoreUnavailableError(unreadable_message("count", tenant, collection, error)) from error

    def ids(self, tenant: str, collection: str) -> set[str]:
        """Ids of every vector of a tenant in a collection (read in pages; empty when it does not exist)."""
        store = self._store(tenant, collection, create=False)
        if store is None:
            return set()
        found: set[str] = set()
        try:
            while page := chroma_collection(store).get(include=[], limit=ID_PAGE, offset=len(found))["ids"]:
                found.update(page)
                if len(page) < ID_PAGE:
                    break
        except Exception as error:
            raise StoreUnavailableError(unreadable_message("read", tenant, collection, error)) from error
        return found

    def drop_collection(self, tenant: str, collection: str) -> None:
        """Delete a tenant's Chroma collection (its vectors only: the catalog keeps the chunks) and forget its
        handle, so that the next write creates it afresh; `rag doctor --repair` rebuilds a damaged one so."""
        from chromadb.errors import NotFoundError

        name = chroma_collection_name(tenant, collection)
        self._stores.pop(name, None)
        try:
            chroma_client(self.settings).delete_collection(name)
        except NotFoundError:
            return
        except Exception as error:
            raise StoreUnavailableError(f"cannot delete Chroma collection {name}: {error}") from error

    def scopes(self) -> list[tuple[str, str]]:
        """(tenant, collection) of every collection this engine created in Chroma."""
        try:
            names = [collection.name for collection in chroma_client(self.settings).list_collections()]
        except StoreUnavailableError:
            raise
        except Exception as error:
            raise StoreUnavailableError(f"cannot list Chroma collections: {error}") from error
        parts = (
            name.removeprefix(CHROMA_COLLECTION_PREFIX).partition(TENANT_SEPARATOR)
            for name in names
            if name.startswith(CHROMA_COLLECTION_PREFIX) and TENANT_SEPARATOR in name
        )
        return sorted((tenant, collection) for tenant, _, collection in parts)
