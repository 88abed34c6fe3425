"""Where the semantic cache keeps its entries (a table of the app database, or Redis under RAG_REDIS_URL)
behind one protocol, and the scope an entry is keyed by.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import numpy as np
from sqlalchemy import delete, func, select

from persistence.database import CacheEntryRow, Database

#: Prefix of every Redis key of the cache (buckets per scope, per-tenant generations).
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
        # without `withscores`, ZREVRANGE gives the members only (redis-py types every reply shape)
        keys = cast(list[bytes], self.client.zrevrange(bucket, 0, self.max_entries - 1))
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


#: Where entries live: a SQL table, or Redis under RAG_REDIS_URL.
CacheBackend = SqlCacheBackend | RedisCacheBackend
