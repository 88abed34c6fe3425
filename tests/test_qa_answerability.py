"""The scoring of unanswerable questions (evals/qa_scoring.py), the run's answerability summary
(evals/qa_aggregate.py) and the development / test halves (evals.splits.split_of).

Every expected number below is worked out by hand in the comments beside it, never taken from the code.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from evals.datasets import LANGUAGE_ENGLISH, Passage, QAExample
from evals.qa_aggregate import aggregate
from evals.qa_scoring import error_record, is_answerable, question_record
from evals.splits import ALL_SPLITS, examples_in_split, split_of
from prompts.answer import NOT_FOUND_EN

# --------------------------------------------------------------------------------------------------------
# Scoring unanswerable questions


def _example(answerable: bool) -> QAExample:
    return QAExample(
        qid="u1",
        question="Who repainted the tower?",
        answers=["Ilsa Marrow"] if answerable else [],
        passages=[Passage("P", "Tower", "The tower was built of grey stone.")],
        supporting={"P"},
        kind=None,
        language=LANGUAGE_ENGLISH,
        answerable=answerable,
    )


def _judged(short: str, **result: Any) -> dict[str, Any]:
    """An output state whose judgement had `short` as its short answer."""
    return {"answer_record": {"short_answer": short, "signals": {}}, **result}


def test_an_unanswerable_question_is_correct_only_when_declined() -> None:
    declined = question_record(
        _example(False), _judged("Ilsa Marrow", answer=NOT_FOUND_EN, not_found=True), latency_s=0.1
    )
    assert declined["answerable"] is False
    assert declined["contains_gold"] == 1.0 and declined["em"] == 1.0 and declined["short_f1"] == 1.0
    assert declined["candidate_right"] == 0.0  # any answer to an unanswerable question is wrong
    shown = question_record(
        _example(False), {"answer": "Ilsa Marrow [1].", "not_found": False}, latency_s=0.1
    )
    assert shown["contains_gold"] == 0.0 and shown["f1"] == 0.0 and shown["candidate_right"] == 0.0
    failed = error_record(_example(False), RuntimeError("x"), latency_s=0.1)
    assert failed["contains_gold"] == 0.0 and failed["answerable"] is False


def test_the_record_keeps_the_reply_logprobs() -> None:
    info = {"reply_logprobs": [["Answer", -0.1], [": Ilsa", -0.4]]}
    record = question_record(
        _example(True), {"answer": "Ilsa Marrow [1].", "prompt_info": info}, latency_s=0.1
    )
    assert record["reply_logprobs"] == info["reply_logprobs"]


def test_old_records_count_as_answerable_by_their_gold_and_the_report_summarises_answerability() -> None:
    assert is_answerable({"qid": "o", "answers": ["Ilsa Marrow"], "prediction": "Ilsa Marrow."})
    assert not is_answerable({"qid": "n", "answers": [], "prediction": "x"})
    assert is_answerable({"qid": "a", "prediction": "x"})  # no gold named at all: counted answerable
    assert not is_answerable({"qid": "u", "answers": ["x"], "answerable": False})

    def record(example: QAExample, result: dict[str, Any]) -> dict[str, Any]:
        return question_record(example, result, latency_s=0.1)

    not_found = {"answer": NOT_FOUND_EN, "not_found": True}
    records = [
        record(_example(True), _judged("Ilsa Marrow", answer="Ilsa Marrow [1].")),  # answerable, right
        record(_example(True), _judged("Ilsa Marrow", **not_found)),  # right answer declined
        record(_example(True), _judged("Tom Reed", **not_found)),  # wrong answer declined
        record(_example(True), _judged("Tom Reed", answer="Tom Reed [1].")),  # answerable, wrong
        record(_example(False), _judged("Tom Reed", **not_found)),  # unanswerable, declined
        record(_example(False), _judged("Tom Reed", answer="Tom Reed [1].")),  # unanswerable, answered
    ]
    summary = aggregate(records)["answerability"]
    # answerable 4: 1 right (0.25), 2 not found (0.5); unanswerable 2: 1 declined (0.5);
    # declines 3 (two answerable, one unanswerable): 1 held a right short answer.
    assert summary == {
        "answerable": 4,
        "unanswerable": 2,
        "answerable_contains_gold": 0.25,
        "answerable_not_found_rate": 0.5,
        "unanswerable_declined_rate": 0.5,
        "declines": 3,
        "declines_with_gold": 1,
        "declines_with_gold_share": round(1 / 3, 4),
    }


# --------------------------------------------------------------------------------------------------------
# Development and test halves


def test_split_of_follows_the_documented_hash_rule_and_is_balanced() -> None:
    ids = [f"question-{index}" for index in range(1000)]
    halves = [split_of(qid) for qid in ids]
    assert halves == [split_of(qid) for qid in ids]  # stable within a process
    expected = ["dev" if hashlib.sha256(qid.encode()).digest()[0] % 2 == 0 else "test" for qid in ids]
    assert halves == expected  # and across processes: a fixed hash, not Python's hash()
    assert 0.45 <= halves.count("dev") / len(ids) <= 0.55


def test_examples_in_split_partitions_the_questions() -> None:
    examples = [QAExample(f"q{index}", "?", ["a"], [], set(), None, LANGUAGE_ENGLISH) for index in range(40)]
    dev, test = examples_in_split(examples, "dev"), examples_in_split(examples, "test")
    assert len(dev) + len(test) == 40 and not {e.qid for e in dev} & {e.qid for e in test}
    assert all(split_of(e.qid) == "dev" for e in dev)
    assert examples_in_split(examples, ALL_SPLITS) == examples
    with pytest.raises(ValueError, match="split"):
        examples_in_split(examples, "train")
