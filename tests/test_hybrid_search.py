"""Hybrid search runs its keyword half on a pool thread while the dense half runs in the caller's thread:
same results as one after the other, both stage times reported, and a failure of either half is the
search's failure, with nothing left running."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from config.settings import Settings
from retrieval import search as search_module
from retrieval.indexing import index_raw_text
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher

# Texts written for these tests.
NOTES = [
    "The lighthouse keeper logs the fog horn hours in a leather book.",
    "Fog rolls over the harbour every morning in late autumn.",
    "Herring boats leave the harbour before dawn and return by noon.",
    "A leather satchel holds the keeper's charts and a brass compass.",
]


def _kb(make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase], **extra: Any) -> Any:
    kb = make_kb(make_settings(**extra))
    for index, text in enumerate(NOTES):
        index_raw_text(kb, text, tenant="t", collection="c", doc_id=f"note{index}")
    return kb


def test_parallel_hybrid_returns_what_the_sequential_one_returns(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kb = _kb(make_settings, make_kb)
    for query in ("fog harbour", "leather keeper", "brass compass charts"):
        monkeypatch.setattr(search_module, "HYBRID_SEARCH_THREADS", 4)
        ours = Searcher(kb).search(query, tenant="t", mode="hybrid", k=4)
        monkeypatch.setattr(search_module, "HYBRID_SEARCH_THREADS", 0)
        theirs = Searcher(kb).search(query, tenant="t", mode="hybrid", k=4)
        assert ours.hits, query
        assert [(hit.chunk_id, hit.score) for hit in ours.hits] == [
            (hit.chunk_id, hit.score) for hit in theirs.hits
        ], query
        assert {"dense_ms", "bm25_ms", "fuse_ms"} <= set(ours.timings_ms)


def test_the_keyword_half_runs_beside_the_dense_half(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kb = _kb(make_settings, make_kb)
    threads: dict[str, str] = {}
    # Each half waits at the barrier for the other: one after the other, the first would wait in vain.
    both_running = threading.Barrier(2, timeout=10)
    keyword_search, vector_search = kb.catalog.keyword_search, kb.vectors.search

    def meeting_keyword(*args: Any, **kwargs: Any) -> Any:
        threads["keyword"] = threading.current_thread().name
        both_running.wait()
        return keyword_search(*args, **kwargs)

    def meeting_dense(*args: Any, **kwargs: Any) -> Any:
        threads["dense"] = threading.current_thread().name
        both_running.wait()
        return vector_search(*args, **kwargs)

    monkeypatch.setattr(kb.catalog, "keyword_search", meeting_keyword)
    monkeypatch.setattr(kb.vectors, "search", meeting_dense)
    result = Searcher(kb).search("fog harbour", tenant="t", mode="hybrid", k=4)
    assert result.hits
    assert threads["keyword"].startswith("keyword-search")
    assert threads["dense"] == threading.current_thread().name


def test_a_failing_half_fails_the_search_after_the_other_has_finished(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kb = _kb(make_settings, make_kb)
    finished = threading.Event()
    keyword_search = kb.catalog.keyword_search

    def slow_keyword(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.2)
        try:
            return keyword_search(*args, **kwargs)
        finally:
            finished.set()

    def broken_dense(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("vector store down")

    monkeypatch.setattr(kb.catalog, "keyword_search", slow_keyword)
    monkeypatch.setattr(kb.vectors, "search", broken_dense)
    with pytest.raises(RuntimeError, match="vector store down"):
        Searcher(kb).search("fog harbour", tenant="t", mode="hybrid", k=4)
    assert finished.is_set()  # the keyword half did not outlive the failed search

    def broken_keyword(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("keyword index down")

    monkeypatch.setattr(kb.catalog, "keyword_search", broken_keyword)
    monkeypatch.setattr(kb.vectors, "search", lambda *args, **kwargs: [])
    with pytest.raises(RuntimeError, match="keyword index down"):
        Searcher(kb).search("fog harbour", tenant="t", mode="hybrid", k=4)
