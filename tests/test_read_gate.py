"""The focused read's gate (answering/read_gate.py): the read runs only when one of its outcomes (no answer,
the same answer, another answer) can move the draft out of its band under the calibrator. Hand-built
calibrators and signals for each outcome, then generate with a fake model that counts its calls."""

from __future__ import annotations

import math
from typing import Any

import pytest

from answering.calibrator import Calibrator, Thresholds
from answering.read_gate import AGREES, NO_ANSWER, REPLACES, outcome_bands, read_can_change_band
from nodes import cite as cite_node
from nodes import grade_answer as grade_node
from nodes.cite import cite
from nodes.focused_read import FOCUSED_READ_SKIPPED_KEY
from nodes.generate import generate
from nodes.grade_answer import grade_answer
from state.answer_record import AnswerRecord, Band, Candidates
from tests.conftest import runtime
from tests.fakes import scripted
from tests.helpers.calibrators import TEST_THRESHOLDS, constant, following
from tests.test_answer_span import GLASSWORKS, doc

QUESTION = "Who founded the Orrin Glassworks?"
#: The draft of the generate tests: the model's own short answer, then its cited explanation.
DRAFT_REPLY = "Answer: Mara Velt\nExplanation: She founded it in 1874 [1]."


def linear(weights: dict[str, float], probability_at_zero: float) -> Calibrator:
    """A calibrator whose log-odds are logit(`probability_at_zero`) plus `weights` times the signals."""
    names = tuple(weights)
    return Calibrator(
        name="test-linear",
        models=(),
        features=names,
        mean=tuple(0.0 for _ in names),
        scale=tuple(1.0 for _ in names),
        coef=tuple(weights[name] for name in names),
        intercept=math.log(probability_at_zero / (1.0 - probability_at_zero)),
        isotonic_x=(),
        isotonic_y=(),
        thresholds=TEST_THRESHOLDS,
        fit={"note": "tests"},
    )


def pre_read(
    band: Band,
    *,
    short: str = "Mara Velt",
    draft: str = "Mara Velt",
    extractive: str = "Mara Velt",
    probability: float = 0.5,
    **signals: float,
) -> AnswerRecord:
    """A draft judged before the read (its focused-read candidate empty), with the band the test states."""
    base = {
        "readers_proposing": float(bool(draft) + bool(extractive)),
        "has_short_answer": float(bool(short)),
    }
    return AnswerRecord(
        short_answer=short,
        explanation="She founded it in 1874 [1].",
        candidates=Candidates(draft=draft, focused_read="", extractive=extractive),
        signals={**base, **signals},
        probability=probability,
        band=band,
        decline_reason="",
        closest=None,
        calibrator="test",
    )


# --- the pure gate, outcome by outcome -------------------------------------------------------------------


def test_a_calibrator_blind_to_the_read_never_lets_it_change_the_band() -> None:
    record = pre_read("tentative")
    assert outcome_bands(record, constant(0.5)) == {
        NO_ANSWER: {"tentative"},
        AGREES: {"tentative"},
        REPLACES: {"tentative"},
    }
    assert not read_can_change_band(record, constant(0.5))
    assert not read_can_change_band(pre_read("confident"), following("reader_declined", inverted=True))


def test_an_agreeing_read_can_lift_a_draft_near_the_threshold() -> None:
    # logit(0.65) + 2 * agreement: 0.65 (tentative) without the read, 0.93 (confident) when it agrees.
    near = linear({"agree_draft_focused": 2.0}, 0.65)
    record = pre_read("tentative")
    bands = outcome_bands(record, near)
    assert bands[NO_ANSWER] == {"tentative"} and bands[AGREES] == {"confident"}
    assert read_can_change_band(record, near)
    # Far below the floor, the same weight cannot lift it out of not found: 0.02 -> at most 0.13.
    assert not read_can_change_band(pre_read("not_found"), linear({"agree_draft_focused": 2.0}, 0.02))


def test_a_read_cannot_agree_with_a_reader_that_proposed_nothing() -> None:
    """The reader declined (its candidate empty): agreement with it stays 0 whatever the read says."""
    record = pre_read("not_found", draft="", short="Mara Velt", extractive="Mara Velt")
    bands = outcome_bands(record, following("agree_draft_focused"))
    assert bands == {NO_ANSWER: {"not_found"}, AGREES: {"not_found"}, REPLACES: {"not_found"}}
    assert not read_can_change_band(record, following("agree_draft_focused"))


def test_an_agreeing_read_agrees_with_the_extractive_answer_as_the_short_answer_does() -> None:
    calibrator = following("agree_focused_extractive")
    agreeing = pre_read("not_found", extractive="Mara Velt")
    assert outcome_bands(agreeing, calibrator)[AGREES] == {"confident"}
    disagreeing = pre_read("not_found", extractive="1874")
    assert outcome_bands(disagreeing, calibrator)[AGREES] == {"not_found"}
    # Another answer may or may not be the extractive one: both ends.
    assert outcome_bands(disagreeing, calibrator)[REPLACES] == {"not_found", "confident"}
    assert not read_can_change_band(pre_read("not_found", extractive=""), calibrator)


def test_a_replacing_read_counts_as_its_own_short_answer() -> None:
    record = pre_read("not_found", short_from_extractive=1.0)
    bands = outcome_bands(record, following("short_from_focused_read"))
    assert bands[NO_ANSWER] == {"not_found"} and bands[AGREES] == {"not_found"}
    assert bands[REPLACES] == {"confident"}
    assert read_can_change_band(record, following("short_from_focused_read"))
    # The short answer then no longer comes from the extractive answerer.
    from_extractive = pre_read("confident", short_from_extractive=1.0)
    assert outcome_bands(from_extractive, following("short_from_extractive"))[REPLACES] == {"not_found"}


def test_a_replacing_answer_need_not_be_in_the_top_passage() -> None:
    """The read's answer is only known to be readable in the passage it read: both ends are scored."""
    record = pre_read("confident", short_in_top_passage=1.0)
    bands = outcome_bands(record, following("short_in_top_passage"))
    assert bands[AGREES] == {"confident"} and bands[REPLACES] == {"not_found", "confident"}
    assert read_can_change_band(record, following("short_in_top_passage"))


def test_one_more_reader_proposing_can_cross_a_threshold() -> None:
    two_readers = Calibrator(
        name="test-two-readers",
        models=(),
        features=("readers_proposing",),
        mean=(2.5,),
        scale=(1.0,),
        coef=(40.0,),
        intercept=0.0,
        isotonic_x=(),
        isotonic_y=(),
        thresholds=TEST_THRESHOLDS,
        fit={"note": "tests"},
    )
    assert read_can_change_band(pre_read("not_found"), two_readers)  # 2 readers -> 3
    assert not read_can_change_band(
        pre_read("confident", extractive="1874", readers_proposing=3.0), two_readers
    )


def test_without_a_short_answer_any_answer_of_the_read_replaces_it() -> None:
    record = pre_read("tentative", short="", draft="", extractive="")
    assert set(outcome_bands(record, constant(0.5))) == {NO_ANSWER, REPLACES}
    assert read_can_change_band(record, following("has_short_answer", thresholds=Thresholds(0.7, 0.0)))


def test_a_band_the_text_checks_moved_is_always_read() -> None:
    """A confident probability shown as tentative (its explanation contradicts the short answer): another
    short answer from the read may not contradict it."""
    assert read_can_change_band(pre_read("tentative", probability=0.9), constant(0.9))
    assert not read_can_change_band(pre_read("confident", probability=0.9), constant(0.9))


# --- in generate ----------------------------------------------------------------------------------------


def test_generate_skips_a_read_that_cannot_change_the_band(install: Any, calibrator: Any) -> None:
    calibrator(constant(0.5))  # tentative, whatever the read does
    model = scripted(DRAFT_REPLY, "Tom Ferro")
    install(model)
    update = generate({"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, runtime(focused_read=True))
    assert len(model.received) == 1 and update["llm_calls"] == 1
    info = update["prompt_info"]
    assert info[FOCUSED_READ_SKIPPED_KEY] == "tentative"
    assert "focused_read_passage" not in info and info["candidates"]["focused_read"] == ""
    assert update["draft"].startswith("Mara Velt\n\n")


def test_generate_reads_again_when_agreement_can_lift_the_draft(install: Any, calibrator: Any) -> None:
    calibrator(linear({"agree_draft_focused": 2.0}, 0.65))  # tentative now, confident if the read agrees
    model = scripted(DRAFT_REPLY, "Mara Velt")
    install(model)
    update = generate({"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, runtime(focused_read=True))
    assert len(model.received) == 2 and update["llm_calls"] == 2
    info = update["prompt_info"]
    assert FOCUSED_READ_SKIPPED_KEY not in info
    assert info["focused_read_passage"] == "chunk-1" and info["candidates"]["focused_read"] == "Mara Velt"


def test_a_skipped_read_hands_its_judgement_on_instead_of_judging_the_draft_again(
    install: Any, calibrator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate judged the draft that stands: cite (no grader) and grade_answer show that judgement."""
    calibrator(constant(0.5))  # tentative, whatever the read does
    install(scripted(DRAFT_REPLY, "Tom Ferro"))
    state = {"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}
    update = generate(state, runtime(focused_read=True))
    assert update["answer_record"]["band"] == "tentative"

    def judged_again(*args: Any, **kwargs: Any) -> AnswerRecord:
        raise AssertionError("the draft was judged a second time")

    monkeypatch.setattr(cite_node, "judge_draft", judged_again)
    monkeypatch.setattr(grade_node, "judge_draft", judged_again)
    cited = cite({**state, **update}, runtime(focused_read=True))
    assert cited["band"] == "tentative" and cited["confidence"] == 0.5
    graded = grade_answer({**state, **update}, runtime(focused_read=True, grader="score"))
    assert graded["best_answer"]["record"]["band"] == "tentative" and graded["answer_score"] == 0.5


def test_a_draft_read_again_carries_no_judgement(install: Any, calibrator: Any) -> None:
    """The read may have changed the draft the gate judged: nothing is handed on."""
    calibrator(linear({"agree_draft_focused": 2.0}, 0.65))  # the read can lift the draft: it runs
    install(scripted(DRAFT_REPLY, "Mara Velt"))
    update = generate({"question": QUESTION, "documents": [doc(1, GLASSWORKS)]}, runtime(focused_read=True))
    assert update["llm_calls"] == 2 and update["answer_record"] is None
