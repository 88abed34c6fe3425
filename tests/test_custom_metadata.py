"""Custom metadata keys of JSON records (category, session_id, related_plot_id, ...) are kept on their chunks
and filterable in both retrievers, while the keys the engine sets itself cannot be forged by a record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.types import is_custom_metadata_key
from retrieval.filters import FilterError, parse_filter
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.loaders import load_file
from retrieval.search import Searcher
from tests.conftest import write_corpus

WORD = "lantern"
RECORDS = [
    {
        "id": "e1",
        "text": f"The {WORD} festival opens.",
        "category": "plot",
        "session_id": "s1",
        "related_plot_id": 7,
    },
    {
        "id": "e2",
        "text": f"A {WORD} is lit at dusk.",
        "category": "lore",
        "session_id": "s1",
        "related_plot_id": 8,
    },
    {
        "id": "e3",
        "text": f"The {WORD} goes out.",
        "category": "plot",
        "session_id": "s2",
        "tenant": "intruder",
    },
]


@pytest.fixture
def records_kb(tmp_path: Path, kb: KnowledgeBase) -> KnowledgeBase:
    files = write_corpus(tmp_path / "corpus", {"events.jsonl": "\n".join(json.dumps(r) for r in RECORDS)})
    assert ingest_paths(kb, list(files.values())).count("indexed") == 1
    return kb


def test_loader_keeps_custom_scalar_keys(tmp_path: Path) -> None:
    files = write_corpus(tmp_path, {"r.json": json.dumps([{**RECORDS[0], "nested": {"a": 1}, "bad-key": 1}])})
    (document,) = load_file(files["r.json"], 10_000)
    assert document.metadata["category"] == "plot"
    assert document.metadata["session_id"] == "s1" and document.metadata["related_plot_id"] == 7
    assert "nested" not in document.metadata and "bad-key" not in document.metadata
    assert "text" not in document.metadata and "id" not in document.metadata


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"category": "plot"}, {"e1", "e3"}),
        ({"$and": [{"category": "plot"}, {"session_id": "s1"}]}, {"e1"}),
        ({"related_plot_id": {"$gte": 8}}, {"e2"}),
        ({"session_id": {"$in": ["s2"]}}, {"e3"}),
    ],
)
def test_custom_keys_filter_both_retrievers(
    records_kb: KnowledgeBase, mode: str, raw: dict[str, object], expected: set[str]
) -> None:
    hits = Searcher(records_kb).search(WORD, k=10, mode=mode, filters=raw).hits  # type: ignore[arg-type]
    assert {hit.metadata["doc_id"] for hit in hits} == expected


def test_a_record_cannot_forge_engine_keys(records_kb: KnowledgeBase) -> None:
    hits = Searcher(records_kb).search(WORD, k=10, mode="bm25").hits
    by_id = {hit.metadata["doc_id"]: hit.metadata for hit in hits}
    assert by_id["e3"]["tenant"] == "default"  # the record said "intruder"
    assert Searcher(records_kb).search(WORD, k=10, mode="bm25", tenant="intruder").hits == []


@pytest.mark.parametrize("key", ["bad-key", "a.b", "x' OR 1=1 --", "tenant", "1abc", ""])
def test_unsafe_or_reserved_keys_are_refused(key: str) -> None:
    assert not is_custom_metadata_key(key)
    with pytest.raises(FilterError):
        parse_filter({key: "x"})
