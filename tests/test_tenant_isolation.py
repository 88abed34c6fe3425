"""Tenant isolation: a search as one tenant never returns another tenant's chunks, whatever the query,
mode or filter, and the catalog refuses to hand out another tenant's chunks by id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from persistence.catalog import chunks_table
from retrieval.filters import FilterError
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import SEARCH_MODES, Searcher
from tests.conftest import write_corpus

SECRET_A = "zanzibarite"
SECRET_B = "quetzalcoatlus"
SHARED_WORD = "harbour"


@pytest.fixture
def two_tenants(kb: KnowledgeBase, tmp_path: Path) -> dict[str, dict[str, Path]]:
    """Tenant A and tenant B, same collection, each with a secret word and a word both use."""
    corpus_a = write_corpus(
        tmp_path / "a",
        {
            "plans.md": f"# Plans\n\nThe {SECRET_A} launch is planned at the {SHARED_WORD}.",
            "notes.txt": f"Budget for {SECRET_A}: classified. The {SHARED_WORD} is busy.",
            "records.jsonl": json.dumps({"_id": "a-1", "text": f"{SECRET_A} record near the {SHARED_WORD}"}),
        },
    )
    corpus_b = write_corpus(
        tmp_path / "b",
        {
            "diary.md": f"# Diary\n\nA {SECRET_B} fossil was found by the {SHARED_WORD}.",
            "records.jsonl": json.dumps({"_id": "b-1", "text": f"{SECRET_B} record near the {SHARED_WORD}"}),
        },
    )
    assert ingest_paths(kb, [tmp_path / "a"], tenant="A").count("indexed") == 3
    assert ingest_paths(kb, [tmp_path / "b"], tenant="B").count("indexed") == 2
    return {"A": corpus_a, "B": corpus_b}


def chunk_ids_of(kb: KnowledgeBase, tenant: str) -> set[str]:
    """Chunk ids the catalog holds for `tenant`, read straight from its table."""
    with kb.catalog.engine.connect() as connection:
        query = chunks_table.select().where(chunks_table.c.tenant == tenant)
        return {row["chunk_id"] for row in connection.execute(query).mappings()}


def test_fixture_indexes_both_tenants(kb: KnowledgeBase, two_tenants: dict[str, dict[str, Path]]) -> None:
    ids_a, ids_b = chunk_ids_of(kb, "A"), chunk_ids_of(kb, "B")
    assert len(ids_a) == 3 and len(ids_b) == 2
    assert not ids_a & ids_b
    # Tenant A can find its own secret, so an empty result for B below means isolation, not a dead index.
    for mode in SEARCH_MODES:
        hits = Searcher(kb).search(SECRET_A, mode=mode, tenant="A", k=10).hits
        assert hits and SECRET_A in hits[0].text


@pytest.mark.parametrize("mode", SEARCH_MODES)
@pytest.mark.parametrize("query", [SECRET_A, f"{SECRET_A} {SHARED_WORD}", "launch budget classified plans"])
def test_b_never_sees_a(
    kb: KnowledgeBase, two_tenants: dict[str, dict[str, Path]], mode: str, query: str
) -> None:
    ids_a = chunk_ids_of(kb, "A")
    hits = Searcher(kb).search(query, mode=mode, tenant="B", k=100).hits  # type: ignore[arg-type]
    assert not {hit.chunk_id for hit in hits} & ids_a
    assert all(hit.metadata["tenant"] == "B" for hit in hits)
    assert all(SECRET_A not in hit.text for hit in hits)


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_filters_naming_a_cannot_reach_a(
    kb: KnowledgeBase, two_tenants: dict[str, dict[str, Path]], mode: str
) -> None:
    corpus_a = two_tenants["A"]
    attempts = [
        {"$or": [{"source": str(corpus_a["plans.md"])}, {"doc_id": "a-1"}]},
        {"source": {"$in": [str(path) for path in corpus_a.values()]}},
        {"doc_id": {"$ne": "nothing"}},
        {"$or": [{"collection": "default"}, {"page": {"$gte": -1}}]},
    ]
    for filters in attempts:
        hits = Searcher(kb).search(SECRET_A, mode=mode, tenant="B", k=100, filters=filters).hits  # type: ignore[arg-type]
        assert all(hit.metadata["tenant"] == "B" for hit in hits), filters
        assert all(SECRET_A not in hit.text for hit in hits), filters


@pytest.mark.parametrize(
    "filters",
    [
        {"tenant": "A"},
        {"tenant": {"$in": ["A", "B"]}},
        {"$or": [{"doc_type": "md"}, {"tenant": "A"}]},
        {"$and": [{"doc_type": "md"}, {"$or": [{"page": 1}, {"tenant": {"$ne": "B"}}]}]},
        '{"tenant": "A"}',
    ],
)
def test_filters_on_tenant_are_rejected(
    kb: KnowledgeBase, two_tenants: dict[str, dict[str, Path]], filters: object
) -> None:
    with pytest.raises(FilterError, match="'tenant' cannot be filtered"):
        Searcher(kb).search(SECRET_A, mode="hybrid", tenant="B", filters=filters)  # type: ignore[arg-type]


def test_collections_of_a_are_out_of_scope_for_b(kb: KnowledgeBase, tmp_path: Path) -> None:
    write_corpus(tmp_path / "private", {"x.md": f"# X\n\n{SECRET_A} in a collection only A has."})
    write_corpus(tmp_path / "public", {"y.md": f"# Y\n\n{SECRET_B} in the default collection."})
    ingest_paths(kb, [tmp_path / "private"], tenant="A", collection="private")
    ingest_paths(kb, [tmp_path / "public"], tenant="B")
    for mode in SEARCH_MODES:
        hits = Searcher(kb).search(SECRET_A, mode=mode, tenant="B", collections=["private"], k=10).hits
        assert hits == []


def test_catalog_does_not_hand_out_other_tenants_chunks_by_id(
    kb: KnowledgeBase, two_tenants: dict[str, dict[str, Path]]
) -> None:
    ids_a = sorted(chunk_ids_of(kb, "A"))
    assert kb.catalog.chunks_by_id(ids_a, tenant="B") == {}
    assert set(kb.catalog.chunks_by_id(ids_a, tenant="A")) == set(ids_a)


def test_same_file_in_two_tenants_stays_separate(kb: KnowledgeBase, tmp_path: Path) -> None:
    shared = write_corpus(tmp_path / "shared", {"memo.md": f"# Memo\n\nThe {SHARED_WORD} opens at dawn."})
    ingest_paths(kb, [shared["memo.md"]], tenant="A")
    ingest_paths(kb, [shared["memo.md"]], tenant="B")
    ids_a, ids_b = chunk_ids_of(kb, "A"), chunk_ids_of(kb, "B")
    assert len(ids_a) == len(ids_b) == 1 and ids_a != ids_b
    # Pruning the file from A (it is gone from A's folder listing) leaves B's copy alone.
    shared["memo.md"].unlink()
    summary = ingest_paths(kb, [tmp_path / "shared"], tenant="A", prune=True)
    assert summary.count("pruned") == 1
    assert chunk_ids_of(kb, "A") == set() and chunk_ids_of(kb, "B") == ids_b
    hits = Searcher(kb).search(SHARED_WORD, mode="hybrid", tenant="B", k=5).hits
    assert [hit.chunk_id for hit in hits] == sorted(ids_b)
