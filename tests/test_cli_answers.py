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
from service.answer_judgement import judgement, judgement_line
from service.answer_warnings import answer_warnings
from service.cli import app
from tests.conftest import write_corpus
from tests.fakes import StreamingTaskModel, TaskChatModel
from tests.helpers import model_caches
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


PASSAGE = {"title": "Paris", "text": "Paris is the capital of France. The Seine river flows through Paris."}
#: A sentence no passage supports whose wording is off but whose facts (Paris, France) the sources hold.
REWORDED = "Paris happens to be France's administrative seat."


def test_warnings_of_an_output_state() -> None:
    assert answer_warnings({"answer": STORED, "citations": [citation(1, inferred=False)]}) == []
    # Citations matched by shared words are no reason to warn: the (inferred) flag on the source says it.
    assert answer_warnings({"answer": STORED, "citations": [citation(1, inferred=True)]}) == []
    doubtful = answer_warnings(
        {"unsupported_sentences": [UNSUPPORTED, REWORDED], "sources": [PASSAGE], "band": "confident"}
    )
    assert [item["kind"] for item in doubtful] == ["unsupported_facts"]
    # Only the sentence stating facts no source holds; the reworded one names nothing missing.
    assert doubtful[0]["sentences"] == [UNSUPPORTED] and doubtful[0]["facts"] == ["Eiffel Tower", "1850"]
    assert doubtful[0]["message"] == (
        f'1 sentence of this answer states what no source says (Eiffel Tower, 1850): "{UNSUPPORTED}"'
    )
    assert answer_warnings({"unsupported_sentences": [REWORDED], "sources": [PASSAGE]}) == []
    many = answer_warnings(
        {"unsupported_sentences": ["Rome has 7 hills.", "Oslo has 9 parks.", "Bern has 3 lakes."]}
    )
    assert "3 sentences" in many[0]["message"] and "and 1 more" in many[0]["message"]


@pytest.mark.parametrize(
    "judged",
    [
        {"band": "tentative", "confidence": 0.41},
        {"band": "not_found", "not_found": True, "not_found_reason": "no passage mentions Eiffel Tower"},
    ],
)
def test_a_tentative_or_not_found_answer_gets_no_warning(judged: dict[str, Any]) -> None:
    assert answer_warnings({"unsupported_sentences": [UNSUPPORTED], "sources": [PASSAGE], **judged}) == []


@pytest.mark.parametrize(
    ("judged", "line"),
    [
        ({"band": "confident", "confidence": 0.8612}, "confident, 0.86"),
        ({"band": "tentative", "confidence": 0.41}, "not sure, 0.41"),
        (
            {"band": "not_found", "not_found": True, "not_found_reason": "no passage mentions Atlantis"},
            "not found: no passage mentions Atlantis",
        ),
        # a state from before the judgement: the not-found flag decides, no number is invented
        (
            {"not_found": True, "not_found_reason": "nothing was retrieved"},
            "not found: nothing was retrieved",
        ),
        ({}, "confident"),
        # an unset band (its default is not_found) of an answer that is not "not found" is no decline
        ({"band": "not_found", "confidence": 0.7}, "confident, 0.70"),
    ],
)
def test_the_judgement_in_words(judged: dict[str, Any], line: str) -> None:
    assert judgement_line({"answer": STORED, **judged}) == line


def test_the_judgement_fields() -> None:
    assert judgement({"band": "tentative", "confidence": 0.41237}) == {
        "confidence": 0.412,
        "band": "tentative",
        "not_found_reason": "",
    }
    declined = {"band": "not_found", "not_found": True, "confidence": 0.08,
                "answer_record": {"decline_reason": "the passages never name a year"}}  # fmt: skip
    assert judgement(declined) == {
        "confidence": 0.08,
        "band": "not_found",
        "not_found_reason": "the passages never name a year",
    }


#: Output states `rag ask` gets, per band, and the judgement line it must print under the answer.
JUDGED_STATES = {
    "confident": (
        {
            "answer": f"Paris\n\nParis is the capital of France [1]. {UNSUPPORTED}",
            "band": "confident",
            "confidence": 0.86,
            "short_answer": "Paris",
            "citations": [citation(1, inferred=True)],
            "sources": [PASSAGE],
            "unsupported_sentences": [UNSUPPORTED],
        },  # fmt: skip
        "confident, 0.86",
    ),
    "tentative": (
        {
            "answer": "Not sure — the closest the documents come is: The Seine river flows through Paris [1]",
            "band": "tentative",
            "confidence": 0.41,
            "citations": [citation(1, inferred=False)],
            "sources": [PASSAGE],
            "unsupported_sentences": [UNSUPPORTED],
        },  # fmt: skip
        "not sure, 0.41",
    ),
    "not_found": (
        {
            "answer": "I could not find this in the documents.",
            "band": "not_found",
            "not_found": True,
            "confidence": 0.05,
            "not_found_reason": "no passage mentions the Eiffel Tower",
            "unsupported_sentences": [UNSUPPORTED],
        },  # fmt: skip
        "not found: no passage mentions the Eiffel Tower",
    ),
}


@pytest.fixture(params=sorted(JUDGED_STATES))
def judged_answer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """`rag ask` gets the output state of one band; the line it must print under the answer is returned."""
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    state, line = JUDGED_STATES[request.param]
    full = {"question": QUESTION, "strategy": "DIRECT", **state}
    monkeypatch.setattr(
        "graphs.runner.Session.ask", lambda self, question, **kw: {**full, "thread_id": kw.get("thread_id")}
    )
    return line


def test_ask_says_the_judgement_under_the_answer(judged_answer: str) -> None:
    result = CliRunner().invoke(app, ["ask", QUESTION, "--local"])
    assert result.exit_code == 0, result.output + result.stderr
    lines = result.stdout.splitlines()
    assert judged_answer in lines, result.stdout
    below = lines[lines.index(judged_answer) + 1 :]
    warnings = [line for line in lines if line.startswith("warning: ")]
    if judged_answer.startswith("confident"):  # the unsupported fact is warned of, right under the judgement
        assert len(warnings) == 1 and UNSUPPORTED in warnings[0] and below[0] == warnings[0]
        assert "Eiffel Tower, 1850" in warnings[0]
    else:  # the band already says how far to trust it
        assert warnings == []
    assert not any("cited no source" in line for line in lines)
    answer_lines = lines[: lines.index(judged_answer)]
    assert answer_lines and all(not line.startswith("warning: ") for line in answer_lines)


def test_ask_json_has_the_judgement_and_the_warnings(judged_answer: str) -> None:
    result = CliRunner().invoke(app, ["ask", QUESTION, "--json", "--local"])
    assert result.exit_code == 0, result.output + result.stderr
    body = json.loads(result.stdout)
    band = next(name for name, (_state, line) in JUDGED_STATES.items() if line == judged_answer)
    state = JUDGED_STATES[band][0]
    assert body["band"] == band and body["confidence"] == state["confidence"]
    assert body["not_found_reason"] == state.get("not_found_reason", "")
    if band == "confident":
        assert [item["kind"] for item in body["warnings"]] == ["unsupported_facts"]
        assert body["warnings"][0]["sentences"] == [UNSUPPORTED]
    else:
        assert body["warnings"] == []


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


#: The judgement line `rag ask` and `rag chat` print under an answer.
JUDGEMENT_LINE = re.compile(r"^(confident(, \d\.\d\d)?|not sure, \d\.\d\d|not found(: .+)?)$")


def test_chat_shows_the_judgement_and_the_warnings_of_its_answer(serve: Callable[..., TaskChatModel]) -> None:
    serve(StreamingTaskModel(replies={"generate": f"Paris is the capital of France. {UNSUPPORTED}"}))
    chat = CliRunner().invoke(app, ["chat"], input=f"{QUESTION}\n\n")
    assert chat.exit_code == 0, chat.output + chat.stderr
    lines = chat.stdout.splitlines()
    (judged,) = [line for line in lines if JUDGEMENT_LINE.match(line)]
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert not any("cited no source" in line for line in warnings), chat.stdout
    if judged.startswith("confident"):  # shown as right: the invented year must be pointed out
        assert len(warnings) == 1 and "1850" in warnings[0], chat.stdout
    else:  # "not sure" or "not found" already says it
        assert warnings == [], chat.stdout


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
        "RAG_LLM_TIMEOUT_S": "2",
        "RAG_LLM_STRENGTH": strength,
    }.items():
        monkeypatch.setenv(name, value)
    model_caches.clear_model_cache()
    with use_resources(Resources(load_settings(), knowledge_base=corpus_kb)):
        result = CliRunner().invoke(app, ["ask", QUESTION])
    model_caches.clear_model_cache()
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
    monkeypatch.setattr(factory, "LLM_MAX_RETRIES", 0)
    model_caches.clear_model_cache()
    with use_resources(Resources(load_settings(), knowledge_base=corpus_kb)):
        result = CliRunner().invoke(app, ["chat"], input=f"{QUESTION}\n\n")
    model_caches.clear_model_cache()
    assert result.exit_code == 1, result.output + result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert url in result.stderr and "Traceback" not in result.output + result.stderr
