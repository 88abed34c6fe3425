"""The embedding cache's LRU bound (persistence/embedding_cache.py, EMBEDDING_CACHE_MAX_ENTRIES): beyond
the bound the least recently stored or read entries of a tenant go first; reads refresh an entry; a table
written before the cache was scoped by tenant is replaced by an empty one. A fake clock orders the uses."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from config.settings import Settings
from persistence import catalog as catalog_module
from persistence.catalog import Catalog, open_catalog
from retrieval.embeddings import CachedEmbeddings
from tests.fakes import HashEmbeddings
from tests.helpers.storage import cache_entries

#: The tenant whose entries these tests store and read.
TENANT = "acme"


class Clock:
    """A clock that ticks once per reading, so every use is strictly later than the one before."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture
def make_catalog(tmp_path: Path) -> Iterator[Callable[[int], Catalog]]:
    opened: list[Catalog] = []

    def factory(max_entries: int) -> Catalog:
        catalog = Catalog(tmp_path / f"catalog-{len(opened)}.sqlite", embedding_cache_max_entries=max_entries)
        catalog.embedding_cache.clock = Clock()
        opened.append(catalog)
        return catalog

    yield factory
    for catalog in opened:
        catalog.close()


def keys(catalog: Catalog, model_key: str = "m") -> set[str]:
    return set(catalog.get_vectors(TENANT, model_key, ["a", "b", "c", "d", "e", "f"]))


def test_the_least_recently_used_entries_are_evicted_first(make_catalog: Callable[[int], Catalog]) -> None:
    catalog = make_catalog(3)
    for key in "abc":
        catalog.put_vectors(TENANT, "m", {key: [float(ord(key))]})
    assert catalog.get_vectors(TENANT, "m", ["a"]) == {"a": [97.0]}  # a read makes "a" the most recent
    catalog.put_vectors(TENANT, "m", {"d": [100.0]})  # over the bound by one: "b" is the least recently used
    assert cache_entries(catalog.embedding_cache) == 3
    assert set(catalog.get_vectors(TENANT, "m", ["b"])) == set()
    catalog.put_vectors(TENANT, "m", {"e": [101.0]})  # then "c"
    assert set(catalog.get_vectors(TENANT, "m", ["c"])) == set()
    # Storing a vector again refreshes it too (its first vector is kept).
    catalog.put_vectors(TENANT, "m", {"a": [0.0]})
    catalog.put_vectors(TENANT, "m", {"f": [102.0]})
    assert catalog.get_vectors(TENANT, "m", ["a", "d", "e", "f"]) == {"a": [97.0], "e": [101.0], "f": [102.0]}


def test_every_model_counts_against_one_bound(make_catalog: Callable[[int], Catalog]) -> None:
    catalog = make_catalog(2)
    catalog.put_vectors(TENANT, "old-model", {"a": [1.0]})
    catalog.put_vectors(TENANT, "new-model", {"a": [2.0], "b": [3.0]})
    assert keys(catalog, "old-model") == set()
    assert keys(catalog, "new-model") == {"a", "b"}


def test_without_a_bound_nothing_is_evicted_and_reads_write_nothing(
    make_catalog: Callable[[int], Catalog],
) -> None:
    catalog = make_catalog(0)
    catalog.put_vectors(TENANT, "m", {key: [1.0] for key in "abcdef"})
    ticks = catalog.embedding_cache.clock()
    assert keys(catalog) == set("abcdef")
    assert catalog.embedding_cache.clock() == ticks + 1  # the read did not ask the time: no write


def test_a_cache_table_without_tenants_is_replaced_on_open(tmp_path: Path) -> None:
    """A catalog whose cache predates tenant scoping (no `tenant` column, rows of unknown tenants) opens: its
    rows are dropped, never served to a tenant, and the new table works; opening it again is a no-op."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE embedding_cache (model_key VARCHAR NOT NULL, content_hash VARCHAR NOT NULL, "
            "vector BLOB NOT NULL, last_used FLOAT NOT NULL DEFAULT 0, PRIMARY KEY (model_key, content_hash))"
        )
        connection.execute("CREATE INDEX ix_embedding_cache_last_used ON embedding_cache (last_used)")
        connection.execute("INSERT INTO embedding_cache VALUES ('m', 'old', zeroblob(4), 0)")
    catalog = Catalog(path, embedding_cache_max_entries=2)
    try:
        catalog.embedding_cache.clock = Clock()
        assert catalog.get_vectors(TENANT, "m", ["old"]) == {}
        assert cache_entries(catalog.embedding_cache) == 0
        catalog.put_vectors(TENANT, "m", {"new": [1.0]})
    finally:
        catalog.close()
    with sqlite3.connect(path) as connection:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(embedding_cache)")}
        indexes = {row[1] for row in connection.execute("PRAGMA index_list(embedding_cache)")}
    assert "tenant" in columns
    assert "ix_embedding_cache_tenant_last_used" in indexes
    reopened = Catalog(path)
    try:
        assert reopened.get_vectors(TENANT, "m", ["new"]) == {"new": [1.0]}  # kept: no second rebuild
    finally:
        reopened.close()


def test_the_bound_applies_to_the_knowledge_base_cache(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the product: EMBEDDING_CACHE_MAX_ENTRIES=2, three texts embedded: the least recent is
    evicted, so embedding it again calls the model again while the two kept are cache hits."""
    monkeypatch.setattr(catalog_module, "EMBEDDING_CACHE_MAX_ENTRIES", 2)
    catalog = open_catalog(make_settings())
    try:
        assert catalog.embedding_cache.max_entries == 2
        catalog.embedding_cache.clock = Clock()
        model = HashEmbeddings()
        cached = CachedEmbeddings(model, "fake", catalog).for_tenant(TENANT)
        for text in ("heron", "reed", "comet"):
            cached.embed_documents([text])
        model.reset_counts()
        cached.embed_documents(["reed", "comet"])
        assert model.embedded_texts == []
        cached.embed_documents(["heron"])
        assert model.embedded_texts == ["heron"]
    finally:
        catalog.close()


def test_the_default_bound_is_large(make_settings: Callable[..., Settings]) -> None:
    catalog = open_catalog(make_settings())
    try:
        assert catalog.embedding_cache.max_entries == 1_000_000
    finally:
        catalog.close()


@pytest.mark.servers
def test_the_bound_and_the_rebuild_on_postgres(pg_url: str) -> None:
    """The same order on a PostgreSQL catalog (its upsert), after an unscoped table was replaced; another
    tenant's entries neither answer nor count against this tenant's bound."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE embedding_cache (model_key VARCHAR NOT NULL, content_hash VARCHAR NOT NULL, "
            "vector BYTEA NOT NULL, PRIMARY KEY (model_key, content_hash))"
        )
        connection.execute("INSERT INTO embedding_cache VALUES ('m', 'old', '\\x00000000')")
    catalog = Catalog(pg_url, embedding_cache_max_entries=2)
    try:
        catalog.embedding_cache.clock = Clock()
        assert catalog.get_vectors(TENANT, "m", ["old"]) == {}
        catalog.put_vectors("other", "m", {"x": [5.0], "y": [6.0]})
        catalog.put_vectors(TENANT, "m", {"a": [1.0]})
        catalog.put_vectors(TENANT, "m", {"b": [2.0]})
        assert catalog.get_vectors(TENANT, "m", ["a"]) == {"a": [1.0]}  # read: now more recent than b
        catalog.put_vectors(TENANT, "m", {"c": [3.0]})  # b is the oldest of this tenant's
        assert set(catalog.get_vectors(TENANT, "m", ["a", "b", "c", "x"])) == {"a", "c"}
        assert set(catalog.get_vectors("other", "m", ["x", "y"])) == {"x", "y"}
    finally:
        catalog.close()
    Catalog(pg_url).close()  # opening it again is a no-op
