"""A repeated question and an empty cache cost no embedding model: loading it takes seconds in a new process.

The semantic cache embeds the question only when it has to compare it with stored entries of other wording:
an entry made for the same text is a hit before any embedding, and a scope with no live entry is a miss
before any embedding. The embedding model here is a fake that raises when it is asked to embed, standing in
for the weights a new process would have to load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

import retrieval.knowledge_base as knowledge_base_module
from config.settings import Settings
from graphs.rag import build_graph
from nodes.resources import use_resources
from persistence.database import open_database
from persistence.semantic_cache import SemanticCache, cache_counters, reset_cache_counters
from persistence.semantic_cache_backends import CacheScope, SqlCacheBackend
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context
from tests.conftest import FAKE_MODEL_KEY
from tests.fakes import HashEmbeddings, TaskChatModel, fake_resources
from tests.helpers.rag_world import ANSWER, QUESTION, World, world

PAYLOAD = {"answer": ANSWER, "citations": [], "sources": [], "strategy": "DIRECT"}
ACME = CacheScope(tenant="acme")


class NotLoadable(Embeddings):
    """An embedding model whose weights must not be loaded: embedding anything fails the test."""

    model_key = FAKE_MODEL_KEY

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError(f"the embedding model was loaded to embed {texts!r}")

    def embed_query(self, text: str) -> list[float]:
        raise AssertionError(f"the embedding model was loaded to embed {text!r}")


class CountingEmbeddings(HashEmbeddings):
    """The bag-of-words fake under the same key, counting the questions it embeds."""

    model_key = FAKE_MODEL_KEY

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return super().embed_query(text)


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[SqlCacheBackend]:
    database = open_database(f"sqlite:///{tmp_path / 'cache.sqlite'}")
    reset_cache_counters()
    yield SqlCacheBackend(database, ttl_s=60.0, max_entries=10)
    database.close()


def cache_over(backend: SqlCacheBackend, tmp_path: Path, model: Embeddings) -> SemanticCache:
    return SemanticCache(Settings(data_dir=tmp_path / "rag"), backend, embeddings=lambda: model)


def test_an_exact_repeat_hits_without_embedding(backend: SqlCacheBackend, tmp_path: Path) -> None:
    cache_over(backend, tmp_path, CountingEmbeddings()).store(QUESTION, ACME, "v1", PAYLOAD)
    hit = cache_over(backend, tmp_path, NotLoadable()).lookup(QUESTION, ACME, "v1")
    assert hit is not None and hit.payload == PAYLOAD and hit.question == QUESTION
    assert hit.similarity == 1.0
    assert cache_counters()["hits"] == 1


@pytest.mark.parametrize(
    ("scope", "version"),
    [
        (ACME, "v1"),
        (CacheScope(tenant="other"), "v1"),
        (ACME, "v2"),
        (CacheScope(tenant="acme", mode="x"), "v1"),
    ],
)
def test_a_scope_without_entries_misses_without_embedding(
    backend: SqlCacheBackend, tmp_path: Path, scope: CacheScope, version: str
) -> None:
    if scope != ACME or version != "v1":  # entries exist, but for another tenant, documents or scope
        cache_over(backend, tmp_path, CountingEmbeddings()).store(QUESTION, ACME, "v1", PAYLOAD)
    assert cache_over(backend, tmp_path, NotLoadable()).lookup(QUESTION, scope, version) is None
    assert cache_counters()["misses"] == 1


def test_other_wording_is_embedded_and_still_hits(backend: SqlCacheBackend, tmp_path: Path) -> None:
    cache_over(backend, tmp_path, CountingEmbeddings()).store(QUESTION, ACME, "v1", PAYLOAD)
    model = CountingEmbeddings()
    reworded = "what is the LARGEST planet in the solar system"
    hit = cache_over(backend, tmp_path, model).lookup(reworded, ACME, "v1")
    assert hit is not None and hit.question == QUESTION
    assert model.queries == [reworded]


# --- in the graph: a second process answering a repeated question ----------------------------------------


@pytest.fixture
def cached(make_settings: Callable[..., Settings], kb: KnowledgeBase, tmp_path: Path) -> Iterator[World]:
    with world(make_settings(cache_enabled=True), kb, tmp_path) as built:
        yield built


def ask(question: str = QUESTION, **context: Any) -> dict[str, Any]:
    return build_graph().invoke({"question": question}, context=Context(use_cache=True, **context))


def test_a_new_process_answers_a_repeat_from_the_cache_without_loading_the_model(
    cached: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ask()
    assert first["cache_hit"] is False and first["answer"] == ANSWER

    def embedding_factory(_settings: Settings) -> tuple[Embeddings, str]:
        return NotLoadable(), FAKE_MODEL_KEY

    monkeypatch.setattr(knowledge_base_module, "base_embeddings", embedding_factory)
    fresh_kb = KnowledgeBase(cached.settings)  # no injected model: a new process builds its own
    model = TaskChatModel()
    try:
        with use_resources(fake_resources(fresh_kb, model, settings=cached.settings)):
            second = ask()
    finally:
        fresh_kb.close()
    assert second["cache_hit"] is True and second["answer"] == first["answer"]
    assert model.calls == []
