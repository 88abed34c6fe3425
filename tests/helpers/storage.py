"""Read-backs of stored state the product never needs to ask for: the embedding cache's size, a compiled
graph's default durability."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from core.langgraph_compat import CONFIG_KEY_DURABILITY
from persistence.embedding_cache import EmbeddingCache


def cache_entries(cache: EmbeddingCache, tenant: str | None = None) -> int:
    """Entries of every model in the embedding cache: of one tenant, or of all."""
    query = select(func.count()).select_from(cache.table)
    if tenant is not None:
        query = query.where(cache.table.c.tenant == tenant)
    with cache.engine.connect() as connection:
        return int(connection.execute(query).scalar() or 0)


def durability_of(graph: Any) -> str | None:
    """The default durability a compiled graph runs with (None = LangGraph's own, "async")."""
    return ((getattr(graph, "config", None) or {}).get("configurable") or {}).get(CONFIG_KEY_DURABILITY)
