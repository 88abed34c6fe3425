"""The old `memories` table of the app database, copied once into the long-term store by the first process
that opens it (the store is not the app database, so no Alembic migration can). Resumable and never
duplicating: an id already in the store is skipped, so a cut-short copy just runs again and two processes
copying at once write the same items; a marker item records the finished copy. Vectors are not copied
(the first search embeds).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from langgraph.store.base import BaseStore, GetOp, PutOp
from sqlalchemy import select

from config.settings import Settings
from persistence.database import MemoryRow, as_utc, get_database, utcnow
from persistence.long_term_store import (
    MEMORIES,
    MEMORIES_TABLE_MARKER,
    MIGRATION_NAMESPACE,
    TEXT_FIELD,
    LongTermStore,
    long_term_store,
    namespace,
)

logger = logging.getLogger(__name__)

#: Where the marker of a finished copy is kept.
MARKER_NAMESPACE = MIGRATION_NAMESPACE
MARKER_KEY = MEMORIES_TABLE_MARKER
#: Rows read, checked and written per step of the copy.
COPY_PAGE = 500


#: `model_key` of an item the store's index does not hold a vector of (persistence.store_search).
NOT_EMBEDDED = ""


def memory_value(
    *,
    memory_id: str,
    tenant: str,
    conversation_id: str,
    kind: str,
    text: str,
    created_at: str,
    metadata: Mapping[str, Any],
) -> dict[str, Any]:
    """A memory's item value in the store (persistence.memories reads and writes this layout); `model_key`
    '' = not embedded yet (the first search embeds it)."""
    return {
        "id": memory_id,
        "tenant": tenant,
        "conversation_id": conversation_id,
        "kind": kind,
        TEXT_FIELD: text,
        "created_at": created_at,
        "metadata": dict(metadata),
        "model_key": NOT_EMBEDDED,
    }


_copied: set[str] = set()
_copied_lock = threading.Lock()


def memory_store(settings: Settings) -> LongTermStore:
    """The settings' long-term store, with the old memories table copied into it (checked once per location
    and process)."""
    opened = long_term_store(settings)
    with _copied_lock:
        if opened.location not in _copied:
            copy_legacy_memories(settings, opened.store)
            _copied.add(opened.location)
    return opened


def legacy_copied(store: BaseStore) -> bool:
    """Whether this store already holds the table's memories (its marker is written)."""
    return store.get(MARKER_NAMESPACE, MARKER_KEY) is not None


def copy_legacy_memories(settings: Settings, store: BaseStore) -> int:
    """Copy the app database's memory rows into `store` unless its marker says it was done; how many items
    were written (0 when done before, or the table is empty)."""
    if legacy_copied(store):
        return 0
    database = get_database(settings)
    copied = 0
    last = 0
    while True:
        with database.session() as session:
            statement = select(MemoryRow).where(MemoryRow.id > last).order_by(MemoryRow.id).limit(COPY_PAGE)
            rows = list(session.scalars(statement))
        if not rows:
            break
        last = rows[-1].id
        places = [(namespace(MEMORIES, row.tenant, row.conversation_id), row.public_id) for row in rows]
        present = store.batch([GetOp(scope, key) for scope, key in places])
        writes = [
            PutOp(
                scope,
                key,
                memory_value(
                    memory_id=row.public_id,
                    tenant=row.tenant,
                    conversation_id=row.conversation_id,
                    kind=row.kind,
                    text=row.content,
                    created_at=as_utc(row.created_at).isoformat(),
                    metadata=_metadata(row.metadata_json),
                ),
                index=False,
            )
            for (scope, key), row, found in zip(places, rows, present, strict=True)
            if found is None
        ]
        if writes:
            store.batch(writes)
        copied += len(writes)
    store.put(MARKER_NAMESPACE, MARKER_KEY, {"copied": copied, "at": utcnow().isoformat()}, index=False)
    if copied:
        logger.info("copied %d memories from the app database into the long-term store", copied)
    return copied


def _metadata(text: str | None) -> dict[str, object]:
    """A row's metadata as stored (a JSON object; anything else is kept under `value`, never lost)."""
    loaded = json.loads(text or "{}")
    return loaded if isinstance(loaded, dict) else {"value": loaded}
