"""One owner for the question's length limit: RAG_MAX_QUERY_CHARS, read by every interface.

Why: the API once accepted 5,000 characters (a limit of its own) while search refused more than 4,000, so a
4,529-character question passed the API and start_turn and failed inside the graph. This walks every reader
of the limit: a question one character over it gets the same clear refusal before any model call (422 naming
`query` / exit 2 with one line / the graph's InvalidQuestionError), and one of exactly the limit passes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from config.settings import Settings, load_settings
from graphs.rag import build_graph
from nodes.resources import Resources
from nodes.start_turn import InvalidQuestionError
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.api.app import create_app
from service.api.seed_schemas import SEED_MAX_QUERY_CHARS
from service.cli import app as cli_app
from state.context import Context
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app

#: The engine's limit as shipped (RAG_MAX_QUERY_CHARS's default).
LIMIT = int(Settings.model_fields["max_query_chars"].default)
REPLY = "Jupiter is the largest planet in the Solar System [1]."
CORPUS = {"jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System."}


def question(chars: int) -> str:
    """A question of exactly `chars` characters (no edge whitespace, so stripping keeps its length)."""
    text = ("Which planet is the largest one? " * (chars // 30 + 1))[: chars - 1].rstrip()
    return text + "?" * (chars - len(text))


@pytest.fixture
def api(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> Iterator[Callable[..., tuple[httpx.Client, TaskChatModel]]]:
    """`api(**settings)`: a uvicorn server over a one-document corpus with a fake model, and that model."""
    with ExitStack() as servers:

        def start(**overrides: Any) -> tuple[httpx.Client, TaskChatModel]:
            model = TaskChatModel(replies={"generate": REPLY})
            resources = install(model, strength="weak")
            resources.knowledge_base = make_kb(resources.settings)
            ingest_paths(resources.knowledge_base, list(write_corpus(tmp_path / "corpus", CORPUS).values()))
            app = create_app(resources.settings.model_copy(update=overrides))
            return servers.enter_context(serve_app(app)), model

        yield start


def assert_refused(reply: httpx.Response, limit: int, model: TaskChatModel) -> None:
    assert reply.status_code == 422, reply.text
    body = reply.json()
    assert body["field"] == "query", body
    assert body["message"] == f"query: at most {limit} characters (RAG_MAX_QUERY_CHARS)"
    assert model.calls == []  # refused before the run started


def test_generate_refuses_one_over_the_engine_limit_and_answers_at_it(api: Callable[..., Any]) -> None:
    client, model = api()
    assert_refused(client.post("/api/v1/rag/generate", json={"query": question(LIMIT + 1)}), LIMIT, model)
    reply = client.post("/api/v1/rag/generate", json={"query": question(LIMIT)})
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("path", ["/api/v1/rag/query", "/api/v1/search"])
def test_the_seed_routes_bound_never_exceeds_the_engine_limit(api: Callable[..., Any], path: str) -> None:
    assert SEED_MAX_QUERY_CHARS <= LIMIT  # the seed contract's own bound, within the engine's
    lowered = 100
    client, model = api(max_query_chars=lowered)
    assert_refused(client.post(path, json={"query": question(lowered + 1)}), lowered, model)
    reply = client.post(path, json={"query": question(lowered)})
    assert reply.status_code == 200, reply.text


def test_the_graph_refuses_one_over_the_limit_and_answers_at_it(install: Callable[..., Resources]) -> None:
    install(TaskChatModel(replies={"generate": REPLY}))
    graph = build_graph()
    with pytest.raises(InvalidQuestionError, match=f"{LIMIT + 1} characters > {LIMIT}"):
        graph.invoke({"question": question(LIMIT + 1)})
    out = graph.invoke({"question": question(LIMIT)}, context=Context(answerer="model"))
    assert out["answer"] and not out["error"]


def test_a_run_cannot_raise_the_limit_above_what_search_accepts() -> None:
    with pytest.raises(ValueError, match=f"at most RAG_MAX_QUERY_CHARS={LIMIT}"):
        Context(max_query_chars=LIMIT + 1)
    assert Context(max_query_chars=LIMIT - 1).max_query_chars == LIMIT - 1  # lowering is fine


@pytest.mark.parametrize("command", ["ask", "search"])
def test_the_cli_refuses_one_over_the_limit_with_exit_2(
    command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    monkeypatch.setenv("RAG_RETRIEVER", "mock")
    result = CliRunner().invoke(cli_app, [command, question(LIMIT + 1)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{LIMIT + 1} characters > {LIMIT}" in lines[0], result.stderr


def test_the_cli_searches_a_query_of_exactly_the_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    monkeypatch.setenv("RAG_RETRIEVER", "mock")
    assert load_settings().max_query_chars == LIMIT
    result = CliRunner().invoke(cli_app, ["search", question(LIMIT)])
    assert result.exit_code == 0, result.output + result.stderr
