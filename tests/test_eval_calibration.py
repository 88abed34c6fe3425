"""The answer-confidence calibration (benchmarks/calibration.py, `python -m benchmarks calibrate`), the
scoring of unanswerable questions (evals/qa_scoring.py) and the development / test halves
(evals.splits.split_of).

Every expected number below is worked out by hand in the comments beside it, never taken from the code.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks.calibration import (
    SKIPPED_ERROR,
    SKIPPED_NO_CONFIDENCE,
    THRESHOLD_VARIABLE,
    auroc,
    calibrate,
    candidates_of,
    choose_threshold,
    outcome_at,
    roc_points,
)
from evals.datasets import LANGUAGE_ENGLISH, Passage, QAExample
from evals.qa_aggregate import aggregate
from evals.qa_scoring import error_record, question_record, with_candidate
from evals.splits import ALL_SPLITS, examples_in_split, split_of
from prompts.answer import NOT_FOUND_EN

# --------------------------------------------------------------------------------------------------------
# AUROC


def test_auroc_counts_pairs_and_ties_half() -> None:
    # Pairs (positive, negative), 3 x 3 = 9: 0.9 beats all three (3); 0.8 beats 0.7, 0.4, 0.1 (3);
    # 0.4 loses to 0.7 (0), ties 0.4 (0.5), beats 0.1 (1). (3 + 3 + 1.5) / 9 = 7.5 / 9.
    assert auroc([0.9, 0.8, 0.4], [0.7, 0.4, 0.1]) == pytest.approx(7.5 / 9)
    assert auroc([-0.1, -0.2], [-3.0, -5.0]) == 1.0  # every positive above every negative
    assert auroc([-3.0], [-0.1, -0.2]) == 0.0  # every positive below
    assert auroc([-1.0, -1.0], [-1.0]) == 0.5  # all tied
    # 2 positives, 2 negatives: -1 beats -2 and -3 (2); -2.5 beats -3 (1): 3 / 4
    assert auroc([-1.0, -2.5], [-2.0, -3.0]) == 0.75
    assert auroc([], [-1.0]) is None and auroc([-1.0], []) is None


def test_roc_points_run_from_origin_to_one() -> None:
    # thresholds -1, -2, -2.5, -3 in falling order; TPR over positives {-1, -2.5}, FPR over {-2, -3}
    assert roc_points([-1.0, -2.5], [-2.0, -3.0]) == [
        (0.0, 0.0),
        (0.0, 0.5),
        (0.5, 0.5),
        (0.5, 1.0),
        (1.0, 1.0),
    ]


# --------------------------------------------------------------------------------------------------------
# Records and the operating point


def _record(
    qid: str,
    *,
    answerable: bool = True,
    correct: bool = False,
    confidence: float | None = None,
    model_declined: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """A QA record as `rag eval qa` writes it, with only the fields calibration reads."""
    not_found = model_declined
    return {
        "qid": qid,
        "answerable": answerable,
        "answers": ["gold"] if answerable else [],
        "prediction": NOT_FOUND_EN if not_found else "an answer",
        "not_found": not_found,
        "declined_answer": "",
        "candidate_accuracy": 1.0 if correct else 0.0,
        "answer_confidence": confidence,
        **extra,
    }


def _dev_records() -> list[dict[str, Any]]:
    """A, B correct; C wrong; D, E unanswerable; F declined by the model itself."""
    return [
        _record("A", correct=True, confidence=-0.1),
        _record("B", correct=True, confidence=-0.5),
        _record("C", correct=False, confidence=-0.3),
        _record("D", answerable=False, confidence=-0.2),
        _record("E", answerable=False, confidence=-0.9),
        _record("F", model_declined=True),
    ]


def test_the_operating_point_minimises_two_wrong_shown_plus_one_withheld() -> None:
    candidates, skipped = candidates_of(_dev_records())
    assert len(candidates) == 6 and skipped == {SKIPPED_ERROR: 0, SKIPPED_NO_CONFIDENCE: 0}
    # Cost by threshold (shown when confidence >= t; F is never shown and holds no correct answer):
    #   -0.9: all shown, wrong C D E -> 2*3 = 6      -0.5: A B C D shown, wrong C D -> 4
    #   -0.3: A C D shown, wrong C D, B withheld -> 5  -0.2: A D shown, wrong D, B withheld -> 3
    #   -0.1: A shown, B withheld -> 1              above -0.1: none shown, A B withheld -> 2
    assert choose_threshold(candidates) == -0.1
    assert outcome_at(candidates, -0.9)["cost"] == 6
    assert outcome_at(candidates, -0.2)["cost"] == 3
    at = outcome_at(candidates, -0.1)
    # answerable A B C F: A answered correctly (1/4); B C F declined (3/4); unanswerable D E both declined;
    # declines B C D E F (5), of which B held a gold answer (1/5).
    assert at["answerable_accuracy"] == 0.25 and at["answerable_declined"] == 0.75
    assert at["unanswerable_declined"] == 1.0 and at["declines_with_gold"] == 0.2
    assert (at["wrong_shown"], at["correct_withheld"], at["declines"], at["cost"]) == (0, 1, 5, 1)


def test_a_tie_goes_to_the_lower_threshold() -> None:
    candidates, _ = candidates_of(
        [
            _record("A", correct=True, confidence=-0.1),
            _record("U", answerable=False, confidence=-0.3),
            _record("B", correct=True, confidence=-0.5),
            _record("C", correct=True, confidence=-0.6),
        ]
    )
    # -0.6: U shown wrong -> 2; -0.5: U wrong + C withheld -> 3; -0.3: U wrong + B C withheld -> 4;
    # -0.1: B C withheld -> 2; above -0.1: A B C withheld -> 3. Cost 2 at -0.6 and -0.1: the lower wins.
    assert choose_threshold(candidates) == -0.6


def test_records_without_confidence_or_with_an_error_are_skipped_and_counted() -> None:
    records = [
        *_dev_records(),
        _record("G", correct=True),  # an answer but no confidence
        _record("H", confidence=-0.2, error="RuntimeError: boom"),
    ]
    candidates, skipped = candidates_of(records)
    assert sorted(candidate.qid for candidate in candidates) == ["A", "B", "C", "D", "E", "F"]
    assert skipped == {SKIPPED_ERROR: 1, SKIPPED_NO_CONFIDENCE: 1}
    with pytest.raises(ValueError, match="confidence"):
        choose_threshold(candidates_of([_record("F", model_declined=True)])[0])


def test_a_declined_answer_is_the_candidate_and_the_model_s_decline_is_declined_at_every_threshold() -> None:
    declined_right = {
        **_record("R", confidence=-2.0),
        "not_found": True,
        "prediction": NOT_FOUND_EN,
        "declined_answer": "gold [1].",
        "candidate_accuracy": 1.0,
    }
    model_declined = _record("M", model_declined=True, confidence=-0.01)
    candidates, _ = candidates_of([declined_right, model_declined])
    by_qid = {candidate.qid: candidate for candidate in candidates}
    assert by_qid["R"].correct and not by_qid["R"].always_declined
    assert by_qid["M"].always_declined and not by_qid["M"].correct
    # at a threshold below every confidence R is shown (1 of 2 answerable answered); M never is
    assert outcome_at(candidates, -100.0)["answerable_declined"] == 0.5


def test_calibrate_chooses_on_dev_and_reports_targets_on_test() -> None:
    test_records = [
        _record("t1", correct=True, confidence=-0.05),
        _record("t2", correct=True, confidence=-0.4),
        _record("t3", correct=True, confidence=-0.08),
        _record("t4", answerable=False, confidence=-0.7),
        _record("t5", answerable=False, confidence=-0.02),
    ]
    report = calibrate(_dev_records(), test_records)
    assert report["threshold"] == -0.1 and report["setting"] == f"{THRESHOLD_VARIABLE}=-0.1"
    test = report["test"]
    at = test["at_threshold"]
    # at -0.1: t1 t3 shown correct, t5 shown wrong; t2 withheld (correct), t4 declined.
    # answerable declined 1/3; unanswerable declined 1/2; declines t2 t4: 1 of 2 held gold.
    assert at["answerable_accuracy"] == round(2 / 3, 4) and at["answerable_declined"] == round(1 / 3, 4)
    assert at["unanswerable_declined"] == 0.5 and at["declines_with_gold"] == 0.5
    # AUROC: positives -0.05 -0.4 -0.08 against negatives -0.7 -0.02: -0.05 and -0.08 beat only -0.7 (2),
    # -0.4 beats -0.7 (1): 3 of 6 pairs.
    assert test["auroc"] == 0.5
    met = {check["metric"]: check["met"] for check in test["targets"]}
    # 1/3 > 0.20, 0.5 < 0.60, 0.5 > 0.10, 0.5 < 0.85: nothing met
    assert met == {
        "answerable_declined": False,
        "unanswerable_declined": False,
        "declines_with_gold": False,
        "auroc": False,
    }
    assert report["targets_measured_on"] == "test"
    with pytest.raises(ValueError, match="both"):
        calibrate(_dev_records(), [_record("A", correct=True, confidence=-0.1)])


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


def test_an_unanswerable_question_is_correct_only_when_declined() -> None:
    declined = question_record(
        _example(False), {"answer": NOT_FOUND_EN, "not_found": True, "answer_confidence": -1.5}, latency_s=0.1
    )
    assert declined["answerable"] is False
    assert declined["contains_gold"] == 1.0 and declined["em"] == 1.0 and declined["short_f1"] == 1.0
    assert declined["candidate_contains_gold"] == 0.0 and declined["candidate_answer"] == NOT_FOUND_EN
    assert declined["answer_confidence"] == -1.5
    shown = question_record(
        _example(False), {"answer": "Ilsa Marrow [1].", "not_found": False}, latency_s=0.1
    )
    assert shown["contains_gold"] == 0.0 and shown["f1"] == 0.0 and shown["candidate_contains_gold"] == 0.0
    assert shown["answer_confidence"] is None
    failed = error_record(_example(False), RuntimeError("x"), latency_s=0.1)
    assert failed["contains_gold"] == 0.0 and failed["answerable"] is False


def test_the_record_keeps_the_reply_logprobs_and_the_term_checks_verdict() -> None:
    """Other confidence signals (benchmarks/confidence_variants.py) are replayed from these two fields."""
    info = {"reply_logprobs": [["Answer", -0.1], [": Ilsa", -0.4]], "term_check_reason": "no passage says it"}
    record = question_record(
        _example(True), {"answer": "Ilsa Marrow [1].", "prompt_info": info}, latency_s=0.1
    )
    assert record["reply_logprobs"] == info["reply_logprobs"]
    assert record["term_check_reason"] == "no passage says it"


def test_the_candidate_is_the_declined_answer_and_is_scored_against_gold() -> None:
    result = {
        "answer": NOT_FOUND_EN,
        "not_found": True,
        "declined_answer": "Ilsa Marrow [1] repainted it.",
        "answer_confidence": -0.3,
    }
    record = question_record(_example(True), result, latency_s=0.1)
    assert record["contains_gold"] == 0.0  # what was shown: "not found"
    assert (
        record["candidate_answer"] == "Ilsa Marrow [1] repainted it."
        and record["candidate_contains_gold"] == 1.0
    )
    answered = question_record(
        _example(True), {"answer": "Ilsa Marrow [1].", "not_found": False}, latency_s=0.1
    )
    assert answered["candidate_answer"] == "Ilsa Marrow [1]." and answered["candidate_contains_gold"] == 1.0


def test_old_records_get_defaults_and_the_report_summarises_answerability() -> None:
    old = {"qid": "o", "answers": ["Ilsa Marrow"], "prediction": "Ilsa Marrow.", "not_found": False}
    filled = with_candidate(old)
    assert filled["answerable"] is True and filled["answer_confidence"] is None
    assert filled["candidate_answer"] == "Ilsa Marrow." and filled["candidate_contains_gold"] == 1.0
    assert with_candidate({"qid": "n", "answers": [], "prediction": "x"})["answerable"] is False

    def record(example: QAExample, result: dict[str, Any]) -> dict[str, Any]:
        return question_record(example, result, latency_s=0.1)

    not_found = {"answer": NOT_FOUND_EN, "not_found": True}
    records = [
        record(_example(True), {"answer": "Ilsa Marrow [1]."}),  # answerable, right
        record(_example(True), {**not_found, "declined_answer": "Ilsa Marrow."}),  # right answer declined
        record(_example(True), {**not_found, "declined_answer": "Tom Reed."}),  # wrong answer declined
        record(_example(True), {"answer": "Tom Reed [1]."}),  # answerable, wrong
        record(_example(False), not_found),  # unanswerable, declined
        record(_example(False), {"answer": "Tom Reed [1]."}),  # unanswerable, answered
    ]
    summary = aggregate(records)["answerability"]
    # answerable 4: 1 right (0.25), 2 not found (0.5); unanswerable 2: 1 declined (0.5);
    # declines 3 (two answerable, one unanswerable): 1 held gold.
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


# --------------------------------------------------------------------------------------------------------
# The command


def test_the_calibrate_command_writes_json_plot_and_the_setting(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from benchmarks.commands import app

    dev_file, test_file = tmp_path / "dev.jsonl", tmp_path / "test.jsonl"
    dev_file.write_text("".join(json.dumps(record) + "\n" for record in _dev_records()))
    test_file.write_text(json.dumps(_record("t1", correct=True, confidence=-0.05)) + "\nnot json\n")
    out, png = tmp_path / "calibration.json", tmp_path / "calibration.png"
    arguments = ["calibrate", "--dev", str(dev_file), "--test", str(test_file)]
    result = CliRunner().invoke(app, [*arguments, "--json", str(out), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert f"{THRESHOLD_VARIABLE}=-0.1" in result.output
    report = json.loads(out.read_text())
    assert report["threshold"] == -0.1 and report["test"]["records"] == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    missing = CliRunner().invoke(app, ["calibrate", "--dev", str(tmp_path / "absent.jsonl")])
    assert missing.exit_code == 2 and "absent.jsonl" in missing.output
    assert math.isfinite(report["threshold"])
