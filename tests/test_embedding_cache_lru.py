"""The embedding cache's LRU bound (persistence/embedding_cache.py, RAG_EMBEDDING_CACHE_MAX_ENTRIES; seed
003's TODO): beyond the bound the least recently stored or read entries go first; reads refresh an entry;
catalogs written before the bound existed are upgraded in place. A fake clock orders the uses."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from config.settings import Settings
from persistence.catalog import Catalog, open_catalog
from retrieval.embeddings import CachedEmbeddings
from tests.fakes import HashEmbeddings


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
    return set(catalog.get_vectors(model_key, ["a", "b", "c", "d", "e", "f"]))


def test_the_least_recently_used_entries_are_evicted_first(make_catalog: Callable[[int], Catalog]) -> None:
    catalog = make_catalog(3)
    for key in "abc":
        catalog.put_vectors("m", {key: [float(ord(key))]})
    assert catalog.get_vectors("m", ["a"]) == {"a": [97.0]}  # a read makes "a" the most recent
    catalog.put_vectors("m", {"d": [100.0]})  # over the bound by one: "b" is the least recently used
    assert catalog.embedding_cache.count() == 3
    assert set(catalog.get_vectors("m", ["b"])) == set()
    catalog.put_vectors("m", {"e": [101.0]})  # then "c"
    assert set(catalog.get_vectors("m", ["c"])) == set()
    # Storing a vector again refreshes it too (its first vector is kept).
    catalog.put_vectors("m", {"a": [0.0]})
    catalog.put_vectors("m", {"f": [102.0]})
    assert catalog.get_vectors("m", ["a", "d", "e", "f"]) == {"a": [97.0], "e": [101.0], "f": [102.0]}


def test_every_model_counts_against_one_bound(make_catalog: Callable[[int], Catalog]) -> None:
    catalog = make_catalog(2)
    catalog.put_vectors("old-model", {"a": [1.0]})
    catalog.put_vectors("new-model", {"a": [2.0], "b": [3.0]})
    assert keys(catalog, "old-model") == set()
    assert keys(catalog, "new-model") == {"a", "b"}


def test_without_a_bound_nothing_is_evicted_and_reads_write_nothing(
    make_catalog: Callable[[int], Catalog],
) -> None:
    catalog = make_catalog(0)
    catalog.put_vectors("m", {key: [1.0] for key in "abcdef"})
    ticks = catalog.embedding_cache.clock()
    assert keys(catalog) == set("abcdef")
    assert catalog.embedding_cache.clock() == ticks + 1  # the read did not ask the time: no write


def test_a_catalog_from_before_the_bound_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE embedding_cache (model_key VARCHAR NOT NULL, content_hash VARCHAR NOT NULL, "
            "vector BLOB NOT NULL, PRIMARY KEY (model_key, content_hash))"
        )
        connection.execute("INSERT INTO embedding_cache VALUES ('m', 'old', zeroblob(4))")
    catalog = Catalog(path, embedding_cache_max_entries=2)
    try:
        catalog.embedding_cache.clock = Clock()
        assert catalog.get_vectors("m", ["old"]) == {"old": [0.0]}  # kept, readable, now recent
        catalog.put_vectors("m", {"new": [1.0], "newer": [2.0]})
        assert set(catalog.get_vectors("m", ["old", "new", "newer"])) == {"new", "newer"}
    finally:
        catalog.close()
    with sqlite3.connect(path) as connection:
        indexes = {row[1] for row in connection.execute("PRAGMA index_list(embedding_cache)")}
    assert "ix_embedding_cache_last_used" in indexes
    Catalog(path).close()  # opening it again is a no-op


def test_the_setting_bounds_the_knowledge_base_cache(make_settings: Callable[..., Settings]) -> None:
    """Through the product: RAG_EMBEDDING_CACHE_MAX_ENTRIES=2, three texts embedded: the least recent is
    evicted, so embedding it again calls the model again while the two kept are cache hits."""
    catalog = open_catalog(make_settings(embedding_cache_max_entries=2))
    try:
        assert catalog.embedding_cache.max_entries == 2
        catalog.embedding_cache.clock = Clock()
        model = HashEmbeddings()
        cached = CachedEmbeddings(model, "fake", catalog)
        for text in ("heron", "reed", "comet"):
            cached.embed_documents([text])
        model.reset_counts()
        cached.embed_documents(["reed", "comet"])
        assert model.embedded_texts == []
        cached.embed_documents(["heron"])
        assert model.embedded_texts == ["heron"]
    finally:
        catalog.close()


def test_the_default_bound_is_large_and_zero_means_none(make_settings: Callable[..., Settings]) -> None:
    assert make_settings().embedding_cache_max_entries == 1_000_000
    assert make_settings(embedding_cache_max_entries=0).embedding_cache_max_entries == 0


@pytest.mark.servers
def test_the_bound_and_the_upgrade_on_postgres(pg_url: str) -> None:
    """The same order on a PostgreSQL catalog (its upsert and its ALTER TABLE ... IF NOT EXISTS)."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE embedding_cache (model_key VARCHAR NOT NULL, content_hash VARCHAR NOT NULL, "
            "vector BYTEA NOT NULL, PRIMARY KEY (model_key, content_hash))"
        )
        connection.execute("INSERT INTO embedding_cache VALUES ('m', 'old', '\\x00000000')")
    catalog = Catalog(pg_url, embedding_cache_max_entries=3)
    try:
        catalog.embedding_cache.clock = Clock()
        catalog.put_vectors("m", {"a": [1.0]})
        catalog.put_vectors("m", {"b": [2.0]})
        assert catalog.get_vectors("m", ["old"]) == {"old": [0.0]}  # read: now more recent than a and b
        catalog.put_vectors("m", {"c": [3.0], "a": [9.0]})  # a refreshed, c new: b is the oldest
        assert set(catalog.get_vectors("m", ["old", "a", "b", "c"])) == {"old", "a", "c"}
        assert catalog.get_vectors("m", ["a"]) == {"a": [1.0]}
    finally:
        catalog.close()
    Catalog(pg_url).close()  # opening it again is a no-op
