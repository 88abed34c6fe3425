"""`rag ask` and `rag search` hand the question to a running `rag serve` of the same data directory.

The server is the real app under uvicorn on a loopback port (the configured RAG_API_PORT); the CLI runs in
the test's process with the same fake models and knowledge base installed, so the printed output of the
two paths can be compared line for line. Which path answered is told by the in-process path being replaced
with one that fails, or by the server's request count. /health's fingerprint names the data directory
without showing its path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from typer.testing import CliRunner, Result

from config.settings import Settings, load_settings
from retrieval.knowledge_base import KnowledgeBase
from service import handoff
from service.answer_json import output_json
from service.answer_judgement import judgement_line
from service.api.app import create_app
from service.cli import app, conversation
from service.cli import server_handoff as cli_handoff
from service.handoff import data_dir_fingerprint
from tests.helpers.api_server import free_port, serve_app
from tests.helpers.rag_world import ANSWER, QUESTION, World, world


@pytest.fixture
def answered(make_settings: Callable[..., Settings], kb: KnowledgeBase, tmp_path: Path) -> Iterator[World]:
    with world(make_settings(), kb, tmp_path) as built:
        yield built


def cli_env(monkeypatch: pytest.MonkeyPatch, data_dir: Path, port: int) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(data_dir))
    monkeypatch.setenv("RAG_API_PORT", str(port))


def serving(settings: Settings, port: int, **overrides: object) -> object:
    served = settings.model_copy(update={"api_port": port, **overrides})
    return serve_app(create_app(served), port=port)


def run(*args: str) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def without_ids(output: str) -> str:
    """The printed text with the thread and answer ids (new per run) blanked, whitespace normalised (the
    console wraps the last line where it likes)."""
    return re.sub(r"\b(thread|answer) [0-9A-Za-z_-]+", r"\1 ID", " ".join(output.split()))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests the CLI sent to a server."""
    sent: list[str] = []
    post = cli_handoff._post

    def counting(base: str, path: str, body: dict[str, object], settings: Settings) -> dict[str, object]:
        sent.append(path)
        return post(base, path, body, settings)

    monkeypatch.setattr(cli_handoff, "_post", counting)
    return sent


def test_ask_goes_to_the_server_of_the_same_data_directory_and_prints_the_same(
    answered: World, monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    port = free_port()
    cli_env(monkeypatch, answered.settings.data_dir, port)
    with serving(answered.settings, port):
        here = run("ask", QUESTION, "--local")
        assert here.exit_code == 0, here.output
        assert counted == []

        def not_here(*_args: object, **_kwargs: object) -> None:
            raise AssertionError("answered in-process although a server of this data directory runs")

        monkeypatch.setattr(conversation, "_ask_here", not_here)
        there = run("ask", QUESTION)
    assert there.exit_code == 0, there.output
    assert counted == ["/api/v1/rag/generate"]
    assert ANSWER.splitlines()[0] in there.stdout
    assert without_ids(there.stdout) == without_ids(here.stdout)


def test_ask_json_through_the_server_has_the_answer_and_its_thread(
    answered: World, monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    port = free_port()
    cli_env(monkeypatch, answered.settings.data_dir, port)
    with serving(answered.settings, port):
        first = run("ask", QUESTION, "--json")
        assert first.exit_code == 0, first.output
        body = json.loads(first.stdout)
        follow_up = run("ask", "And its moons?", "--thread", body["thread_id"], "--json")
    assert follow_up.exit_code == 0, follow_up.output
    assert counted == ["/api/v1/rag/generate"] * 2
    assert body["answer"] == ANSWER and body["question"] == QUESTION and body["citations"]
    assert json.loads(follow_up.stdout)["thread_id"] == body["thread_id"]
    # the judgement crosses the hand-off: an answered question is not "not found"
    assert body["band"] in ("confident", "tentative") and body["not_found_reason"] == ""
    assert body["confidence"] is None or 0.0 <= body["confidence"] <= 1.0


@pytest.mark.parametrize(
    ("response", "line"),
    [
        ({"answer": "Not sure — ...", "band": "tentative", "confidence": 0.41}, "not sure, 0.41"),
        (
            {
                "answer": "Not found.",
                "not_found": True,
                "band": "not_found",
                "confidence": 0.02,
                "not_found_reason": "no passage mentions Atlantis",
            },  # fmt: skip
            "not found: no passage mentions Atlantis",
        ),
    ],
)
def test_the_servers_judgement_is_printed_as_a_local_one(response: dict[str, object], line: str) -> None:
    result = cli_handoff.answer_result(QUESTION, response)
    assert judgement_line(result) == line
    assert output_json(result)["band"] == response["band"]
    assert output_json(result)["confidence"] == response["confidence"]
    assert output_json(result)["not_found_reason"] == response.get("not_found_reason", "")


def test_a_server_of_another_data_directory_is_not_used(
    answered: World, monkeypatch: pytest.MonkeyPatch, counted: list[str], tmp_path: Path
) -> None:
    port = free_port()
    cli_env(monkeypatch, answered.settings.data_dir, port)
    other = answered.settings.model_copy(update={"data_dir": tmp_path / "other"})
    with serving(other, port) as client:
        assert client.get("/health").json()["data_dir"] != data_dir_fingerprint(answered.settings)
        result = run("ask", QUESTION)
    assert result.exit_code == 0, result.output
    assert counted == []  # answered here
    assert ANSWER.splitlines()[0] in result.stdout


def test_no_server_means_answering_here(
    answered: World, monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    cli_env(monkeypatch, answered.settings.data_dir, free_port())
    result = run("ask", QUESTION)
    assert result.exit_code == 0, result.output
    assert counted == [] and ANSWER.splitlines()[0] in result.stdout


def test_the_servers_keys_rule_a_handed_off_question(
    answered: World, monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    port = free_port()
    cli_env(monkeypatch, answered.settings.data_dir, port)
    with serving(answered.settings, port, api_keys="sesame:default"):
        refused = run("ask", QUESTION)
        monkeypatch.setenv("RAG_API_KEY", "sesame")
        allowed = run("ask", QUESTION)
    assert refused.exit_code == 2
    assert "error:" in refused.output and "HTTP 401" in refused.output
    assert allowed.exit_code == 0, allowed.output
    assert ANSWER.splitlines()[0] in allowed.stdout
    assert counted == ["/api/v1/rag/generate"] * 2


def test_search_goes_to_the_server_and_prints_the_same(
    answered: World, monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    port = free_port()
    cli_env(monkeypatch, answered.settings.data_dir, port)
    # `rag search` opens its own knowledge base: the world's, with the fake embeddings
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda _cls, _settings=None: answered.kb))
    with serving(answered.settings, port):
        here = run("search", "largest planet", "--local")
        there = run("search", "largest planet")
        several = run("search", "largest planet", "--collection", "a", "--collection", "b")
    assert here.exit_code == 0, here.output
    assert there.exit_code == 0, there.output
    assert several.exit_code == 0, several.output
    assert counted == ["/api/v1/search"]  # several collections: searched here
    assert "jupiter.md" in there.stdout
    assert there.stdout == here.stdout


def test_health_names_the_data_directory_by_a_fingerprint_only(
    answered: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = answered.settings
    port = free_port()
    with serving(settings, port) as client:
        health = client.get("/health").json()
    assert health["status"] == "ok"
    assert health["data_dir"] == data_dir_fingerprint(settings)
    assert str(settings.data_dir) not in str(health) and settings.data_dir.name not in health["data_dir"]
    # the same folder reached by another spelling is the same; another folder or a replaced catalog is not
    monkeypatch.chdir(settings.data_dir.parent)
    relative = load_settings(data_dir=Path(settings.data_dir.name))
    assert data_dir_fingerprint(relative) == health["data_dir"]
    assert data_dir_fingerprint(load_settings(data_dir=tmp_path / "elsewhere")) != health["data_dir"]
    copy = settings.catalog_path.with_name("catalog-copy.sqlite")
    shutil.copyfile(settings.catalog_path, copy)
    os.replace(copy, settings.catalog_path)
    assert data_dir_fingerprint(settings) != health["data_dir"]


def test_the_probe_ignores_what_is_not_a_rag_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "rag", api_port=free_port())
    assert handoff.same_data_server(settings) is None  # nothing listens

    other = FastAPI()
    other.get("/health")(lambda: {"status": "ok"})
    port = free_port()
    with serve_app(other, port=port):
        assert handoff.same_data_server(settings.model_copy(update={"api_port": port})) is None
