"""Follow-ups about technical documentation name what the previous turn was about (a concept, a parameter,
a function), not only the capitalised library name it was scoped to: the question's topic
(query/question_topic.py), "that parameter" and other concept phrases (query/referents.py), and
`python -m benchmarks followups-docs` (benchmarks/followups_docs.py).

The conversations here are written by hand for these tests; none is a line of
benchmarks/fixtures/followups_docs.jsonl except the two FastAPI follow-ups that were seen failing, whose
expected phrases are read off the conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchmarks.commands import app as benchmarks_app
from benchmarks.followups_docs import (
    DEFAULT_FIXTURE,
    load_doc_conversations,
    names_referent,
    run_followups_docs_eval,
)
from query.follow_ups import heuristic_standalone
from query.question_topic import question_topic

BACKGROUND_Q = "What are background tasks used for in FastAPI?"
BACKGROUND_A = (
    "Running operations after returning a response\n"
    "Background tasks run operations after returning a response, such as sending an email [1]."
)
LIFESPAN_Q = "What is FastAPI's lifespan parameter used for?"
LIFESPAN_A = (
    "Startup and shutdown logic\n"
    "The lifespan parameter defines code that runs before the app starts and after it stops [1]."
)


# --- the two follow-ups seen failing on the FastAPI documentation ----------------------------------------


def test_it_after_a_used_for_question_names_the_concept_not_the_library() -> None:
    follow_up = "Can it also be declared in a dependency?"
    standalone = heuristic_standalone(follow_up, [BACKGROUND_Q], [BACKGROUND_A])
    assert standalone.startswith(follow_up)
    assert "background tasks" in standalone.casefold()


def test_that_parameter_names_the_parameter_asked_about() -> None:
    follow_up = "What kind of object does that parameter take?"
    standalone = heuristic_standalone(follow_up, [LIFESPAN_Q], [LIFESPAN_A])
    assert standalone.startswith(follow_up)
    assert "lifespan" in standalone.casefold()


# --- the previous question's topic -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "phrase", "scope"),
    [
        ("What are background tasks used for in FastAPI?", "background tasks", "in FastAPI"),
        ("What is the lifespan parameter of FastAPI used for?", "lifespan parameter", "of FastAPI"),
        ("What does the Depends function do in FastAPI?", "Depends function", "in FastAPI"),
        ("What does model_dump return?", "model_dump", ""),
        ("How does the router work?", "router", ""),
        ("How do I configure the retry policy of Celery?", "retry policy", "of Celery"),
        ("What is the timeout setting for?", "timeout setting", ""),
    ],
)
def test_the_topic_is_the_noun_phrase_the_question_asks_about(question: str, phrase: str, scope: str) -> None:
    topic = question_topic(question)
    assert topic is not None and (topic.phrase, topic.scope) == (phrase, scope)


@pytest.mark.parametrize(
    "question",
    [
        "What is the capital of Valdoria?",  # asks for an entity: the answer is the referent
        "What is the fastest serializer?",
        "What is the difference between a path and a query parameter?",
        "Who founded the Harwick Observatory?",
        "Which class sends async requests?",
        "What does it do?",
    ],
)
def test_questions_that_ask_for_an_entity_or_name_nothing_have_no_topic(question: str) -> None:
    assert question_topic(question) is None


# --- resolution ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("follow_up", "question", "answer", "expected"),
    [
        (
            "How are they validated?",
            "What are query parameters in Starlette?",
            "Values after the question mark\nQuery parameters are the pairs after the ? in a URL [1].",
            "query parameters",
        ),
        (
            "Which values does that option accept?",
            "What does the verbosity option of the deploy command control?",
            "How much is logged\nThe verbosity option sets how much the deploy command logs [1].",
            "verbosity option",
        ),
        (
            "Does this function also accept a path?",
            "Which function reads the settings file?",
            "load_settings\nload_settings reads the settings file from the working directory [1].",
            "load_settings",
        ),
        # a name answered to a "which X" question still wins for "it"
        (
            "Should I close it when I'm done?",
            "Which class sends async requests?",
            "AsyncClient\nThe AsyncClient class sends requests with async and await [1].",
            "AsyncClient",
        ),
    ],
)
def test_follow_ups_name_what_the_previous_turn_was_about(
    follow_up: str, question: str, answer: str, expected: str
) -> None:
    standalone = heuristic_standalone(follow_up, [question], [answer])
    assert standalone.startswith(follow_up) and expected in standalone


def test_a_relative_that_is_not_a_reference() -> None:
    question = "Is there a setting that controls retries?"
    assert heuristic_standalone(question, [LIFESPAN_Q], [LIFESPAN_A]) == question


def test_a_question_asking_for_an_entity_lends_no_topic() -> None:
    """After "What is the capital of Valdoria?" - "Rennick", "its" points at an entity of that turn, never at
    the phrase "capital" (the question asked for the capital; it was not about it)."""
    follow_up = "What is its population?"
    standalone = heuristic_standalone(
        follow_up, ["What is the capital of Valdoria?"], ["Rennick\nRennick is the capital [1]."]
    )
    added = standalone.removeprefix(follow_up)
    assert added.strip() and "capital" not in added


# --- the documentation benchmark -------------------------------------------------------------------------


def test_names_referent_matches_whole_words_and_plurals() -> None:
    assert names_referent("Can it run? (background tasks in FastAPI)", ["background task"])
    assert names_referent("(the lifespan parameter)", ["lifespan"])
    assert not names_referent("a client of the cli", ["CLI interface"])
    assert not names_referent("the default_factory field", ["default"])


def record(cid: str, split: str, follow_up: str, referents: list[str]) -> dict[str, Any]:
    return {
        "id": cid,
        "split": split,
        "source": "starlette",
        "turn1": {
            "question": "What are query parameters in Starlette?",
            "answer": "Values after the question mark\nQuery parameters are pairs after the ? in a URL [1].",
        },
        "turn2": {"question": follow_up, "referents": referents},
    }


def write_fixture(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in records), encoding="utf-8")
    return path


def test_the_eval_reports_each_half(tmp_path: Path) -> None:
    path = write_fixture(
        tmp_path / "docs.jsonl",
        [
            record("a", "dev", "How are they validated?", ["query parameter"]),
            record("b", "test", "Can they repeat?", ["query parameter"]),
            record("c", "test", "Can they repeat?", ["path parameter"]),  # a referent the rewrite misses
        ],
    )
    report = run_followups_docs_eval(load_doc_conversations(path))
    assert report["halves"]["dev"]["n"] == 1 and report["halves"]["dev"]["named"] == 1.0
    assert report["halves"]["test"]["n"] == 2 and report["halves"]["test"]["named"] == 0.5
    assert [case["id"] for case in report["dev_cases"]] == ["a"]  # the test half only as aggregates


def test_a_follow_up_that_already_names_its_referent_is_rejected(tmp_path: Path) -> None:
    path = write_fixture(
        tmp_path / "bad.jsonl", [record("a", "dev", "Are query parameters typed?", ["query parameter"])]
    )
    with pytest.raises(ValueError, match=r"bad.jsonl:1: .*already names"):
        load_doc_conversations(path)


def test_the_fixture_has_two_halves_over_different_libraries() -> None:
    conversations = load_doc_conversations(DEFAULT_FIXTURE)
    halves = {half: [c for c in conversations if c.split == half] for half in ("dev", "test")}
    assert len(conversations) >= 25 and all(len(members) >= 12 for members in halves.values())
    assert not {c.source for c in halves["dev"]} & {c.source for c in halves["test"]}


def test_the_command_writes_both_reports(tmp_path: Path) -> None:
    fixture = write_fixture(
        tmp_path / "docs.jsonl", [record("a", "dev", "How are they validated?", ["query parameter"])]
    )
    before = tmp_path / "before.json"
    before.write_text(json.dumps({"halves": {"dev": {"n": 1, "named": 0.0}}, "command": "earlier"}))
    out = tmp_path / "after.json"
    arguments = ["followups-docs", "--fixture", str(fixture), "--before", str(before), "--json", str(out)]
    result = CliRunner().invoke(benchmarks_app, arguments)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["halves"]["dev"]["named"] == 1.0 and report["before"]["halves"]["dev"]["named"] == 0.0
    assert report["machine"]
    missing = CliRunner().invoke(
        benchmarks_app, ["followups-docs", "--before", str(tmp_path / "nowhere.json")]
    )
    assert missing.exit_code != 0 and "no earlier report" in missing.output
