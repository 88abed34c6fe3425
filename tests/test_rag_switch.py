"""RAG_RETRIEVAL=false: every graph answers from the model alone, opens no store, says that no
documents were consulted and cites nothing; through graph.invoke, `rag ask` and the HTTP API (a real server).

Why the store is watched rather than taken away: a run that opened the knowledge base and caught the error
(memories and evidence compression degrade quietly) would look the same from its answer; counting the
openings sees it. The same watch on a run with retrieval on opens the store, so the check can fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.settings import load_settings
from graphs.runner import compiled_graph
from nodes.resources import Resources, use_resources
from prompts.answer import NO_DOCUMENTS_NOTE_EN, NO_DOCUMENTS_NOTE_ZH
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.api.app import create_app
from service.cli import app as cli_app
from state.context import Context
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app

QUESTION = "Which planet is the largest?"
MODEL_REPLY = "Jupiter is the largest planet of the Solar System."
CORPUS = {"jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System."}


@dataclass
class WatchedResources(Resources):
    """Process resources that count every opening of the knowledge base (search, memories, cache...)."""

    openings: int = 0

    def kb(self) -> KnowledgeBase:
        self.openings += 1
        return super().kb()


@pytest.fixture
def watched(tmp_path: Path, make_kb: Callable[..., KnowledgeBase]) -> Iterator[WatchedResources]:
    """A strong fake model (so a model analysis or grading would be called if the graph went there) over a
    one-file corpus, installed as the process resources."""
    model = TaskChatModel(replies={"chat": MODEL_REPLY, "generate": "Jupiter [1]."})
    settings = load_settings(data_dir=tmp_path / "rag")
    kb = make_kb(settings)
    ingest_paths(kb, list(write_corpus(tmp_path / "corpus", CORPUS).values()))
    resources = WatchedResources(
        settings,
        knowledge_base=kb,
        generator=model,
        grader=model,
        strengths={"generate": "strong", "grade": "strong"},
    )
    with use_resources(resources):
        yield resources


def assert_answered_without_documents(out: dict[str, object]) -> None:
    answer = str(out["answer"])
    assert answer.startswith(MODEL_REPLY) and answer.endswith(NO_DOCUMENTS_NOTE_EN), answer
    assert out["citations"] == [] and out["sources"] == [] and out.get("retrieved", []) == []
    assert out["not_found"] is False
    # The model's own sentences are supported by no passage, and say so; the engine's note is no claim.
    assert out["unsupported_sentences"] == [MODEL_REPLY]


@pytest.mark.parametrize("graph", ["rag", "baseline", "direct"])
def test_with_retrieval_off_every_graph_answers_from_the_model_without_a_store(
    watched: WatchedResources, graph: str
) -> None:
    out = compiled_graph(graph, None).invoke(  # type: ignore[arg-type]
        {"question": QUESTION}, context=Context(retrieval=False)
    )
    assert_answered_without_documents(out)
    assert watched.openings == 0
    model = watched.generator
    assert isinstance(model, TaskChatModel)
    assert model.tasks() == ["chat"]  # no analysis, no grading of passages, no answer from passages


def test_with_retrieval_on_the_same_run_opens_the_store_and_cites(watched: WatchedResources) -> None:
    out = compiled_graph("rag", None).invoke({"question": QUESTION}, context=Context())
    assert watched.openings > 0
    assert out["citations"] and NO_DOCUMENTS_NOTE_EN not in str(out["answer"])


def test_rag_retrieval_false_in_the_environment_reaches_the_module_graph(
    watched: WatchedResources, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphs.rag import graph

    monkeypatch.setenv("RAG_RETRIEVAL", "false")
    assert_answered_without_documents(graph.invoke({"question": QUESTION}))
    assert watched.openings == 0


def test_the_note_follows_the_question_language(watched: WatchedResources) -> None:
    out = compiled_graph("direct", None).invoke(
        {"question": "哪颗行星最大？"}, context=Context(retrieval=False)
    )
    assert str(out["answer"]).endswith(NO_DOCUMENTS_NOTE_ZH) and out["citations"] == []


def test_rag_ask_with_retrieval_off_answers_without_a_store(
    watched: WatchedResources, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(watched.settings.data_dir))
    monkeypatch.setenv("RAG_RETRIEVAL", "false")
    result = CliRunner().invoke(cli_app, ["ask", QUESTION, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["answer"].endswith(NO_DOCUMENTS_NOTE_EN) and out["citations"] == [] and out["sources"] == []
    assert watched.openings == 0


def test_the_api_answers_without_a_store_when_retrieval_is_off(
    watched: WatchedResources, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_RETRIEVAL", "false")  # the runs' context defaults and the app's settings
    watched.settings = load_settings(data_dir=watched.settings.data_dir)
    with serve_app(create_app(watched.settings)) as client:
        engine = client.post("/api/v1/rag/generate", json={"query": QUESTION})
        seed = client.post("/api/v1/rag/query", json={"query": QUESTION})
    assert engine.status_code == 200, engine.text
    assert seed.status_code == 200, seed.text
    for body in (engine.json(), seed.json()):
        assert body["answer"].endswith(NO_DOCUMENTS_NOTE_EN), body["answer"]
        assert body["citations"] == [] and body["sources"] == []
    assert watched.openings == 0  # the server's warm-up included
