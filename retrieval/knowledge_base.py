"""The knowledge base: the stores of one data directory opened together (catalog, Chroma, embeddings), passed
to ingestion and search so a process opens each store once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from langchain_core.embeddings import Embeddings

from config.settings import Settings, get_settings
from persistence.catalog import Catalog, open_catalog
from persistence.vector_store import VectorStore
from retrieval.chunkers import chunker_signature, chunks_of
from retrieval.chunking import MIN_CHUNK_FRACTION, ChunkingConfig
from retrieval.embeddings import CachedEmbeddings, base_embeddings


@dataclass
class KnowledgeBase:
    """Stores of one configuration. `embeddings` may be injected (tests use a fake model)."""

    settings: Settings
    base_model: Embeddings | None = None
    model_key: str | None = None
    #: Where a store-health warning goes (retrieval.store_health.warn_once); None = a logging warning.
    warn: Callable[[str], None] | None = None

    @classmethod
    def open(cls, settings: Settings | None = None) -> KnowledgeBase:
        """Open the knowledge base of `settings` (the process settings by default)."""
        return cls(settings or get_settings())

    @cached_property
    def catalog(self) -> Catalog:
        """Documents, chunks, keyword index and embedding cache (SQLite, or RAG_DATABASE_URL's Postgres)."""
        return open_catalog(self.settings)

    @cached_property
    def embeddings(self) -> CachedEmbeddings:
        """The configured embedding model behind the content-hash cache."""
        if self.base_model is None:
            self.base_model, self.model_key = base_embeddings(self.settings)
        return CachedEmbeddings(self.base_model, self.model_key or "custom", self.catalog)

    @cached_property
    def vectors(self) -> VectorStore:
        """Chroma collections."""
        return VectorStore(self.settings, self.embeddings)

    @property
    def chunking(self) -> ChunkingConfig:
        """Chunk sizes and separators from settings."""
        settings = self.settings
        overlap, separators = settings.chunk_overlap, settings.separators
        return ChunkingConfig(settings.chunk_size, overlap, MIN_CHUNK_FRACTION, separators)

    def chunk(self, text: str, tenant: str | None = None) -> list[str]:
        """`text` cut by the configured chunker (RAG_CHUNKER; the semantic one embeds through `tenant`'s
        cache, or through none without a tenant)."""

        def embed(texts: list[str]) -> list[list[float]]:  # the model opens only if the chunker embeds
            embeddings = self.embeddings if tenant is None else self.embeddings.for_tenant(tenant)
            return embeddings.embed_documents(texts)

        return chunks_of(text, self.settings, self.chunking, embed)

    def index_signature(self) -> str:
        """What, besides a file's bytes, determines its chunks and vectors (a change forces re-indexing)."""
        chunking = self.chunking
        _ = self.embeddings
        signature = f"{chunking.size}/{chunking.overlap}/{chunking.min_fraction}/{self.model_key}"
        return signature + chunker_signature(self.settings)

    def close(self) -> None:
        """Release the catalog's connections."""
        if "catalog" in self.__dict__:
            self.catalog.close()
