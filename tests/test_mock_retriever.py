"""The mock retriever (RAG_RETRIEVER=mock, the knowledge-base design's development retriever): canned,
deterministic passages that run the whole graph, `rag search` and the API's search without a store, scoped
like the store: tenant, filters (the knowledge-base design's `session_id`), collections, and the graph's
conversation scoping (a passage of conversation A never reaches a question of conversation B).

Why counted store openings: the point of the mock is that nothing opens the knowledge base; a run that
opened it and quietly degraded would look the same from its answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from typer.testing import CliRunner

from config.settings import Settings, load_settings
from graphs.runner import compiled_graph
from nodes.resources import Resources, use_resources
from persistence.errors import StoreUnavailableError
from retrieval.filters import FilterError
from retrieval.knowledge_base import KnowledgeBase
from retrieval.mock_retriever import MockPassagesError, MockSearcher
from retrieval.search import QueryError
from service.api.app import create_app
from service.cli import app as cli_app
from state.context import Context
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app

PASSAGES = [
    {
        "text": "Session A's secret code word is aubergine.",
        "source": "/notes/a.md",
        "conversation_id": "conv-a",
        "metadata": {"session_id": "A"},
    },
    {
        "text": "Session B's secret code word is broccoli.",
        "source": "/notes/b.md",
        "conversation_id": "conv-b",
        "metadata": {"session_id": "B"},
    },
    {"text": "A secret code word is a vegetable each session chooses.", "source": "/notes/all.md"},
    {"text": "Acme's secret code word is artichoke.", "source": "/notes/acme.md", "tenant": "acme"},
]
QUESTION = "What is the secret code word?"


@dataclass
class WatchedResources(Resources):
    """Process resources that count every opening of the knowledge base."""

    openings: int = 0

    def kb(self) -> KnowledgeBase:
        self.openings += 1
        return super().kb()


@pytest.fixture
def passages_file(tmp_path: Path) -> Path:
    path = tmp_path / "passages.json"
    path.write_text(json.dumps(PASSAGES), encoding="utf-8")
    return path


def mock_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return load_settings(data_dir=tmp_path / "rag", retriever="mock", **overrides)


def texts(searcher: MockSearcher, query: str = QUESTION, **kwargs: Any) -> list[str]:
    return [hit.text for hit in searcher.search(query, **kwargs).hits]


# --- the searcher ----------------------------------------------------------------------------------------


def test_the_built_in_passages_are_searchable_and_deterministic(tmp_path: Path) -> None:
    searcher = MockSearcher(mock_settings(tmp_path))
    first = searcher.search("Which is the largest planet?", k=3)
    assert first.hits[0].metadata["source"] == "/mock/astronomy/jupiter.md"
    assert first.hits[0].metadata["section"] == "Size" and 0 < first.hits[0].score <= 1
    again = MockSearcher(mock_settings(tmp_path)).search("Which is the largest planet?", k=3)
    assert [(hit.chunk_id, hit.score) for hit in again.hits] == [
        (hit.chunk_id, hit.score) for hit in first.hits
    ]


def test_a_query_sharing_no_word_still_gets_the_top_k_by_similarity(tmp_path: Path) -> None:
    searcher = MockSearcher(mock_settings(tmp_path))
    found = searcher.search("quantum chromodynamics lattice", k=4).hits
    assert len(found) == 4  # never nothing: the passages most like the query
    scores = [hit.score for hit in found]
    assert scores == sorted(scores, reverse=True)
    assert len(searcher.search("quantum chromodynamics lattice", k=50).hits) == 6  # every built-in one


def test_similarity_matches_inflections_and_chinese(tmp_path: Path) -> None:
    passages = tmp_path / "zh.json"
    texts_zh = ["火星的颜色是红色。", "木星是最大的行星。", "乌龙茶用九十度的水冲泡。"]
    passages.write_text(json.dumps([{"text": text} for text in texts_zh]), encoding="utf-8")
    chinese = MockSearcher(mock_settings(tmp_path, mock_passages=passages))
    assert texts(chinese, "哪颗行星最大", k=1) == [texts_zh[1]]
    assert texts(chinese, "茶怎么冲泡", k=1) == [texts_zh[2]]
    builtin = MockSearcher(mock_settings(tmp_path))
    # "brewing" is no word of the tea passage ("brewed"), which still comes first.
    assert builtin.search("brewing oolong", k=1).hits[0].metadata["title"] == "Tea"


def test_filters_tenant_and_collections_scope_the_mock_as_they_scope_the_store(
    tmp_path: Path, passages_file: Path
) -> None:
    searcher = MockSearcher(mock_settings(tmp_path, mock_passages=passages_file))
    assert texts(searcher, filters={"session_id": "B"}) == [PASSAGES[1]["text"]]
    assert texts(searcher, filters={"conversation_id": "conv-a"}) == [PASSAGES[0]["text"]]
    everyone = texts(searcher, k=10)
    assert PASSAGES[3]["text"] not in everyone and len(everyone) == 3  # acme's passage is acme's only
    assert texts(searcher, tenant="acme") == [PASSAGES[3]["text"]]
    assert texts(searcher, collections=["elsewhere"]) == []
    with pytest.raises(FilterError, match="tenant"):
        searcher.search(QUESTION, filters={"tenant": "acme"})
    with pytest.raises(QueryError, match="empty query"):
        searcher.search("  ")


def test_an_unknown_search_option_is_refused_not_dropped(tmp_path: Path) -> None:
    searcher = MockSearcher(mock_settings(tmp_path))
    with pytest.raises(TypeError, match="unknown options filter, top_k"):
        searcher.search(QUESTION, top_k=1, filter={"session_id": "B"})  # type: ignore[call-arg]


def test_a_passages_file_that_cannot_be_used_is_one_clear_store_error(tmp_path: Path) -> None:
    missing = MockSearcher(mock_settings(tmp_path, mock_passages=tmp_path / "nope.json"))
    with pytest.raises(MockPassagesError, match=r"nope\.json \(RAG_MOCK_PASSAGES\): cannot read it"):
        missing.search(QUESTION)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"text": "fine"}, {"source": "/x.md"}]), encoding="utf-8")
    with pytest.raises(MockPassagesError, match="passage 2 has no text"):
        MockSearcher(mock_settings(tmp_path, mock_passages=broken)).search(QUESTION)
    assert issubclass(MockPassagesError, StoreUnavailableError)  # exit 1 / 503 / an honest not-found run


# --- the whole graph without a store ---------------------------------------------------------------------


def cite_first_source(messages: list[BaseMessage]) -> str:
    """The model's answer: the first source's text, cited [1] (what the prompt gave it as source 1)."""
    body = str(messages[-1].content)
    first = body.split("[1] (File:", 1)[1].split("\n", 2)[1]
    return f"{first.rstrip('.')} [1]."


@pytest.fixture
def mock_graph(tmp_path: Path, passages_file: Path) -> Iterator[WatchedResources]:
    model = TaskChatModel(replies={"generate": cite_first_source})
    resources = WatchedResources(
        mock_settings(tmp_path, mock_passages=passages_file),
        generator=model,
        grader=model,
        strengths={"generate": "weak", "grade": "weak"},
    )
    with use_resources(resources):
        yield resources


def ask(question: str, **inputs: Any) -> dict[str, Any]:
    out: dict[str, Any] = compiled_graph("rag", None).invoke(
        {"question": question, **inputs}, context=Context()
    )
    return out


def test_the_graph_answers_from_the_mock_without_opening_a_store(mock_graph: WatchedResources) -> None:
    out = ask(QUESTION, conversation_id="conv-b")
    assert "broccoli" in out["answer"] and out["not_found"] is False
    assert [citation["source"] for citation in out["citations"]] == ["b.md"]  # public form: no path
    assert mock_graph.openings == 0


def test_a_passage_of_one_conversation_never_reaches_a_question_of_another(
    mock_graph: WatchedResources,
) -> None:
    for conversation, own, other in (
        ("conv-a", "aubergine", "broccoli"),
        ("conv-b", "broccoli", "aubergine"),
    ):
        out = ask(QUESTION, conversation_id=conversation)
        seen = " ".join([out["answer"], *(doc["text"] for doc in out["retrieved"])])
        assert own in seen and other not in seen, conversation
    stranger = ask(QUESTION, conversation_id="conv-c")  # a conversation with no passage of its own
    assert stranger["retrieved"] == [] and stranger["not_found"] is True
    assert mock_graph.openings == 0


def test_a_session_filter_scopes_the_graph_on_the_mock(mock_graph: WatchedResources) -> None:
    out = ask(QUESTION, filters={"session_id": "A"})
    assert [doc["source"] for doc in out["retrieved"]] == ["a.md"] and "aubergine" in out["answer"]


def test_rag_search_searches_the_mock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, passages_file: Path
) -> None:
    monkeypatch.setenv("RAG_RETRIEVER", "mock")
    monkeypatch.setenv("RAG_MOCK_PASSAGES", str(passages_file))
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    result = CliRunner().invoke(cli_app, ["search", QUESTION, "--filter", '{"session_id": "A"}', "--json"])
    assert result.exit_code == 0, result.output
    assert [hit["metadata"]["source"] for hit in json.loads(result.stdout)["hits"]] == ["a.md"]
    assert not (tmp_path / "rag").exists()  # no store was created
    monkeypatch.setenv("RAG_MOCK_PASSAGES", str(tmp_path / "missing.json"))
    failed = CliRunner().invoke(cli_app, ["search", QUESTION])
    assert failed.exit_code == 1 and "RAG_MOCK_PASSAGES" in failed.output


def test_the_api_search_and_answer_run_on_the_mock(mock_graph: WatchedResources) -> None:
    with serve_app(create_app(mock_graph.settings)) as client:
        found = client.post("/api/v1/search", json={"query": QUESTION, "filters": {"session_id": "B"}})
        # The engine's generate scopes retrieval to its conversation_id (the seed API's is the thread).
        answer = client.post("/api/v1/rag/generate", json={"query": QUESTION, "conversation_id": "conv-b"})
    assert found.status_code == 200, found.text
    assert [result["source"] for result in found.json()["results"]] == ["b.md"]
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "broccoli" in body["answer"] and "aubergine" not in json.dumps(body)
    assert mock_graph.openings == 0
