"""The semantic cache: a repeated (or reworded) question gets the answer made for it before.

A hit needs the same tenant and scope (collection, directory, filters, conversation, mode, model, answer
source, instructions), the same `Catalog.documents_version(tenant)`, and a standalone question within cosine
RAG_CACHE_SIMILARITY and RAG_CACHE_TTL_S; an exact text or an empty scope loads no embedding model. A cache
that fails never fails an answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from config.settings import Settings
from persistence.database import database_url, get_database
from persistence.process import process_knowledge_base, process_settings
from persistence.semantic_cache_backends import (
    CacheBackend,
    CacheHit,
    CacheScope,
    RedisCacheBackend,
    SqlCacheBackend,
)

logger = logging.getLogger(__name__)

#: Question vectors kept in memory (a lookup's vector is reused by the store after the answer).
VECTOR_MEMO_SIZE = 512
#: Cached answers kept per tenant (the oldest are dropped first): repeated questions are few, and each
#: entry holds a whole answer record.
CACHE_MAX_ENTRIES = 2000


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def _best(
    candidates: list[tuple[np.ndarray, Any]], probe: np.ndarray, threshold: float
) -> tuple[float, Any] | None:
    """The candidate with the highest cosine >= threshold (vectors of another dimension are skipped)."""
    best: tuple[float, Any] | None = None
    for vector, item in candidates:
        if vector.shape != probe.shape:
            continue
        similarity = float(_unit(vector) @ probe)
        if similarity >= threshold and (best is None or similarity > best[0]):
            best = (similarity, item)
    return best


# --- counters (read by the metrics endpoint) --------------------------------------------------

_COUNTER_NAMES = ("hits", "misses", "bypassed", "stores", "errors", "invalidations")
_counters: dict[str, int] = dict.fromkeys(_COUNTER_NAMES, 0)
_counter_lock = threading.Lock()


def count(name: str, amount: int = 1) -> None:
    """Add to one of the process's cache counters."""
    with _counter_lock:
        _counters[name] = _counters.get(name, 0) + amount


def cache_counters() -> dict[str, int]:
    """This process's lookups by result since start: hits, misses, bypassed (per-request opt-out),
    stores, errors (a backend that failed; the answer went on as a miss) and invalidations."""
    with _counter_lock:
        return dict(_counters)


def reset_cache_counters() -> None:
    """Zero the counters (tests)."""
    with _counter_lock:
        for name in _COUNTER_NAMES:
            _counters[name] = 0


# --- the cache --------------------------------------------------------------------------------


class SemanticCache:
    """Embeds questions with the knowledge base's model and looks them up in / stores them into a backend."""

    def __init__(
        self,
        settings: Settings,
        backend: CacheBackend,
        embeddings: Callable[[], Embeddings] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self._embeddings = embeddings or _knowledge_base_embeddings
        self.clock = clock
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def model_key(self) -> str:
        """The key the embedding model's vectors are stored under, read without loading the model (the
        embeddings object loads its weights on the first embed, not when it is built)."""
        model = self._embeddings()
        return str(getattr(model, "model_key", "") or type(model).__name__)

    def embed(self, question: str) -> tuple[np.ndarray, str]:
        """The question's unit vector and the model key (memoized: a store after a lookup embeds nothing)."""
        model, model_key = self._embeddings(), self.model_key()
        with self._lock:
            cached = self._vectors.get((model_key, question))
            if cached is not None:
                self._vectors.move_to_end((model_key, question))
                return cached, model_key
        vector = _unit(np.asarray(model.embed_query(question), dtype=np.float32))
        with self._lock:
            self._vectors[(model_key, question)] = vector
            while len(self._vectors) > VECTOR_MEMO_SIZE:
                self._vectors.popitem(last=False)
        return vector, model_key

    def lookup(self, question: str, scope: CacheScope, docs_version: str) -> CacheHit | None:
        """The cached answer for a question like this one in this scope, or None (counted); an empty scope or
        an exact repeat never loads the embedding model."""
        now = self.clock()
        candidates = self.backend.candidates(scope, docs_version, self.model_key(), now)
        exact = next((entry for _vector, entry in candidates if entry.question == question), None)
        if exact is not None:
            count("hits")
            return CacheHit(exact.payload, 1.0, exact.question, now - exact.created_at)
        if not candidates:
            count("misses")
            return None
        vector, _model_key = self.embed(question)
        found = _best(candidates, vector, self.settings.cache_similarity)
        count("hits" if found else "misses")
        if found is None:
            return None
        similarity, entry = found
        return CacheHit(entry.payload, similarity, entry.question, now - entry.created_at)

    def store(self, question: str, scope: CacheScope, docs_version: str, payload: dict[str, Any]) -> None:
        """Keep an answer for later lookups."""
        vector, model_key = self.embed(question)
        self.backend.store(scope, docs_version, question, vector, model_key, payload, self.clock())
        count("stores")

    def invalidate_tenant(self, tenant: str) -> None:
        """Drop the tenant's answers (its documents changed)."""
        self.backend.invalidate_tenant(tenant)
        count("invalidations")


def _knowledge_base_embeddings() -> Embeddings:
    embeddings: Embeddings = process_knowledge_base().embeddings  # the view types it loosely (Any)
    return embeddings


def documents_version(tenant: str) -> str:
    """The tenant's documents version from the process's knowledge base catalog."""
    return process_knowledge_base().catalog.documents_version(tenant)


def make_backend(settings: Settings) -> CacheBackend:
    """Redis when RAG_REDIS_URL is set, else the app database's table."""
    if settings.redis_url:
        return RedisCacheBackend(settings.redis_url, settings.cache_ttl_s, CACHE_MAX_ENTRIES)
    return SqlCacheBackend(get_database(settings), settings.cache_ttl_s, CACHE_MAX_ENTRIES)


_caches: dict[tuple[str, ...], SemanticCache] = {}
_caches_lock = threading.Lock()


def get_semantic_cache(settings: Settings | None = None) -> SemanticCache:
    """The process's cache for `settings` (the resources' settings by default), built once per backend."""
    if settings is None:
        settings = process_settings()
    key = (
        settings.redis_url or "",
        database_url(settings),
        str(settings.cache_ttl_s),
        str(settings.cache_similarity),
        str(CACHE_MAX_ENTRIES),
    )
    with _caches_lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = SemanticCache(settings, make_backend(settings))
        return cache


def reset_semantic_caches() -> None:
    """Forget the process's cache objects (tests that change settings)."""
    with _caches_lock:
        _caches.clear()


def invalidate_tenant(tenant: str, settings: Settings | None = None) -> None:
    """Drop a tenant's cached answers now (called after its documents change; the documents version makes
    them unreachable anyway). Never raises: a cache that is down is logged."""
    try:
        get_semantic_cache(settings).invalidate_tenant(tenant)
    except Exception:  # invalidation is best effort; the version key still protects answers
        count("errors")
        logger.warning("semantic cache: could not invalidate tenant %r", tenant, exc_info=True)
