"""The `rag ask` and `rag threads` commands on bad input: exit code 2, one clear line on stderr, no traceback.

Why no model is needed: every one of these errors must be caught before a model or the store is touched
(validation is the first thing a turn does). The `no_models` fixture makes loading one fail the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from service.cli import app

EXIT_BAD_INPUT = 2


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> CliRunner:
    """A runner whose `rag` keeps its data in tmp_path."""
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    return CliRunner()


@pytest.fixture(autouse=True)
def no_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening the knowledge base or building a chat model fails the test: bad input must stop earlier."""

    def forbidden(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a model or the store was loaded for input that is invalid")

    monkeypatch.setattr("nodes.resources.chat_model", forbidden)
    monkeypatch.setattr("retrieval.knowledge_base.KnowledgeBase.open", forbidden)


def assert_one_line_error(result: Result, *fragments: str) -> None:
    """Exit code 2, a single `error:` line on stderr naming the problem, no traceback anywhere."""
    assert result.exit_code == EXIT_BAD_INPUT, result.output + result.stderr
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.output + result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("question", ["", "   "])
def test_ask_an_empty_question(runner: CliRunner, question: str) -> None:
    result = runner.invoke(app, ["ask", question])
    assert_one_line_error(result, "empty question")


def test_ask_a_question_over_the_length_limit(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_MAX_QUERY_CHARS", "100")
    result = runner.invoke(app, ["ask", "why" * 40])
    assert_one_line_error(result, "question too long", "120 characters > 100", "RAG_MAX_QUERY_CHARS")


@pytest.mark.parametrize(
    ("filter_json", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ('{"$bogus": 1}', "$bogus"),
        ('{"page": {"$near": 3}}', "$near"),
        ("[1, 2]", "filter"),
    ],
)
def test_ask_with_a_bad_filter(runner: CliRunner, filter_json: str, fragment: str) -> None:
    result = runner.invoke(app, ["ask", "What is Jupiter?", "--filter", filter_json])
    assert_one_line_error(result, fragment)


def test_ask_with_out_of_range_options(runner: CliRunner) -> None:
    result = runner.invoke(app, ["ask", "What is Jupiter?", "--max-iterations", "0"])
    assert_one_line_error(result, "max_iterations=0", "out of range")
    result = runner.invoke(app, ["ask", "What is Jupiter?", "--mode", "verbose"])
    assert_one_line_error(result, "mode='verbose'", "simple")
    result = runner.invoke(app, ["ask", "What is Jupiter?", "--graph", "nope"])
    assert_one_line_error(result, "unknown graph 'nope'")


@pytest.mark.parametrize("command", [["threads", "list"], ["threads", "delete", "t1"], ["threads", "prune"]])
def test_threads_commands_without_a_checkpoint_file(
    runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    result = runner.invoke(app, command)
    assert_one_line_error(result, "no checkpoint file at", "no conversation yet")
    assert not (tmp_path / "rag" / "checkpoints.sqlite").exists()  # looking did not create it


@pytest.mark.parametrize("keep", ["-1", "-50"])
def test_threads_prune_rejects_a_negative_keep(runner: CliRunner, keep: str) -> None:
    result = runner.invoke(app, ["threads", "prune", "--keep", keep])
    assert_one_line_error(result, f"--keep must be >= 0, got {keep}")
