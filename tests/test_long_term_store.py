"""The long-term store (persistence.long_term_store): built from the settings (a SqliteStore in the data
folder), searched by meaning with the engine's embedding model, named by langgraph.json for the LangGraph
server, holding the memories the app database kept before (copied once, ids kept, never twice), and keeping
each tenant's memories to that tenant from Python and REST alike.

The fake bag-of-words embeddings (tests.fakes.HashEmbeddings) rank a memory sharing words with the query
first. Where this Python's sqlite3 cannot load sqlite-vec, the store's own vector search is exercised with a
stand-in of sqlite-vec's `vec_distance_cosine` written in numpy (`indexed_store`), besides the numpy ranking
the engine falls back to.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sqlite3
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.base import VECTOR_MIGRATIONS
from sqlalchemy import text

from config.settings import Settings, load_settings
from persistence.database import close_databases, get_database
from persistence.long_term_store import (
    MEMORIES,
    ActiveEmbeddings,
    LongTermStore,
    ThreadedSqliteStore,
    close_long_term_stores,
    long_term_store,
    namespace,
    open_sqlite_store,
    sqlite_vec_loadable,
    store_path,
)
from persistence.memories import (
    add_memory,
    get_memory,
    has_memories,
    list_memories,
    recall_memories,
    search_memories,
)
from persistence.memory_migration import MARKER_KEY, MARKER_NAMESPACE, copy_legacy_memories
from retrieval.knowledge_base import KnowledgeBase
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings
from tests.helpers.api_server import serve
from tests.helpers.rag_world import world

REPO = Path(__file__).resolve().parents[1]
UNITS = "The customer prefers metric units in every report."
TEA = "Send the oolong tea order to the Lisbon office."
DEADLINE = "The project deadline moved to the first of March."


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    """Settings on a fresh data folder; every store and database opened here is closed after."""
    yield load_settings(data_dir=tmp_path / "rag")
    close_long_term_stores()
    close_databases()


def _cosine_distance(left: bytes, right: bytes) -> float:
    """sqlite-vec's vec_distance_cosine over two float32 blobs (a test stand-in where it cannot load)."""
    a, b = np.frombuffer(left, dtype=np.float32), np.frombuffer(right, dtype=np.float32)
    return 1.0 - float(a @ b / ((np.linalg.norm(a) * np.linalg.norm(b)) or 1.0))


def indexed_store(path: Path) -> LongTermStore:
    """A SqliteStore that embeds and ranks by itself: sqlite-vec when it loads, else the stand-in."""
    if sqlite_vec_loadable():
        return open_sqlite_store(path, semantic=True)
    connection = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    connection.create_function("vec_distance_cosine", 2, _cosine_distance, deterministic=True)
    SqliteStore(connection).setup()
    connection.executescript(VECTOR_MIGRATIONS[0])
    store = ThreadedSqliteStore(
        connection, index={"dims": 0, "embed": ActiveEmbeddings(), "fields": ["text"]}
    )
    store.is_setup = True
    return LongTermStore(store, True, str(path))


def fake(settings: Settings, **extra: object) -> dict[str, object]:
    return {"settings": settings, "embeddings": HashEmbeddings(), "model_key": "fake", **extra}


# --- the factory ------------------------------------------------------------------------------------------


def test_the_factory_opens_a_sqlite_store_in_the_data_folder(settings: Settings) -> None:
    opened = long_term_store(settings)
    assert isinstance(opened.store, SqliteStore) and isinstance(opened.store, BaseStore)
    assert store_path(settings) == settings.data_dir / "store.sqlite" and store_path(settings).exists()
    assert opened.semantic is sqlite_vec_loadable()
    assert long_term_store(settings) is opened  # one store per location and process


@pytest.mark.parametrize("indexed", [True, False], ids=["store-vector-search", "numpy-ranking"])
def test_semantic_search_returns_the_nearest_memory(
    settings: Settings, tmp_path: Path, indexed: bool
) -> None:
    found = (
        indexed_store(tmp_path / "indexed.sqlite")
        if indexed
        else open_sqlite_store(tmp_path / "plain.sqlite", semantic=False)
    )
    assert found.semantic is indexed
    units = add_memory(UNITS, tenant="acme", **fake(settings, store=found))  # type: ignore[arg-type]
    add_memory(TEA, tenant="acme", **fake(settings, store=found))  # type: ignore[arg-type]
    add_memory(DEADLINE, tenant="acme", conversation_id="c-1", **fake(settings, store=found))  # type: ignore[arg-type]
    nearest = search_memories(
        "which units does the customer want", tenant="acme", **fake(settings, store=found)
    )  # type: ignore[arg-type]
    assert nearest[0].id == units.id and nearest[0].score is not None and nearest[0].score > 0.3
    assert all(nearest[0].score >= m.score for m in nearest[1:])  # type: ignore[operator]
    scoped = search_memories("deadline", tenant="acme", conversation_id="c-1", **fake(settings, store=found))  # type: ignore[arg-type]
    assert [m.content for m in scoped] == [DEADLINE]


def test_items_of_another_model_are_embedded_again_before_a_search(
    settings: Settings, tmp_path: Path
) -> None:
    found = indexed_store(tmp_path / "indexed.sqlite")
    first = add_memory(UNITS, tenant="acme", **fake(settings, store=found))  # type: ignore[arg-type]
    newer = HashEmbeddings()
    hits = search_memories(
        "metric units", tenant="acme", settings=settings, embeddings=newer, model_key="v2", store=found
    )
    assert [m.id for m in hits] == [first.id] and UNITS in newer.embedded_texts
    (item,) = found.store.search(namespace(MEMORIES, "acme"), limit=10)
    assert item.value["model_key"] == "v2"


# --- langgraph.json ---------------------------------------------------------------------------------------


def test_langgraph_json_names_a_store_factory_that_builds(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded the way the LangGraph server loads it: the file by path, then the factory entered."""
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    path = json.loads((REPO / "langgraph.json").read_text())["store"]["path"]
    file, function = path.rsplit(":", 1)
    spec = importlib.util.spec_from_file_location("a_name_the_server_draws", REPO / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, file, module)  # the server registers the path, not the module's name
    spec.loader.exec_module(module)

    async def use() -> object:
        async with getattr(module, function)() as store:
            assert isinstance(store, BaseStore)
            await store.aput(("notes", "acme"), "k1", {"text": "hello"})
            item = await store.aget(("notes", "acme"), "k1")
            return None if item is None else item.value

    assert asyncio.run(use()) == {"text": "hello"}
    assert long_term_store(load_settings(data_dir=settings.data_dir)).store.get(("notes", "acme"), "k1")


# --- the copy of the old table ----------------------------------------------------------------------------

OLD_ROWS = [  # public id, tenant, conversation, kind, content, metadata
    ("7", "acme", "", "note", UNITS, '{"source": "call"}'),
    ("0123456789abcdef", "acme", "c-1", "preference", TEA, "{}"),
    ("fedcba9876543210", "acme", "c.2", "note", DEADLINE, '{"tags": ["x"]}'),
    ("42", "bravo", "", "note", "Bravo keeps its own units.", "{}"),
]


def write_old_rows(settings: Settings) -> None:
    """The rows earlier releases wrote into the app database's memories table."""
    with get_database(settings).engine.begin() as connection:
        for number, (public_id, tenant, conversation, kind, content, metadata) in enumerate(OLD_ROWS, 1):
            connection.execute(
                text(
                    "INSERT INTO memories (public_id, tenant, conversation_id, kind, content, embedding, "
                    "model_key, metadata_json, created_at) VALUES (:p, :t, :c, :k, :x, NULL, 'old', :m, :at)"
                ),
                {"p": public_id, "t": tenant, "c": conversation, "k": kind, "x": content, "m": metadata,
                 "at": datetime(2025, 1, number, 12, 0, tzinfo=UTC)},
            )  # fmt: skip


def stored_keys(store: BaseStore) -> list[str]:
    return sorted(item.key for item in store.search((MEMORIES,), limit=100))


def test_old_rows_are_copied_once_with_their_ids(settings: Settings) -> None:
    write_old_rows(settings)
    opened = long_term_store(settings)
    acme = list_memories(tenant="acme", settings=settings)
    assert [(m.id, m.conversation_id, m.kind, m.content) for m in acme] == [
        ("fedcba9876543210", "c.2", "note", DEADLINE),
        ("0123456789abcdef", "c-1", "preference", TEA),
        ("7", "", "note", UNITS),
    ]
    assert acme[2].metadata == {"source": "call"} and acme[2].created_at == "2025-01-01T12:00:00+00:00"
    assert get_memory(7, tenant="acme", settings=settings) == acme[2]
    assert get_memory("42", tenant="acme", settings=settings) is None  # bravo's
    assert [m.content for m in list_memories(tenant="acme", conversation_id="c.2", settings=settings)] == [
        DEADLINE
    ]
    found = search_memories("oolong tea order", tenant="acme", **fake(settings))  # type: ignore[arg-type]
    assert found[0].id == "0123456789abcdef"  # embedded on this first search
    assert stored_keys(opened.store) == sorted(row[0] for row in OLD_ROWS)
    # run again (the marker removed, as after a copy cut short): nothing written twice
    opened.store.delete(MARKER_NAMESPACE, MARKER_KEY)
    assert copy_legacy_memories(settings, opened.store) == 0
    assert stored_keys(opened.store) == sorted(row[0] for row in OLD_ROWS)
    assert copy_legacy_memories(settings, opened.store) == 0  # the marker: not even read


def test_a_copy_cut_short_resumes_with_the_missing_rows(settings: Settings, tmp_path: Path) -> None:
    write_old_rows(settings)
    partial = open_sqlite_store(tmp_path / "partial.sqlite", semantic=False)
    assert copy_legacy_memories(settings, partial.store) == len(OLD_ROWS)
    for item in partial.store.search((MEMORIES, "acme"), limit=2):  # as if only the first rows were written
        partial.store.delete(tuple(item.namespace), item.key)
    partial.store.delete(MARKER_NAMESPACE, MARKER_KEY)
    assert copy_legacy_memories(settings, partial.store) == 2
    assert stored_keys(partial.store) == sorted(row[0] for row in OLD_ROWS)
    assert partial.store.get(MARKER_NAMESPACE, MARKER_KEY) is not None


# --- tenants and conversations ----------------------------------------------------------------------------


def test_bravo_never_appears_in_alphas_search_list_or_get(settings: Settings) -> None:
    mine = add_memory(UNITS, tenant="alpha", **fake(settings))  # type: ignore[arg-type]
    in_c1 = add_memory(TEA, tenant="alpha", conversation_id="c-1", **fake(settings))  # type: ignore[arg-type]
    add_memory(DEADLINE, tenant="alpha", conversation_id="c-2", **fake(settings))  # type: ignore[arg-type]
    theirs = [
        add_memory(f"{text} (bravo)", tenant="bravo", conversation_id=c, **fake(settings))  # type: ignore[arg-type]
        for text, c in ((UNITS, ""), (TEA, "c-1"), (DEADLINE, "c-2"))
    ]
    query = "customer units tea order deadline bravo"
    everything = search_memories(query, tenant="alpha", k=50, **fake(settings))  # type: ignore[arg-type]
    assert {m.tenant for m in everything} == {"alpha"} and len(everything) == 3
    assert {m.tenant for m in list_memories(tenant="alpha", settings=settings)} == {"alpha"}
    assert all(get_memory(m.id, tenant="alpha", settings=settings) is None for m in theirs)
    recalled = recall_memories(
        query, tenant="alpha", conversation_id="c-1", k=10, min_score=-1.0, **fake(settings)
    )  # type: ignore[arg-type]
    assert [m.id for m in recalled] == [in_c1.id, mine.id]  # its own first, then tenant-wide; never c-2's
    assert has_memories("alpha", "c-9", settings=settings)  # the tenant-wide one
    only_c1 = search_memories(query, tenant="alpha", conversation_id="c-1", **fake(settings))  # type: ignore[arg-type]
    assert [m.id for m in only_c1] == [in_c1.id]


def test_rest_keeps_bravos_memories_from_alpha(settings: Settings, tmp_path: Path) -> None:
    keys = "key-alpha:alpha,key-bravo:bravo"
    alpha, bravo = {"X-API-Key": "key-alpha"}, {"X-API-Key": "key-bravo"}
    kb = KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    with (
        world(settings, kb, tmp_path) as built,
        serve(built.settings.model_copy(update={"api_keys": keys})) as client,
    ):
        theirs = client.post(
            "/api/v1/memories", json={"text": UNITS, "conversation_id": "c-1"}, headers=bravo
        )
        mine = client.post("/api/v1/memories", json={"text": TEA, "conversation_id": "c-1"}, headers=alpha)
        assert theirs.status_code == mine.status_code == 200
        theirs_id, mine_id = theirs.json()["id"], mine.json()["id"]
        found = client.get("/api/v1/memories/search", params={"query": "customer units tea"}, headers=alpha)
        assert [m["id"] for m in found.json()["memories"]] == [mine_id]
        listed = client.get("/api/v1/memories", params={"conversation_id": "c-1"}, headers=alpha)
        assert [m["id"] for m in listed.json()["memories"]] == [mine_id]
        assert client.get(f"/api/v1/memories/{theirs_id}", headers=alpha).status_code == 404
        assert client.get(f"/api/v1/memories/{theirs_id}", headers=bravo).json()["id"] == theirs_id


# --- PostgreSQL -------------------------------------------------------------------------------------------


@pytest.mark.servers
def test_a_postgres_database_url_puts_memories_in_a_postgres_store(tmp_path: Path, pg_url: str) -> None:
    """RAG_DATABASE_URL on PostgreSQL: the store is a PostgresStore on it (pgvector's index when the server
    offers it, else numpy's ranking), the old table's rows are copied once, tenants stay apart."""
    from langgraph.store.postgres import PostgresStore

    from persistence.long_term_store import pgvector_available
    from persistence.postgres_checkpoints import close_pools
    from tests.helpers.postgres import pg_settings, rows

    settings = pg_settings(tmp_path, pg_url)
    try:
        write_old_rows(settings)
        opened = long_term_store(settings)
        assert isinstance(opened.store, PostgresStore)
        assert opened.semantic is pgvector_available(pg_url, settings.database_connect_timeout_s)
        assert not (settings.data_dir / "store.sqlite").exists()
        assert [m.id for m in list_memories(tenant="bravo", settings=settings)] == ["42"]
        mine = add_memory(UNITS, tenant="alpha", conversation_id="c-1", **fake(settings))  # type: ignore[arg-type]
        found = search_memories("customer metric units", tenant="alpha", **fake(settings))  # type: ignore[arg-type]
        assert [m.id for m in found] == [mine.id]
        acme = search_memories("oolong tea order", tenant="acme", k=1, **fake(settings))  # type: ignore[arg-type]
        assert [m.id for m in acme] == ["0123456789abcdef"]
        assert get_memory(mine.id, tenant="bravo", settings=settings) is None
        opened.store.delete(MARKER_NAMESPACE, MARKER_KEY)
        assert copy_legacy_memories(settings, opened.store) == 0
        count = "SELECT COUNT(*) FROM store WHERE split_part(prefix, '.', 1) = 'memories'"
        assert rows(pg_url, count) == [(len(OLD_ROWS) + 1,)]
    finally:
        close_long_term_stores()
        close_databases()
        close_pools()
