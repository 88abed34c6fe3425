"""The semantic cache: a repeated (or reworded) question gets the answer made for it before, without
analysis, retrieval or generation.

What makes two requests "the same":
- the same tenant (entries of one tenant are never even read for another), and the same *scope*: collection,
  directory, filters, conversation, answer mode, model, answer source and operator instructions — each
  changes what the engine would answer, so each must match exactly (hashed into `scope`);
- the same state of the tenant's documents: entries are keyed by `Catalog.documents_version(tenant)`, a
  fingerprint any ingest or delete changes, so a change to the documents makes old answers unreachable
  (and `invalidate_tenant` drops them at once);
- a standalone question (after contextualize, so follow-ups are resolved) whose embedding, by the knowledge
  base's model, has cosine similarity >= `RAG_CACHE_SIMILARITY` with the cached one, within
  `RAG_CACHE_TTL_S` seconds.

Backends: a table of the app database by default (embedded, no server: SQLite unless RAG_DATABASE_URL), or
Redis when RAG_REDIS_URL is set (entries expire by Redis TTL; shared by every worker). A cache that fails
never fails an answer: callers log, count an error and carry on as on a miss.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
from langchain_core.embeddings import Embeddings
from sqlalchemy import delete, func, select

from config.settings import Settings
from persistence.database import CacheEntryRow, Database, database_url, get_database
from persistence.process import process_knowledge_base, process_settings

logger = logging.getLogger(__name__)

#: Question vectors kept in memory (a lookup's vector is reused by the store after the answer).
VECTOR_MEMO_SIZE = 512
REDIS_PREFIX = "rag:semcache"


@dataclass(frozen=True)
class CacheScope:
    """What must match exactly for a cached answer to be reused (besides the question)."""

    tenant: str
    collection: str = ""
    directory: str = ""
    conversation_id: str = ""
    filters: dict[str, Any] = field(default_factory=dict)
    mode: str = "auto"
    model: str = ""
    answer_source: str = "rag"
    system_prompt: str = ""

    def key(self) -> str:
        """Stable hash of every field (the tenant too, so a key never collides across tenants). A search
        without a directory scope leaves it out, so the keys stored before the field existed still match."""
        fields = asdict(self)
        if not fields["directory"]:
            del fields["directory"]
        text = json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class CacheHit:
    """A cached answer that matched: its payload, the similarity and the question it was made for."""

    payload: dict[str, Any]
    similarity: float
    question: str
    age_s: float


@dataclass(frozen=True)
class CachedEntry:
    """One stored answer as a backend returns it."""

    payload: dict[str, Any]
    question: str
    created_at: float


class CacheBackend(Protocol):
    """Where entries live (SQL table or Redis)."""

    def candidates(
        self, scope: CacheScope, version: str, model_key: str, now: float
    ) -> list[tuple[np.ndarray, CachedEntry]]:
        """The live entries of this scope, documents version and model (newest first, at most
        `max_entries`), each with its stored unit vector; SemanticCache picks the most similar."""
        ...

    def store(
        self,
        scope: CacheScope,
        version: str,
        question: str,
        vector: np.ndarray,
        model_key: str,
        payload: dict[str, Any],
        now: float,
    ) -> None:
        """Add an entry (expiring after the TTL; the tenant's oldest dropped past the maximum)."""
        ...

    def invalidate_tenant(self, tenant: str) -> None:
        """Make every entry of `tenant` unreachable."""
        ...

    def clear(self) -> None:
        """Drop every entry of every tenant."""
        ...


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


class SqlCacheBackend:
    """Entries in the app database's `semantic_cache` table."""

    def __init__(self, database: Database, ttl_s: float, max_entries: int) -> None:
        self.database = database
        self.ttl_s = ttl_s
        self.max_entries = max_entries

    def candidates(
        self, scope: CacheScope, version: str, model_key: str, now: float
    ) -> list[tuple[np.ndarray, CachedEntry]]:
        """The live rows of this tenant, scope, documents version and model (newest first)."""
        query = (
            select(CacheEntryRow)
            .where(
                CacheEntryRow.tenant == scope.tenant,
                CacheEntryRow.scope == scope.key(),
                CacheEntryRow.docs_version == version,
                CacheEntryRow.model_key == model_key,
                CacheEntryRow.expires_at > now,
            )
            .order_by(CacheEntryRow.id.desc())
            .limit(self.max_entries)
        )
        with self.database.session() as session:
            rows = list(session.scalars(query))
        return [
            (
                np.frombuffer(row.embedding, dtype=np.float32),
                CachedEntry(json.loads(row.payload), row.question, row.created_at),
            )
            for row in rows
        ]

    def store(
        self,
        scope: CacheScope,
        version: str,
        question: str,
        vector: np.ndarray,
        model_key: str,
        payload: dict[str, Any],
        now: float,
    ) -> None:
        """Insert the entry, drop expired ones and the tenant's oldest beyond `max_entries`."""
        with self.database.session() as session:
            session.execute(delete(CacheEntryRow).where(CacheEntryRow.expires_at <= now))
            session.add(
                CacheEntryRow(
                    tenant=scope.tenant,
                    scope=scope.key(),
                    docs_version=version,
                    question=question,
                    embedding=np.asarray(vector, dtype=np.float32).tobytes(),
                    model_key=model_key,
                    payload=json.dumps(payload, ensure_ascii=False, default=str),
                    created_at=now,
                    expires_at=now + self.ttl_s,
                )
            )
            session.flush()
            count = session.scalar(
                select(func.count()).select_from(CacheEntryRow).where(CacheEntryRow.tenant == scope.tenant)
            )
            excess = int(count or 0) - self.max_entries
            if excess > 0:
                oldest = (
                    select(CacheEntryRow.id)
                    .where(CacheEntryRow.tenant == scope.tenant)
                    .order_by(CacheEntryRow.id)
                    .limit(excess)
                )
                session.execute(delete(CacheEntryRow).where(CacheEntryRow.id.in_(oldest)))

    def invalidate_tenant(self, tenant: str) -> None:
        """Delete the tenant's entries."""
        with self.database.session() as session:
            session.execute(delete(CacheEntryRow).where(CacheEntryRow.tenant == tenant))

    def clear(self) -> None:
        """Delete every entry."""
        with self.database.session() as session:
            session.execute(delete(CacheEntryRow))


class RedisCacheBackend:
    """Entries in Redis: each entry a string key with the TTL, indexed per (tenant generation, scope,
    documents version) in a sorted set scored by expiry. `invalidate_tenant` bumps the tenant's generation,
    so its old buckets are never read again and expire on their own."""

    def __init__(self, url: str, ttl_s: float, max_entries: int, client: Any | None = None) -> None:
        import redis

        self.client = client or redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self.ttl_s = ttl_s
        self.max_entries = max_entries

    def _generation(self, tenant: str) -> int:
        return int(self.client.get(f"{REDIS_PREFIX}:gen:{tenant}") or 0)

    def _bucket(self, scope: CacheScope, version: str, model_key: str) -> str:
        generation = self._generation(scope.tenant)
        digest = hashlib.sha256(f"{generation}|{scope.key()}|{version}|{model_key}".encode()).hexdigest()[:32]
        return f"{REDIS_PREFIX}:bucket:{digest}"

    def candidates(
        self, scope: CacheScope, version: str, model_key: str, now: float
    ) -> list[tuple[np.ndarray, CachedEntry]]:
        """The bucket's live entries (expired ones dropped first)."""
        bucket = self._bucket(scope, version, model_key)
        self.client.zremrangebyscore(bucket, "-inf", now)
        keys = self.client.zrevrange(bucket, 0, self.max_entries - 1)
        entries = [json.loads(raw) for raw in self.client.mget(keys) if raw is not None] if keys else []
        return [
            (
                np.asarray(entry["vector"], dtype=np.float32),
                CachedEntry(entry["payload"], entry["question"], float(entry["created_at"])),
            )
            for entry in entries
            if entry.get("tenant") == scope.tenant
        ]

    def store(
        self,
        scope: CacheScope,
        version: str,
        question: str,
        vector: np.ndarray,
        model_key: str,
        payload: dict[str, Any],
        now: float,
    ) -> None:
        """SET the entry with its TTL and index it in the bucket (trimmed to `max_entries`)."""
        bucket = self._bucket(scope, version, model_key)
        key = f"{REDIS_PREFIX}:entry:{uuid.uuid4().hex}"
        entry = {
            "tenant": scope.tenant,
            "question": question,
            "vector": [round(float(value), 7) for value in vector],
            "payload": payload,
            "created_at": now,
        }
        ttl_ms = max(1, int(self.ttl_s * 1000))
        pipe = self.client.pipeline()
        pipe.set(key, json.dumps(entry, ensure_ascii=False, default=str), px=ttl_ms)
        pipe.zadd(bucket, {key: now + self.ttl_s})
        pipe.zremrangebyrank(bucket, 0, -self.max_entries - 1)
        pipe.pexpire(bucket, ttl_ms)
        pipe.execute()

    def invalidate_tenant(self, tenant: str) -> None:
        """Bump the tenant's generation."""
        self.client.incr(f"{REDIS_PREFIX}:gen:{tenant}")

    def clear(self) -> None:
        """Delete every key of the cache."""
        keys = list(self.client.scan_iter(match=f"{REDIS_PREFIX}:*", count=500))
        if keys:
            self.client.delete(*keys)


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

    def embed(self, question: str) -> tuple[np.ndarray, str]:
        """The question's unit vector and the model key (memoized: a store after a lookup embeds nothing)."""
        model = self._embeddings()
        model_key = str(getattr(model, "model_key", "") or type(model).__name__)
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
        """The cached answer for a question like this one in this scope, or None (counted)."""
        vector, model_key = self.embed(question)
        now = self.clock()
        found = _best(
            self.backend.candidates(scope, docs_version, model_key, now),
            vector,
            self.settings.cache_similarity,
        )
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
    return process_knowledge_base().embeddings


def documents_version(tenant: str) -> str:
    """The tenant's documents version from the process's knowledge base catalog."""
    return process_knowledge_base().catalog.documents_version(tenant)


def make_backend(settings: Settings) -> CacheBackend:
    """Redis when RAG_REDIS_URL is set, else the app database's table."""
    if settings.redis_url:
        return RedisCacheBackend(settings.redis_url, settings.cache_ttl_s, settings.cache_max_entries)
    return SqlCacheBackend(get_database(settings), settings.cache_ttl_s, settings.cache_max_entries)


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
        str(settings.cache_max_entries),
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
    except Exception:  # noqa: BLE001 - invalidation is best effort; the version key still protects answers
        count("errors")
        logger.warning("semantic cache: could not invalidate tenant %r", tenant, exc_info=True)
