"""Follow-ups resolved from the previous turn's answer: the heuristic (English and Chinese), the contextualize
node with weak and strong (scripted) models, questions that point at nothing, and `python -m benchmarks
followups` on three tiny conversations.

Every name here is invented, and none comes from benchmarks/fixtures/followups.jsonl (the measured set) nor
from an evaluation data set; the expected names are read off the conversations by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from benchmarks.followups import (
    DEFAULT_FIXTURE,
    load_conversations,
    run_followups_eval,
    run_followups_with_model,
)
from config.settings import load_settings
from nodes.contextualize import contextualize, turn_answers
from nodes.resources import Resources
from query.follow_ups import heuristic_standalone
from tests.conftest import runtime
from tests.fakes import BrokenChatModel, scripted

HARWICK_Q = "Who founded the Harwick Observatory?"
HARWICK_A = "Lena Harwick\nLena Harwick founded the observatory on Mount Tessel [1]."
HARWICK_FOLLOW_UP = "How high is the mountain it stands on?"


def broken() -> BrokenChatModel:
    return BrokenChatModel(messages=iter([]))


# --- the heuristic ---------------------------------------------------------------------------------------


def test_the_mountain_is_read_from_the_previous_answer() -> None:
    standalone = heuristic_standalone(HARWICK_FOLLOW_UP, [HARWICK_Q], [HARWICK_A])
    assert standalone.startswith(HARWICK_FOLLOW_UP)
    assert "Mount Tessel" in standalone
    # Not the previous question's terms: they lead retrieval back to the founding passage.
    assert "founded" not in standalone


def test_without_answers_the_rewrite_is_the_old_one() -> None:
    """The previous question's names, then its other content words, appended (the rule before answers)."""
    assert (
        heuristic_standalone(HARWICK_FOLLOW_UP, [HARWICK_Q])
        == f"{HARWICK_FOLLOW_UP} (Harwick Observatory founded)"
    )
    assert heuristic_standalone(HARWICK_FOLLOW_UP, [HARWICK_Q], [""]) == heuristic_standalone(
        HARWICK_FOLLOW_UP, [HARWICK_Q]
    )


@pytest.mark.parametrize(
    ("follow_up", "question", "answer", "referent"),
    [
        # a person pronoun: the answered person
        ("When did she die?", HARWICK_Q, HARWICK_A, "Lena Harwick"),
        # "it" after a "who" question: the question's topic, not the person answered
        ("When was it built?", HARWICK_Q, HARWICK_A, "Harwick Observatory"),
        # "its" after a "which X" question: the new entity the answer named
        (
            "What is its population?",
            "Which city is the Pardo Library in?",
            "Vessenburg\nThe Pardo Library is in Vessenburg [1].",
            "Vessenburg",
        ),
        # a possessive person pronoun
        (
            "Who was her teacher?",
            "Which pianist recorded the Fennick Sonatas?",
            "Ruth Aldane\nThe Fennick Sonatas were recorded by the pianist Ruth Aldane [1].",
            "Ruth Aldane",
        ),
        # "that year": the year answered (numbers count only here)
        (
            "Who was king that year?",
            "When was the Sorrel Canal dug?",
            "1764\nThe Sorrel Canal was dug in 1764 [1].",
            "1764",
        ),
        # an ordinal: the second item of the answered list
        (
            "How long is the second one?",
            "Which two rivers meet at Dorrow?",
            "the Lune and the Tassa\nThe Lune and the Tassa meet at Dorrow [1].",
            "Tassa",
        ),
        # a head noun whose sentence says what the name is
        (
            "How big is the island?",
            "Where did the painter Odo Renn retire?",
            "Marsey\nOdo Renn retired to the island of Marsey [1].",
            "Marsey",
        ),
        # "there": the answered place
        (
            "What is the climate like there?",
            "Where was the composer Ivo Brandt born?",
            "Keldon\nIvo Brandt was born in Keldon [1].",
            "Keldon",
        ),
    ],
)
def test_references_resolve_to_the_entity_they_point_at(
    follow_up: str, question: str, answer: str, referent: str
) -> None:
    standalone = heuristic_standalone(follow_up, [question], [answer])
    assert standalone.startswith(follow_up) and referent in standalone


def test_chinese_follow_ups_take_the_short_answer() -> None:
    answer = "林晚秋\n《雾港》的作者是林晚秋[1]。"
    # not the fixture's conversation: another question about the same kind of answer
    person = heuristic_standalone(
        "她的丈夫是谁？", ["《灯塔夜话》的作者是谁？"], ["沈知白\n《灯塔夜话》的作者是沈知白[1]。"]
    )
    assert person.startswith("她的丈夫是谁？") and "沈知白" in person and "灯塔夜话" not in person
    province = heuristic_standalone(
        "该省的省会是哪里？", ["鹿鸣湖在哪个省？"], ["云岭省\n鹿鸣湖位于云岭省西部[1]。"]
    )
    assert "云岭省" in province
    year = heuristic_standalone(
        "那一年还发生了什么？", ["《北岸》是哪一年出版的？"], ["1983年\n《北岸》于1983年出版[1]。"]
    )
    assert "1983" in year
    # 它 after a 谁 question: the work asked about, not the person answered
    thing = heuristic_standalone("它是哪一年出版的？", ["《雾港》的作者是谁？"], [answer])
    assert "雾港" in thing and "林晚秋" not in thing


@pytest.mark.parametrize(
    "question",
    [
        "What is the tallest mountain in Europe?",
        "Is there a museum in Brisk?",
        "What is the capital of France?",
        "Who was the first president of Valdoria?",
        "Where was Marie Curie born?",
        "Did Einstein like his work?",
        "阿里巴巴的创始人是谁？",
    ],
)
def test_a_question_that_points_at_nothing_is_unchanged(question: str) -> None:
    assert heuristic_standalone(question, [HARWICK_Q], [HARWICK_A]) == question


def test_a_name_already_in_the_question_is_not_appended() -> None:
    question = "How high is Mount Tessel, the mountain it stands on?"
    assert heuristic_standalone(question, [HARWICK_Q], [HARWICK_A]) == question


# --- the contextualize node ------------------------------------------------------------------------------


HARWICK_THREAD = [HumanMessage(HARWICK_Q), AIMessage(HARWICK_A), HumanMessage(HARWICK_FOLLOW_UP)]


def test_turn_answers_pair_each_question_with_its_answer() -> None:
    turns = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2"), HumanMessage("q3"), AIMessage("a3")]
    assert turn_answers(turns) == ["a1", "", "a3"]
    assert turn_answers([AIMessage("orphan"), HumanMessage("q")]) == [""]


def test_contextualize_weak_model_names_the_mountain(install: Any) -> None:
    model = broken()
    install(model, strength="weak")
    update = contextualize({"question": HARWICK_FOLLOW_UP, "messages": HARWICK_THREAD}, runtime())
    assert "Mount Tessel" in update["standalone_question"]
    assert model.received == []


def test_contextualize_question_not_yet_in_messages_reads_the_answer(install: Any) -> None:
    install(broken(), strength="weak")
    state = {"question": HARWICK_FOLLOW_UP, "messages": HARWICK_THREAD[:2]}
    assert "Mount Tessel" in contextualize(state, runtime())["standalone_question"]  # type: ignore[arg-type]


def test_contextualize_strong_model_sees_the_answer(install: Any) -> None:
    model = scripted("How high is Mount Tessel?")
    install(model)
    update = contextualize({"question": HARWICK_FOLLOW_UP, "messages": HARWICK_THREAD}, runtime())
    assert update["standalone_question"] == "How high is Mount Tessel?"
    prompt = model.received[0][-1].content
    assert "Assistant: Lena Harwick" in prompt and "Mount Tessel" in prompt


def test_contextualize_garbage_reply_falls_back_to_the_answer_aware_heuristic(install: Any) -> None:
    install(scripted("lol no"))
    update = contextualize({"question": HARWICK_FOLLOW_UP, "messages": HARWICK_THREAD}, runtime())
    assert "Mount Tessel" in update["standalone_question"]


# --- the evaluation ----------------------------------------------------------------------------------------


TINY = [
    {
        "id": "tiny-brandt",
        "lang": "en",
        "reference": "pronoun-he",
        "passages": [
            {
                "id": "ostrel-tower",
                "title": "Ostrel Tower",
                "text": "Ostrel Tower was designed by Ivo Brandt.",
            },
            {"id": "ivo-brandt", "title": "Ivo Brandt", "text": "Ivo Brandt spent his childhood in Keldon."},
            {"id": "keldon", "title": "Keldon", "text": "Keldon has a small harbour."},
        ],
        "turn1": {
            "question": "Who designed the Ostrel Tower?",
            "answer": "Ivo Brandt\nOstrel Tower was designed by Ivo Brandt [1].",
        },
        "turn2": {
            "question": "Where did he grow up?",
            "referent": "Ivo Brandt",
            "gold_passage": "ivo-brandt",
        },
    },
    {
        "id": "tiny-province",
        "lang": "zh",
        "reference": "gai-np",
        "passages": [
            {"id": "qingliu", "title": "青柳镇", "text": "青柳镇位于云岭省。"},
            {"id": "yunling", "title": "云岭省", "text": "云岭省的省会是石门市。"},
        ],
        "turn1": {"question": "青柳镇位于哪个省？", "answer": "云岭省\n青柳镇位于云岭省[1]。"},
        "turn2": {"question": "该省的省会是哪里？", "referent": "云岭省", "gold_passage": "yunling"},
    },
    {
        "id": "tiny-rivers",
        "lang": "en",
        "reference": "ordinal",
        "passages": [
            {"id": "dorrow", "title": "Dorrow", "text": "The Lune and the Tassa meet at Dorrow."},
            {"id": "tassa", "title": "Tassa", "text": "The Tassa is 90 kilometres long."},
            {"id": "lune", "title": "Lune", "text": "The Lune is 40 kilometres long."},
        ],
        "turn1": {
            "question": "Which two rivers meet at Dorrow?",
            "answer": "the Lune and the Tassa\nThe Lune and the Tassa meet at Dorrow [1].",
        },
        "turn2": {"question": "How long is the second one?", "referent": "Tassa", "gold_passage": "tassa"},
    },
]


def tiny_fixture(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.jsonl"
    path.write_text(
        "\n".join(json.dumps(record, ensure_ascii=False) for record in TINY) + "\n", encoding="utf-8"
    )
    return path


def overall(report: dict[str, Any], rewrite: str, metric: str) -> float:
    """A rate over both halves (the tiny set is too small to care which conversation falls where)."""
    entries = [entry for entry in report["splits"].values() if entry["n"]]
    return sum(entry[rewrite][metric] * entry["n"] for entry in entries) / sum(
        entry["n"] for entry in entries
    )


def test_eval_scores_referents_and_retrieval_on_tiny_conversations(tmp_path: Path) -> None:
    report = run_followups_eval(load_conversations(tiny_fixture(tmp_path)), work_dir=tmp_path)
    assert report["conversations"] == 3 and report["passages"] == 8
    assert sum(entry["n"] for entry in report["splits"].values()) == 3
    assert overall(report, "raw", "resolved") == 0.0
    assert overall(report, "before", "resolved") == 0.0  # the previous question never names the referent
    assert overall(report, "after", "resolved") == 1.0
    assert overall(report, "after", "hit@1") == 1.0
    # "Where did he grow up?" shares no word with any passage: the raw follow-up finds nothing for it.
    assert overall(report, "raw", "hit@3") <= 2 / 3
    for case in report["dev_cases"]:
        assert case["after"]["rank"] == 1 and case["after"]["top"][0] == case["gold"]


def test_eval_with_a_model_runs_the_contextualize_node(tmp_path: Path) -> None:
    conversations = load_conversations(tiny_fixture(tmp_path))
    model = scripted("Where did Ivo Brandt grow up?", "云岭省的省会是哪里？", "How long is the Tassa?")

    def factory(settings: Any) -> Resources:
        return Resources(
            settings, generator=model, grader=model, strengths={"generate": "strong", "grade": "strong"}
        )

    report = run_followups_with_model(
        conversations, load_settings(data_dir=tmp_path / "rag"), resources_factory=factory, work_dir=tmp_path
    )
    assert report["model"]["strength"] == "strong" and len(model.received) == 3
    assert overall(report, "model", "resolved") == 1.0


def test_the_fixture_is_big_enough_and_split_in_two() -> None:
    conversations = load_conversations(DEFAULT_FIXTURE)
    assert len(conversations) >= 30
    assert sum(conversation.lang == "zh" for conversation in conversations) >= 6
    halves = {conversation.split for conversation in conversations}
    assert halves == {"dev", "test"}
    for conversation in conversations:
        assert 2 <= len(conversation.passages) <= 4
        assert conversation.referent.casefold() not in conversation.follow_up.casefold()


def test_a_bad_fixture_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    record = {**TINY[0], "turn2": {**TINY[0]["turn2"], "gold_passage": "nowhere"}}
    path.write_text(
        json.dumps(TINY[1], ensure_ascii=False) + "\n" + json.dumps(record) + "\n", encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"bad.jsonl:2: .*gold passage"):
        load_conversations(path)
