"""The size bounds of metadata filters (retrieval.filters): depth, conditions in all
(RAG_FILTER_MAX_CONDITIONS) and $in / $nin values in all (MAX_FILTER_VALUES).

Two properties, over generated wide and deep filters: a filter over a bound is refused with a FilterError
naming it (counted here by a counter of this file, not the parser's), and every filter the parser accepts,
up to the setting's largest allowed value, executes in embedded Chroma and in the SQLite keyword index
(and, with the `servers` mark, in PostgreSQL) selecting exactly the chunks `matches` selects. Then the
interfaces: the REST API answers 422 naming the bound, the CLI one line and a non-zero exit.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from config.settings import Settings, SettingsError, load_settings
from graphs.rag import build_graph
from nodes.start_turn import InvalidQuestionError
from retrieval.filters import (
    MAX_CONDITIONS_SETTING,
    MAX_FILTER_DEPTH,
    MAX_FILTER_VALUES,
    FilterError,
    FilterNode,
    matches,
    parse_filter,
    to_sql,
)
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from service.cli import app as cli_app
from state.context import Context
from tests.conftest import isolated_settings, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel
from tests.test_api import QUESTION, Api
from tests.test_api import start_api as api_server  # noqa: F401 (the API fixture)
from tests.test_filters import COMMON_WORD, MARKDOWN, RECORDS, all_chunks

#: The setting's default and the largest value it allows (config/settings/search.py).
DEFAULT_LIMIT = int(Settings.model_fields["filter_max_conditions"].default)
LARGEST_LIMIT = 500
#: Width of the filter that crashed Chroma's bindings: ten thousand members of one $or.
CRASHING_WIDTH = 10_000

# --- a counter of our own --------------------------------------------------------------------------------


def conditions_of(raw: dict[str, Any]) -> int:
    """Conditions of a filter as documented: each $and / $or, each field condition, and one implicit $and
    for an object of several keys."""
    total = 1 if len(raw) > 1 else 0
    for key, value in raw.items():
        total += 1 + (sum(conditions_of(item) for item in value) if key in ("$and", "$or") else 0)
    return total


def values_of(raw: dict[str, Any]) -> int:
    """Values of all the $in / $nin lists of a filter."""
    total = 0
    for key, value in raw.items():
        if key in ("$and", "$or"):
            total += sum(values_of(item) for item in value)
        elif isinstance(value, dict):
            total += sum(len(operand) for operator, operand in value.items() if operator in ("$in", "$nin"))
    return total


def depth_of(raw: dict[str, Any]) -> int:
    """Levels of $and / $or nesting (0 for a filter of field conditions only)."""
    levels = [1 + depth_of(item) for key, value in raw.items() if key in ("$and", "$or") for item in value]
    return max(levels, default=0)


def test_the_counter_counts_as_documented() -> None:
    assert conditions_of({"page": 1}) == 1
    assert conditions_of({"page": 1, "doc_type": "pdf"}) == 3  # an implicit $and
    assert conditions_of({"$or": [{"page": 1}, {"page": {"$in": [1, 2]}}]}) == 3
    assert conditions_of({"$and": [{"$or": [{"page": 1}]}, {"level": "x", "page": 2}]}) == 6
    assert values_of({"$or": [{"page": {"$in": [1, 2]}}, {"doc_type": {"$nin": ["a"]}}]}) == 3
    assert depth_of({"$and": [{"$or": [{"page": 1}]}, {"page": 2}]}) == 2


# --- generated filters -----------------------------------------------------------------------------------

#: Values of the string fields: what the corpus holds and one value none of its chunks has.
STRING_VALUES = {
    "doc_type": ["note", "report", "memo", "record", "md", "pdf"],
    "chapter": ["Intro", "Body", "End", "Appendix", "", "Guide", "History", "Nowhere"],
    "level": ["summary", "detail", "other"],
}
INTEGER_FIELDS = ("page", "chunk_index")
PAGES = st.integers(min_value=-2, max_value=25)


def _string_leaf(field: str) -> st.SearchStrategy[dict[str, Any]]:
    value = st.sampled_from(STRING_VALUES[field])
    return st.one_of(
        value.map(lambda v: {field: v}),
        st.tuples(st.sampled_from(["$eq", "$ne"]), value).map(lambda t: {field: {t[0]: t[1]}}),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(value, min_size=1, max_size=60)).map(
            lambda t: {field: {t[0]: t[1]}}
        ),
    )


def _integer_leaf(field: str) -> st.SearchStrategy[dict[str, Any]]:
    operators = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]
    return st.one_of(
        PAGES.map(lambda v: {field: v}),
        st.tuples(st.sampled_from(operators), PAGES).map(lambda t: {field: {t[0]: t[1]}}),
        st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(PAGES, min_size=1, max_size=60)).map(
            lambda t: {field: {t[0]: t[1]}}
        ),
    )


LEAF = st.one_of(
    *[_string_leaf(field) for field in STRING_VALUES], *[_integer_leaf(field) for field in INTEGER_FIELDS]
)
#: An object of two fields (an implicit $and).
PAIR = st.tuples(_string_leaf("doc_type"), _integer_leaf("page")).map(lambda t: {**t[0], **t[1]})
LOGICAL = st.sampled_from(["$and", "$or"])


def _logical(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.tuples(LOGICAL, st.lists(children, min_size=1, max_size=4)).map(lambda t: {t[0]: t[1]})


#: Deep filters: nested $and / $or of leaves and pairs, within the depth bound (tested in test_filters).
DEEP = st.recursive(st.one_of(LEAF, PAIR), _logical, max_leaves=40).filter(
    lambda raw: depth_of(raw) <= MAX_FILTER_DEPTH
)


def _repeated(pattern: list[dict[str, Any]], width: int) -> list[dict[str, Any]]:
    return [pattern[index % len(pattern)] for index in range(width)]


#: Wide filters: a $and / $or of up to 700 members (a drawn pattern repeated), alone or inside another
#: operator with a deep filter beside it; widths on both sides of every bound (half of them in the
#: hundreds, which an even draw would seldom give).
WIDTHS = st.one_of(st.integers(1, 60), st.integers(250, 700))
WIDE_ONE = st.tuples(LOGICAL, st.lists(st.one_of(LEAF, PAIR), min_size=1, max_size=6), WIDTHS).map(
    lambda t: {t[0]: _repeated(t[1], t[2])}
)
WIDE = st.one_of(WIDE_ONE, st.tuples(LOGICAL, WIDE_ONE, DEEP).map(lambda t: {t[0]: [t[1], t[2]]}))
#: Filters of few conditions and many $in / $nin values: up to 60 lists of up to 60 pages each.
MANY_VALUES = st.tuples(
    LOGICAL, st.sampled_from(["$in", "$nin"]), st.integers(1, 60), st.integers(1, 60)
).map(lambda t: {t[0]: [{"page": {t[1]: [v % 28 - 2 for v in range(i, i + t[3])]}} for i in range(t[2])]})
FILTERS = st.one_of(DEEP, WIDE, MANY_VALUES)


def _fitted(drawn: tuple[str, list[dict[str, Any]], int]) -> dict[str, Any]:
    """A wide filter as wide as drawn, or as wide as the largest limit and the values bound allow."""
    operator, pattern, width = drawn
    per_member = max(conditions_of(member) for member in pattern)
    values = max(values_of(member) for member in pattern)
    fits = min(width, (LARGEST_LIMIT - 1) // per_member, MAX_FILTER_VALUES // max(values, 1))
    return {operator: _repeated(pattern, fits)}


#: Wide filters within the largest allowed limit (a drawn width too large for it is cut to fit).
FITTED_WIDE = st.tuples(LOGICAL, st.lists(st.one_of(LEAF, PAIR), min_size=1, max_size=6), WIDTHS).map(_fitted)


# --- property: every filter over a bound is refused, naming it ------------------------------------------


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=FILTERS, limit=st.integers(1, LARGEST_LIMIT), as_text=st.booleans())
def test_a_filter_is_refused_exactly_when_over_a_bound(
    raw: dict[str, Any], limit: int, as_text: bool
) -> None:
    too_many = conditions_of(raw) > limit
    too_many_values = values_of(raw) > MAX_FILTER_VALUES
    given_as = json.dumps(raw) if as_text else raw
    if not (too_many or too_many_values):
        assert parse_filter(given_as, max_conditions=limit) is not None
        return
    with pytest.raises(FilterError) as refused:
        parse_filter(given_as, max_conditions=limit)
    message = str(refused.value)
    names = [f"more than {limit} conditions ({MAX_CONDITIONS_SETTING}"] if too_many else []
    names += [f"more than {MAX_FILTER_VALUES} values in all (MAX_FILTER_VALUES)"] if too_many_values else []
    assert any(name in message for name in names), message


def test_a_huge_or_is_refused_without_parsing_its_members() -> None:
    """Members that would each be an error of their own (a reserved field) are never looked at: the
    $or's length alone is over the bound, so the refusal names the bound, at once."""
    raw = {"$or": [{"tenant": "someone-else"}] * 100_000}
    started = time.perf_counter()
    with pytest.raises(FilterError, match=f"more than {DEFAULT_LIMIT} conditions .{MAX_CONDITIONS_SETTING}"):
        parse_filter(raw)
    assert time.perf_counter() - started < 0.5


def test_the_bounds_are_inclusive() -> None:
    at_limit = {"$or": [{"page": index} for index in range(DEFAULT_LIMIT - 1)]}  # the $or + 99 members
    assert conditions_of(at_limit) == DEFAULT_LIMIT
    assert parse_filter(at_limit) is not None
    with pytest.raises(FilterError, match=MAX_CONDITIONS_SETTING):
        parse_filter({"$or": [*at_limit["$or"], {"page": -5}]})
    half = MAX_FILTER_VALUES // 2
    values = {
        "$or": [{"page": {"$in": list(range(half))}}, {"chapter": {"$nin": [str(i) for i in range(half)]}}]
    }
    assert parse_filter(values) is not None
    values["$or"].append({"level": {"$in": ["one more"]}})
    with pytest.raises(FilterError, match="MAX_FILTER_VALUES"):
        parse_filter(values)


def test_the_limit_is_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_LIMIT == 100
    wide = {"$and": [{"page": {"$ne": index}} for index in range(150)]}
    with pytest.raises(FilterError, match=f"more than {DEFAULT_LIMIT} conditions"):
        parse_filter(wide)
    monkeypatch.setenv("RAG_FILTER_MAX_CONDITIONS", "200")
    assert parse_filter(wide) is not None  # the environment's setting is the default limit
    assert parse_filter(wide, max_conditions=200) is not None
    with pytest.raises(FilterError, match="more than 10 conditions"):
        parse_filter(wide, max_conditions=10)
    for refused in (0, LARGEST_LIMIT + 1):
        with pytest.raises(SettingsError, match="filter_max_conditions|FILTER_MAX_CONDITIONS"):
            load_settings(filter_max_conditions=refused)


# --- property: every accepted filter executes, with the reference semantics ------------------------------


@pytest.fixture(scope="module")
def bounds_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    """The corpus of test_filters (eight records and a markdown guide, all holding COMMON_WORD), searched
    with the largest allowed filter limit and no similarity floor (every chunk is a dense candidate)."""
    root = tmp_path_factory.mktemp("filter-bounds")
    store_settings = isolated_settings(root, filter_max_conditions=LARGEST_LIMIT, similarity_threshold=-1.0)
    kb = KnowledgeBase(store_settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    records = [{**record, "text": f"Record {record['_id']} about the {COMMON_WORD}."} for record in RECORDS]
    files = write_corpus(
        root / "corpus",
        {"records.jsonl": "\n".join(json.dumps(record) for record in records), "guide.md": MARKDOWN},
    )
    ingest_paths(kb, list(files.values()))
    yield kb
    kb.close()


@pytest.fixture(scope="module")
def metadata_table(
    bounds_kb: KnowledgeBase,
) -> Iterator[tuple[sqlite3.Connection, dict[str, dict[str, Any]]]]:
    """An in-memory SQLite table of the corpus's chunk metadata (as JSON text), and that metadata."""
    chunks = all_chunks(bounds_kb)
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.execute("CREATE TABLE chunks (chunk_id TEXT, metadata TEXT)")
    connection.executemany(
        "INSERT INTO chunks VALUES (?, ?)", [(i, json.dumps(m)) for i, m in chunks.items()]
    )
    yield connection, chunks
    connection.close()


def selected_by_stores(kb: KnowledgeBase, node: FilterNode) -> dict[str, set[str]]:
    """Chunk ids each store selects for `node`: Chroma (dense) and the catalog's keyword index (bm25)."""
    searcher = Searcher(kb)
    return {
        mode: {hit.chunk_id for hit in searcher.search(COMMON_WORD, k=100, mode=mode, filters=node).hits}  # type: ignore[arg-type]
        for mode in ("dense", "bm25")
    }


@settings(
    max_examples=60,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(raw=st.one_of(DEEP, FITTED_WIDE, WIDE, MANY_VALUES))
def test_every_accepted_filter_executes_in_chroma_and_sqlite(
    bounds_kb: KnowledgeBase,
    metadata_table: tuple[sqlite3.Connection, dict[str, dict[str, Any]]],
    raw: dict[str, Any],
) -> None:
    try:
        node = parse_filter(raw, max_conditions=LARGEST_LIMIT)
    except FilterError:
        assert conditions_of(raw) > LARGEST_LIMIT or values_of(raw) > MAX_FILTER_VALUES
        return
    assert node is not None
    connection, chunks = metadata_table
    expected = {chunk_id for chunk_id, metadata in chunks.items() if matches(node, metadata)}
    sql, params = to_sql(node, dialect="sqlite")
    assert {
        row[0] for row in connection.execute(f"SELECT chunk_id FROM chunks WHERE {sql}", params)
    } == expected
    assert selected_by_stores(bounds_kb, node) == {"dense": expected, "bm25": expected}


def test_the_widest_and_deepest_accepted_filters_execute(
    bounds_kb: KnowledgeBase, metadata_table: tuple[sqlite3.Connection, dict[str, dict[str, Any]]]
) -> None:
    """At the largest allowed limit: one $or of 499 members, and eight levels each as wide as the bound
    lets them be, run in both stores (a $or of ~1,000 members is what Chroma and SQLite refuse)."""
    connection, chunks = metadata_table
    widest = {
        "$or": [{"page": {"$ne": index}} if index % 2 else {"doc_type": "memo"} for index in range(499)]
    }
    deep: dict[str, Any] = {"$or": [{"page": {"$gte": index}} for index in range(40)]}
    for level in range(MAX_FILTER_DEPTH - 1):
        deep = {("$and", "$or")[level % 2]: [deep, *[{"chapter": {"$ne": f"x{i}"}} for i in range(40)]]}
    for raw in (widest, deep):
        assert conditions_of(raw) <= LARGEST_LIMIT and depth_of(raw) <= MAX_FILTER_DEPTH
        node = parse_filter(raw, max_conditions=LARGEST_LIMIT)
        assert node is not None
        expected = {chunk_id for chunk_id, metadata in chunks.items() if matches(node, metadata)}
        assert expected  # the filters select something, so an empty answer would show
        sql, params = to_sql(node, dialect="sqlite")
        assert {
            row[0] for row in connection.execute(f"SELECT chunk_id FROM chunks WHERE {sql}", params)
        } == expected
        assert selected_by_stores(bounds_kb, node) == {"dense": expected, "bm25": expected}


def test_a_searcher_applies_its_own_settings_limit(bounds_kb: KnowledgeBase) -> None:
    lowered = Searcher(bounds_kb)
    lowered.settings = bounds_kb.settings.model_copy(update={"filter_max_conditions": 3})
    with pytest.raises(FilterError, match=f"more than 3 conditions .{MAX_CONDITIONS_SETTING}"):
        lowered.search(COMMON_WORD, filters={"$or": [{"page": 1}, {"page": 2}, {"page": 3}]})


@pytest.mark.servers
def test_accepted_wide_filters_execute_in_postgres(pg_url: str) -> None:
    """The PostgreSQL rendering of the widest accepted filters runs, selecting what `matches` selects."""
    import psycopg

    rows = {f"r{index}": {**record, "page": record.get("page", -1)} for index, record in enumerate(RECORDS)}
    widest = {
        "$or": [{"page": {"$ne": index}} if index % 2 else {"doc_type": "memo"} for index in range(499)]
    }
    ranges = {
        "$and": [{"page": {"$gte": -1 - index}} for index in range(300)]
        + [{"doc_type": {"$in": ["note"] * 900}}]
    }
    with psycopg.connect(
        pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    ) as connection:
        connection.execute("CREATE TEMP TABLE chunks (chunk_id TEXT, metadata TEXT)")
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO chunks VALUES (%s, %s)", [(i, json.dumps(m)) for i, m in rows.items()]
            )
        for raw in (widest, ranges):
            node = parse_filter(raw, max_conditions=LARGEST_LIMIT)
            assert node is not None
            expected = {chunk_id for chunk_id, metadata in rows.items() if matches(node, metadata)}
            assert expected
            sql, params = to_sql(node, dialect="postgresql")
            found = connection.execute(f"SELECT chunk_id FROM chunks WHERE {sql}", params).fetchall()
            assert {row[0] for row in found} == expected


# --- the interfaces ----------------------------------------------------------------------------------------

CRASHING_FILTER = {"$or": [{"doc_type": f"type-{index}"} for index in range(CRASHING_WIDTH)]}


def test_the_api_answers_422_naming_the_bound(request: pytest.FixtureRequest) -> None:
    start: Callable[..., Api] = request.getfixturevalue("api_server")
    api = start()
    for path, body in (
        ("/api/v1/search", {"query": QUESTION, "filters": CRASHING_FILTER}),
        ("/api/v1/search", {"query": QUESTION, "filters": CRASHING_FILTER, "mode": "bm25"}),
        ("/api/v1/rag/generate", {"query": QUESTION, "filters": CRASHING_FILTER}),
        ("/api/v1/rag/query", {"query": QUESTION, "filters": CRASHING_FILTER}),
    ):
        reply = api.post(path, body)
        assert reply.status_code == 422, (path, reply.text[:300])
        answer = reply.json()
        assert answer["field"] == "filters", answer
        assert f"more than {DEFAULT_LIMIT} conditions ({MAX_CONDITIONS_SETTING}" in answer["message"]
    batch = api.post(
        "/api/v1/rag/batch",
        {"requests": [{"query": QUESTION}, {"query": QUESTION, "filters": CRASHING_FILTER}]},
    )
    assert batch.status_code == 200, batch.text[:300]
    first, second = batch.json()["results"]
    assert first["ok"] and (second["ok"], second["status"], second["field"]) == (False, 422, "filters")
    assert MAX_CONDITIONS_SETTING in second["message"]
    assert api.post("/api/v1/search", {"query": QUESTION, "filters": {"doc_type": "md"}}).status_code == 200


def test_the_graph_refuses_the_input_before_any_work(install: Callable[..., Any]) -> None:
    """Python, Studio and the LangGraph server pass filters as graph input: start_turn applies the bound."""
    model = TaskChatModel(replies={"generate": "unused"})
    install(model)
    with pytest.raises(InvalidQuestionError, match=f"invalid filters: .*{MAX_CONDITIONS_SETTING}"):
        build_graph().invoke({"question": QUESTION, "filters": CRASHING_FILTER}, context=Context())
    assert model.calls == []


def test_the_cli_refuses_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    text = json.dumps(CRASHING_FILTER)
    for arguments in (["search", "tea", "--filter", text], ["ask", "What about tea?", "--filter", text]):
        result = runner.invoke(cli_app, arguments, env={"RAG_DATA_DIR": str(tmp_path / "rag")})
        assert result.exit_code == 2, (arguments[0], result.output[-500:])
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert MAX_CONDITIONS_SETTING in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output[-500:]
