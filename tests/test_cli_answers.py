"""What `rag ask`, `rag chat` and `rag ingest` tell the user: warnings on doubtful answers, one answer per
chat turn, and exit codes for failed files and a model endpoint that is down.

Why through the CLI: each of these is about what reaches the terminal and the exit status, which no node
test sees. The graph and checkpointer are real; models are fakes installed as the process resources, over a
knowledge base with the fake embeddings (the real OpenAI client is used only against a closed port).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from typer.testing import CliRunner

from config.settings import Settings, load_settings
from models import factory
from nodes.resources import Resources, use_resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.answer_warnings import answer_warnings
from service.cli import app
from tests.conftest import write_corpus
from tests.fakes import StreamingTaskModel, TaskChatModel
from tests.helpers.api_server import free_port as closed_port

CORPUS = {
    "paris.md": "# Paris\n\nParis is the capital of France. The Seine river flows through Paris.",
    "lyon.md": "# Lyon\n\nLyon is a city in France. The Rhone and the Saone rivers meet in Lyon.",
}
QUESTION = "What is the capital of France?"
#: The stored answer; the model's draft cites the Paris passage as "[Source n]" under whatever number the
#: prompt gave it, and `cite` rewrites (and renumbers) the marker, so the draft and the stored answer differ.
STORED = "Paris is the capital of France [1]."
_PARIS_HEADER = re.compile(r"\[(\d+)\] \(File: paris\.md")


def draft_citing_paris(messages: list[BaseMessage]) -> str:
    """The model's draft: the right fact, citing the Paris passage by the prompt's own number for it."""
    number = _PARIS_HEADER.search(str(messages[-1].content))
    assert number is not None, "the Paris passage should be in the answer prompt"
    return f"Paris is the capital of France [Source {number.group(1)}]."


UNSUPPORTED = "The Eiffel Tower was painted purple in 1850."


@pytest.fixture
def corpus_kb(
    settings: Settings, kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> KnowledgeBase:
    """The two-city corpus indexed; the CLI's data folder is the knowledge base's."""
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    ingest_paths(kb, list(write_corpus(tmp_path / "corpus", CORPUS).values()))
    return kb


@pytest.fixture
def serve(corpus_kb: KnowledgeBase) -> Iterator[Callable[[TaskChatModel], TaskChatModel]]:
    """Install a (weak: no LLM grading or analysis) fake model over the corpus for the CLI."""
    with use_resources(Resources(corpus_kb.settings, knowledge_base=corpus_kb)) as resources:

        def install(model: TaskChatModel) -> TaskChatModel:
            resources.generator = resources.grader = model
            resources.strengths = {"generate": "weak", "grade": "weak"}
            return model

        yield install


# --- warnings ------------------------------------------------------------------------------------------


def citation(marker: int, *, inferred: bool) -> dict[str, Any]:
    return {"marker": marker, "source": "/c/paris.md", "title": "Paris", "page": 0, "confidence": 0.9,
            "inferred": inferred}  # fmt: skip


def test_warnings_of_an_output_state() -> None:
    assert answer_warnings({"answer": STORED, "citations": [citation(1, inferred=False)]}) == []
    mixed = {"citations": [citation(1, inferred=True), citation(2, inferred=False)]}
    assert answer_warnings(mixed) == []  # the model cited one source itself: the (inferred) flag is enough
    doubtful = answer_warnings(
        {"unsupported_sentences": [UNSUPPORTED], "citations": [citation(1, inferred=True)]}
    )
    assert [item["kind"] for item in doubtful] == ["unsupported_sentences", "inferred_citations"]
    assert doubtful[0]["sentences"] == [UNSUPPORTED] and f'"{UNSUPPORTED}"' in doubtful[0]["message"]
    assert "1 sentence of this answer is not supported" in doubtful[0]["message"]
    many = answer_warnings({"unsupported_sentences": ["One two three.", "Four five six.", "Seven eight."]})
    assert "3 sentences" in many[0]["message"] and "and 1 more" in many[0]["message"]


@pytest.fixture
def doubtful_answer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`rag ask` gets an output state with an unsupported sentence and only inferred citations."""
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    state = {
        "question": QUESTION,
        "answer": f"Paris is the capital of France [1]. {UNSUPPORTED}",
        "citations": [citation(1, inferred=True)],
        "unsupported_sentences": [UNSUPPORTED],
        "strategy": "DIRECT",
    }
    monkeypatch.setattr(
        "graphs.runner.Session.ask", lambda self, question, **kw: {**state, "thread_id": kw.get("thread_id")}
    )


def test_ask_shows_a_warning_line_for_each_doubt(doubtful_answer: None) -> None:
    result = CliRunner().invoke(app, ["ask", QUESTION])
    assert result.exit_code == 0, result.output + result.stderr
    lines = result.stdout.splitlines()
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(warnings) == 2, result.stdout
    assert UNSUPPORTED in warnings[0] and "not supported by the sources" in warnings[0]
    assert "cited no source" in warnings[1]
    assert lines.index(warnings[0]) == 1  # right under the answer, before the sources


def test_ask_json_has_the_warnings(doubtful_answer: None) -> None:
    result = CliRunner().invoke(app, ["ask", QUESTION, "--json"])
    assert result.exit_code == 0, result.output + result.stderr
    warnings = json.loads(result.stdout)["warnings"]
    assert [item["kind"] for item in warnings] == ["unsupported_sentences", "inferred_citations"]
    assert warnings[0]["sentences"] == [UNSUPPORTED]


# --- rag chat: one answer per turn --------------------------------------------------------------------


def test_chat_prints_one_answer_per_turn_the_stored_one(serve: Callable[..., TaskChatModel]) -> None:
    model = serve(StreamingTaskModel(replies={"generate": draft_citing_paris}))
    turns = f"{QUESTION}\nAnd the capital of France again?\n\n"
    chat = CliRunner().invoke(app, ["chat", "--thread", "t1"], input=turns)
    assert chat.exit_code == 0, chat.output + chat.stderr
    assert model.tasks().count("generate") >= 2  # the model did write (and stream) both drafts
    assert "[Source" not in chat.stdout  # the streamed draft never reaches the output
    assert chat.stdout.count(STORED) == 2  # one answer per turn
    assert chat.stdout.count("rag> ") == 2

    shown = CliRunner().invoke(app, ["threads", "show", "t1"])
    stored = [line.removeprefix("ai> ") for line in shown.stdout.splitlines() if line.startswith("ai> ")]
    # What was printed is what the thread keeps: the short answer line, then the cited sentence.
    assert stored == ["Paris", "Paris"] and shown.stdout.count(STORED) == 2


def test_chat_shows_the_warnings_of_its_answer(serve: Callable[..., TaskChatModel]) -> None:
    serve(StreamingTaskModel(replies={"generate": f"Paris is the capital of France. {UNSUPPORTED}"}))
    chat = CliRunner().invoke(app, ["chat"], input=f"{QUESTION}\n\n")
    assert chat.exit_code == 0, chat.output + chat.stderr
    warnings = [line for line in chat.stdout.splitlines() if line.startswith("warning: ")]
    assert any("cited no source" in line for line in warnings), chat.stdout


# --- exit codes ---------------------------------------------------------------------------------------


def test_ingest_exits_1_and_lists_the_files_that_failed(
    settings: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, s: make_kb(s)))
    files = write_corpus(tmp_path / "docs", {**CORPUS, "broken.pdf": b"\x00 not a pdf \xff" * 64})
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "docs")])
    assert result.exit_code == 1, result.output + result.stderr
    assert "indexed 2" in result.stdout and "failed 1" in result.stdout
    assert str(files["broken.pdf"]) in result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: 1 of 3 files failed to ingest (listed above)"

    again = CliRunner().invoke(app, ["ingest", str(files["paris.md"]), str(files["lyon.md"]), "--json"])
    assert again.exit_code == 0, again.output + again.stderr  # nothing failed: success
    assert json.loads(again.stdout)["failed"] == 0


@pytest.mark.parametrize("strength", ["auto", "weak"])
def test_ask_with_the_model_endpoint_down_exits_1_naming_it(
    corpus_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, strength: str
) -> None:
    """`auto` fails in the self-test, `weak` (no self-test, no LLM analysis) in generate: both exit 1
    with one line, where an extractive answer and exit 0 came before."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    for name, value in {
        "RAG_LLM_PROVIDER": "openai",
        "RAG_LLM_BASE_URL": url,
        "RAG_LLM_MODEL": "served-model",
        "RAG_LLM_MAX_RETRIES": "0",
        "RAG_LLM_TIMEOUT_S": "2",
        "RAG_LLM_STRENGTH": strength,
    }.items():
        monkeypatch.setenv(name, value)
    factory.clear_model_cache()
    with use_resources(Resources(load_settings(), knowledge_base=corpus_kb)):
        result = CliRunner().invoke(app, ["ask", QUESTION])
    factory.clear_model_cache()
    assert result.exit_code == 1, result.output + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: model endpoint {url} is unavailable"), lines
    assert "RAG_LLM_BASE_URL" in lines[0] and "Traceback" not in result.output + result.stderr
    assert result.stdout == ""


def test_chat_with_the_model_endpoint_down_exits_1(
    corpus_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("RAG_LLM_PROVIDER", "openai")
    monkeypatch.setenv("RAG_LLM_BASE_URL", url)
    monkeypatch.setenv("RAG_LLM_MODEL", "served-model")
    monkeypatch.setenv("RAG_LLM_MAX_RETRIES", "0")
    factory.clear_model_cache()
    with use_resources(Resources(load_settings(), knowledge_base=corpus_kb)):
        result = CliRunner().invoke(app, ["chat"], input=f"{QUESTION}\n\n")
    factory.clear_model_cache()
    assert result.exit_code == 1, result.output + result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert url in result.stderr and "Traceback" not in result.output + result.stderr
