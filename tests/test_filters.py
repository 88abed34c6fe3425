"""Tests of retrieval.filters: validation messages, both renderings, and the property that matters most:
dense (Chroma `where`) and keyword (SQL over the catalog) search select exactly the same chunks.

Expected sets come from plain-Python predicates written next to each filter, evaluated over the metadata
the corpus below was written with, so neither rendering nor `matches` is its own oracle.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from persistence.catalog import chunks_table
from retrieval.filters import (
    MAX_FILTER_DEPTH,
    Condition,
    FilterError,
    Logical,
    matches,
    parse_filter,
    to_chroma_where,
    to_sql,
)
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from tests.conftest import isolated_settings, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings

# --- parsing -------------------------------------------------------------------------------------------


def parse_error(raw: Any) -> str:
    """The FilterError message for `raw` (fails the test if it parses)."""
    with pytest.raises(FilterError) as info:
        parse_filter(raw)
    return str(info.value)


def nested(depth: int) -> dict[str, Any]:
    """`depth` levels of $and around one condition."""
    node: dict[str, Any] = {"doc_type": "pdf"}
    for _ in range(depth):
        node = {"$and": [node, {"page": 1}]}
    return node


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"doc_type": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({"colour-name": "red"}, "unknown field 'colour-name'"),
        ({"page": {"$like": 3}}, "unknown operator '$like'"),
        ({"$not": [{"page": 1}]}, "unknown operator '$not'"),
        ({"chapter": {"$gt": "b"}}, "compares numbers only"),
        ({"doc_type": {"$in": []}}, "$in needs a non-empty list"),
        ({"doc_type": {"$nin": "pdf"}}, "$nin needs a non-empty list"),
        ({"tenant": "a"}, "'tenant' cannot be filtered"),
        ({"$or": [{"doc_type": "pdf"}, {"tenant": "a"}]}, "'tenant' cannot be filtered"),
        (nested(MAX_FILTER_DEPTH + 1), f"deeper than {MAX_FILTER_DEPTH}"),
        ({"$and": []}, "$and needs a non-empty list"),
        ({"$or": [1]}, "expected an object"),
        ({"page": {"$gte": 1, "$lte": 3}}, "one operator per field"),
        ({"doc_type": ["pdf"]}, "must be a string, number or boolean"),
        ({"page": "2"}, "'page' holds numbers"),
        ({"page": True}, "'page' holds numbers"),
        ({"page": {"$lt": 2.5}}, "'page' holds whole numbers"),
        ({"doc_type": {"$in": ["pdf", 3]}}, "must all be of one type"),
    ],
)
def test_parse_errors_say_what_is_wrong(raw: Any, fragment: str) -> None:
    assert fragment in parse_error(raw)


def test_parse_error_names_the_location() -> None:
    message = parse_error({"$or": [{"doc_type": "pdf"}, {"page": {"$gt": "x"}}]})
    assert message.startswith("filter.$or[1].page.$gt:")


def test_depth_limit_is_inclusive() -> None:
    assert parse_filter(nested(MAX_FILTER_DEPTH)) is not None


@pytest.mark.parametrize("raw", [None, "", "   ", {}, "{}"])
def test_empty_filters_mean_no_filter(raw: Any) -> None:
    assert parse_filter(raw) is None


def test_parsed_tree() -> None:
    node = parse_filter('{"doc_type": "pdf", "page": {"$gte": 2}}')
    assert node == Logical("$and", (Condition("doc_type", "$eq", "pdf"), Condition("page", "$gte", 2)))
    # A one-member $or is just its member; integral floats on integer fields become ints.
    assert parse_filter({"$or": [{"page": 3.0}]}) == Condition("page", "$eq", 3)
    # Mixed ints and floats in a list become floats (Chroma wants one type per list).
    assert parse_filter({"created_ts": {"$in": [1, 2.5]}}) == Condition("created_ts", "$in", (1.0, 2.5))


# --- renderings ----------------------------------------------------------------------------------------


def test_chroma_where_shapes() -> None:
    assert to_chroma_where(None) is None
    assert to_chroma_where(parse_filter({"doc_type": "pdf"})) == {"doc_type": {"$eq": "pdf"}}
    assert to_chroma_where(parse_filter({"doc_type": "pdf", "page": {"$gte": 2}})) == {
        "$and": [{"doc_type": {"$eq": "pdf"}}, {"page": {"$gte": 2}}]
    }
    assert to_chroma_where(parse_filter({"chapter": {"$in": ["A", "B"]}})) == {"chapter": {"$in": ["A", "B"]}}
    assert to_chroma_where(
        parse_filter({"$or": [{"page": 1}, {"$and": [{"page": {"$gt": 5}}, {"level": "x"}]}]})
    ) == {"$or": [{"page": {"$eq": 1}}, {"$and": [{"page": {"$gt": 5}}, {"level": {"$eq": "x"}}]}]}


def test_sql_rendering() -> None:
    assert to_sql(None) == ("1", [])
    assert to_sql(parse_filter({"page": {"$gte": 2}})) == ("json_extract(metadata, '$.page') >= ?", [2])
    assert to_sql(parse_filter({"doc_type": {"$in": ["pdf", "md"]}}), column="c.metadata") == (
        "json_extract(c.metadata, '$.doc_type') IN (?, ?)",
        ["pdf", "md"],
    )
    assert to_sql(parse_filter({"doc_type": {"$nin": ["pdf"]}})) == (
        "json_extract(metadata, '$.doc_type') NOT IN (?)",
        ["pdf"],
    )
    assert to_sql(parse_filter({"$or": [{"page": 1}, {"chapter": {"$ne": "A"}}]})) == (
        "(json_extract(metadata, '$.page') = ?) OR (json_extract(metadata, '$.chapter') != ?)",
        [1, "A"],
    )


def test_sql_rendering_runs_in_sqlite() -> None:
    rows = [{"page": 1, "chapter": "A"}, {"page": 2, "chapter": "B"}, {"page": 3, "chapter": "A"}]
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE t (id INTEGER, metadata TEXT)")
    connection.executemany(
        "INSERT INTO t VALUES (?, ?)", [(i, json.dumps(row)) for i, row in enumerate(rows)]
    )
    sql, params = to_sql(parse_filter({"$and": [{"chapter": "A"}, {"page": {"$gt": 1}}]}))
    assert [row[0] for row in connection.execute(f"SELECT id FROM t WHERE {sql}", params)] == [2]


def test_matches_reference_semantics() -> None:
    metadata = {"page": 4, "chapter": "Body", "doc_type": "pdf"}
    assert matches(parse_filter({"page": {"$lte": 4}}), metadata)
    assert not matches(parse_filter({"page": {"$lt": 4}}), metadata)
    assert matches(parse_filter({"$or": [{"chapter": "X"}, {"doc_type": {"$in": ["pdf"]}}]}), metadata)
    assert not matches(parse_filter({"chapter": {"$nin": ["Body"]}}), metadata)
    assert not matches(parse_filter({"level": "detail"}), metadata)  # a missing key never matches
    assert matches(None, metadata)


# --- dense and keyword search agree --------------------------------------------------------------------

COMMON_WORD = "lighthouse"
RECORDS: list[dict[str, Any]] = [
    {"_id": "r1", "doc_type": "note", "page": 1, "chapter": "Intro", "section": "Start", "level": "summary"},
    {"_id": "r2", "doc_type": "note", "page": 2, "chapter": "Intro", "section": "Details"},
    {"_id": "r3", "doc_type": "report", "page": 3, "chapter": "Body"},
    {"_id": "r4", "doc_type": "report", "page": 5, "chapter": "Body", "conversation_id": "c1"},
    {"_id": "r5", "doc_type": "memo", "page": 8, "chapter": "End", "character_id": "hero"},
    {"_id": "r6", "doc_type": "memo", "chapter": "End"},
    {"_id": "r7", "page": 13, "chapter": "Appendix"},
    {"_id": "r8", "doc_type": "note", "page": 21},
]
MARKDOWN = (
    f"# Guide\n\nThe {COMMON_WORD} guide opens here.\n\n"
    f"## Keeping\n\nA {COMMON_WORD} keeper trims the wick.\n\n"
    f"# History\n\nThe first {COMMON_WORD} stood at Pharos.\n"
)

Predicate = Callable[[dict[str, Any]], bool]
FILTER_CASES: list[tuple[dict[str, Any], Predicate]] = [
    ({"doc_type": "note"}, lambda m: m["doc_type"] == "note"),
    ({"chapter": {"$eq": "Body"}}, lambda m: m["chapter"] == "Body"),
    ({"doc_type": {"$in": ["memo", "md"]}}, lambda m: m["doc_type"] in ("memo", "md")),
    ({"page": {"$in": [1, 8, 21]}}, lambda m: m["page"] in (1, 8, 21)),
    (
        {"$and": [{"chapter": "Body"}, {"page": {"$gte": 4}}]},
        lambda m: m["chapter"] == "Body" and m["page"] >= 4,
    ),
    ({"doc_type": "note", "page": {"$lt": 21}}, lambda m: m["doc_type"] == "note" and m["page"] < 21),
    (
        {"$or": [{"doc_type": "memo"}, {"page": {"$lt": 2}}]},
        lambda m: m["doc_type"] == "memo" or m["page"] < 2,
    ),
    ({"page": {"$gt": 2}}, lambda m: m["page"] > 2),
    ({"page": {"$lte": 5}}, lambda m: m["page"] <= 5),
    ({"$and": [{"page": {"$gte": 3}}, {"page": {"$lte": 13}}]}, lambda m: 3 <= m["page"] <= 13),
    ({"doc_type": {"$ne": "note"}}, lambda m: m["doc_type"] != "note"),
    ({"chapter": {"$nin": ["Intro", "End"]}}, lambda m: m["chapter"] not in ("Intro", "End")),
    ({"page": {"$ne": -1}}, lambda m: m["page"] != -1),
    ({"level": "summary"}, lambda m: m["level"] == "summary"),
    ({"conversation_id": "c1"}, lambda m: m["conversation_id"] == "c1"),
    ({"character_id": {"$ne": ""}}, lambda m: m["character_id"] != ""),
    ({"section": "Keeping"}, lambda m: m["section"] == "Keeping"),
    ({"chapter": "History", "doc_type": "md"}, lambda m: m["chapter"] == "History" and m["doc_type"] == "md"),
    (
        {"$or": [{"$and": [{"doc_type": "report"}, {"page": {"$ne": 3}}]}, {"chapter": "Appendix"}]},
        lambda m: (m["doc_type"] == "report" and m["page"] != 3) or m["chapter"] == "Appendix",
    ),
]


def all_chunks(kb: KnowledgeBase) -> dict[str, dict[str, Any]]:
    """chunk id -> metadata of every chunk in the catalog."""
    with kb.catalog.engine.connect() as connection:
        rows = connection.execute(chunks_table.select()).mappings().all()
    return {row["chunk_id"]: json.loads(row["metadata"]) for row in rows}


@pytest.fixture(scope="module")
def filter_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    """Eight JSONL records (one chunk each) and a three-section markdown file, all containing COMMON_WORD;
    built once per module and only read by the tests."""
    root = tmp_path_factory.mktemp("filters")
    kb = KnowledgeBase(isolated_settings(root), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    records = [{**record, "text": f"Record {record['_id']} about the {COMMON_WORD}."} for record in RECORDS]
    files = write_corpus(
        root / "corpus",
        {"records.jsonl": "\n".join(json.dumps(record) for record in records), "guide.md": MARKDOWN},
    )
    summary = ingest_paths(kb, list(files.values()))
    assert summary.count("indexed") == 2
    yield kb
    kb.close()


def test_corpus_metadata_is_as_written(filter_kb: KnowledgeBase) -> None:
    chunks = list(all_chunks(filter_kb).values())
    assert len(chunks) == len(RECORDS) + 3
    by_doc = {m["doc_id"]: m for m in chunks if m["doc_type"] != "md"}
    assert (by_doc["r4"]["doc_type"], by_doc["r4"]["page"], by_doc["r4"]["chapter"]) == ("report", 5, "Body")
    assert (by_doc["r6"]["page"], by_doc["r7"]["doc_type"], by_doc["r8"]["chapter"]) == (-1, "record", "")
    markdown = sorted((m["chapter"], m["section"], m["page"]) for m in chunks if m["doc_type"] == "md")
    assert markdown == [("Guide", "Guide", -1), ("Guide", "Keeping", -1), ("History", "History", -1)]


@pytest.mark.parametrize(
    ("raw", "predicate"), FILTER_CASES, ids=[json.dumps(case[0]) for case in FILTER_CASES]
)
def test_dense_and_keyword_select_the_same_chunks(
    filter_kb: KnowledgeBase, raw: dict[str, Any], predicate: Predicate
) -> None:
    chunks = all_chunks(filter_kb)
    expected = {chunk_id for chunk_id, metadata in chunks.items() if predicate(metadata)}
    assert expected, "each case should select something"
    node = parse_filter(raw)
    assert {chunk_id for chunk_id, metadata in chunks.items() if matches(node, metadata)} == expected

    searcher = Searcher(filter_kb)
    found = {}
    for mode in ("dense", "bm25", "hybrid"):
        hits = searcher.search(COMMON_WORD, k=500, mode=mode, filters=raw).hits  # type: ignore[arg-type]
        assert all(matches(node, hit.metadata) for hit in hits), mode
        found[mode] = {hit.chunk_id for hit in hits}
    assert found["dense"] == expected
    assert found["bm25"] == expected
    assert found["hybrid"] == expected


def test_json_text_filter_equals_dict_filter(filter_kb: KnowledgeBase) -> None:
    searcher = Searcher(filter_kb)
    raw = {"$or": [{"doc_type": "memo"}, {"page": 1}]}
    as_dict = searcher.search(COMMON_WORD, k=50, mode="bm25", filters=raw).hits
    as_text = searcher.search(COMMON_WORD, k=50, mode="bm25", filters=json.dumps(raw)).hits
    assert [hit.chunk_id for hit in as_dict] == [hit.chunk_id for hit in as_text]
    assert {hit.metadata["doc_id"] for hit in as_dict} == {"r1", "r5", "r6"}


def test_bad_filter_fails_before_searching(filter_kb: KnowledgeBase) -> None:
    with pytest.raises(FilterError, match="unknown field"):
        Searcher(filter_kb).search(COMMON_WORD, mode="dense", filters={"colour-name": "red"})
