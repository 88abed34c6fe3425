"""Search by meaning over long-term store items: a store with an index embeds and ranks itself; one without
keeps each item's float32 vector in its value and the scope is ranked here in numpy. Either way an item
embedded by another model, or not yet, is embedded again before a search reads it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore, Item, PutOp

from config.settings import Settings
from persistence.long_term_store import (
    TEXT_FIELD,
    LongTermStore,
    all_items,
    long_term_store,
    using_embeddings,
)

#: Items read per store call when a scope is listed whole (listing, numpy ranking, deleting, re-embedding).
STORE_PAGE = 500
#: `model_key` of an item whose vector the store's index does not hold (not embedded yet, or by numpy's way).
NOT_INDEXED = ""


def resolve_store(
    settings: Settings,
    store: BaseStore | LongTermStore | None,
    opener: Callable[[Settings], LongTermStore] = long_term_store,
) -> LongTermStore:
    """The store to use: the caller's (a graph run's `runtime.store`), else the settings' long-term store as
    `opener` opens it. A bare BaseStore ranks by itself when it was given an index."""
    if isinstance(store, LongTermStore):
        return store
    if store is not None:
        return LongTermStore(store, getattr(store, "index_config", None) is not None, "caller")
    return opener(settings)


def _vector_text(vector: Sequence[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode("ascii")


def _vector(item: Item) -> np.ndarray:
    return np.frombuffer(base64.b64decode(item.value["vector"]["data"]), dtype=np.float32)


def put_embedded(
    found: LongTermStore, items: Sequence[Item], embeddings: Embeddings, model_key: str
) -> list[Item]:
    """Write `items` embedded by `model_key`'s model: through the store's index, or with their vector in the
    value (numpy ranking). Returns the items as written."""
    if not items:
        return []
    values: list[dict[str, Any]]
    if found.semantic:
        values = [{**_without_vector(item.value), "model_key": model_key} for item in items]
        with using_embeddings(embeddings):
            found.store.batch(
                [
                    PutOp(tuple(item.namespace), item.key, value, index=[TEXT_FIELD])
                    for item, value in zip(items, values, strict=True)
                ]
            )
    else:
        vectors = embeddings.embed_documents([str(item.value[TEXT_FIELD]) for item in items])
        values = [
            {**item.value, "model_key": NOT_INDEXED, "vector": {"model": model_key, "data": _vector_text(v)}}
            for item, v in zip(items, vectors, strict=True)
        ]
        found.store.batch(
            [
                PutOp(tuple(item.namespace), item.key, value, index=False)
                for item, value in zip(items, values, strict=True)
            ]
        )
    return [
        Item(
            value=value,
            key=item.key,
            namespace=tuple(item.namespace),
            created_at=item.created_at,
            updated_at=item.updated_at,
        )
        for item, value in zip(items, values, strict=True)
    ]


def _without_vector(value: dict[str, Any]) -> dict[str, Any]:
    return {key: field for key, field in value.items() if key != "vector"}


def _is_stale(item: Item, model_key: str) -> bool:
    """Whether the numpy ranking needs this item embedded again (no vector, or another model's)."""
    vector = item.value.get("vector")
    return not isinstance(vector, dict) or vector.get("model") != model_key


def ranked(
    found: LongTermStore,
    scope: tuple[str, ...],
    text: str,
    k: int,
    embeddings: Embeddings,
    model_key: str,
    *,
    filter: dict[str, Any] | None = None,  # noqa: A002 - the store's own name for it
) -> list[tuple[Item, float]]:
    """The `k` items under `scope` (matching `filter`) nearest `text` by cosine similarity, best first; no
    model call when the scope holds nothing. Items embedded by another model, or not yet, are embedded
    first."""
    store = found.store
    if not store.search(scope, limit=1, filter=filter):
        return []
    if found.semantic:
        stale_filter = {**(filter or {}), "model_key": {"$ne": model_key}}
        put_embedded(
            found, all_items(store, scope, page=STORE_PAGE, filter=stale_filter), embeddings, model_key
        )
        with using_embeddings(embeddings, query=True):
            hits = store.search(scope, query=text, limit=k, filter=filter)
        return [(hit, float(hit.score or 0.0)) for hit in hits]
    items = all_items(store, scope, page=STORE_PAGE, filter=filter)
    redone = iter(
        put_embedded(found, [item for item in items if _is_stale(item, model_key)], embeddings, model_key)
    )
    items = [next(redone) if _is_stale(item, model_key) else item for item in items]
    matrix = np.stack([_vector(item) for item in items])
    probe = np.asarray(embeddings.embed_query(text), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(probe) or 1.0)
    scores = matrix @ probe / np.where(norms == 0, 1.0, norms)
    order = np.argsort(-scores, kind="stable")[:k]
    return [(items[index], float(scores[index])) for index in order]
