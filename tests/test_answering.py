"""The answer's judgement (answering/): the signals of a draft, the calibrator's artifact and probability, the
decision into confident / tentative / not found and its text, and the graph's output state.

Calibrators here are built by the tests (tests/helpers/calibrators.py), never the committed artifacts, whose
numbers are refit. Passages and questions are invented.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import answering.calibrator as calibrator_module
from answering.calibrator import (
    Calibrator,
    CalibratorError,
    Thresholds,
    calibrator_for,
    calibrator_from_json,
    committed_calibrators,
    interpolate,
    load_calibrator,
    use_calibrator,
)
from answering.decision import (
    REASON_MISSING_ANCHORS,
    REASON_NO_ANSWER,
    REASON_READER_DECLINED,
    band_of,
    contradicts,
    decide,
    rendered_answer,
)
from answering.judge import judge_answer
from answering.signals import SIGNAL_GROUPS, SIGNAL_NAMES, DraftFacts, draft_signals, token_f1
from graphs.rag import build_graph
from nodes.resources import Resources, use_resources
from prompts.answer import NOT_FOUND_EN, NOT_FOUND_ZH
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from state.answer_record import AnswerRecord, Band, Candidates, ClosestSentence
from state.context import Context
from tests.conftest import isolated_settings, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel
from tests.helpers.calibrators import TEST_THRESHOLDS, constant, following
from tests.helpers.passages import passage

TARROW_TEXT = (
    "The Tarrow viaduct carries the valley railway over the river Ness. It is 612 metres long and has 14 "
    "arches. Its piers are built of local granite."
)
CORRAN_TEXT = "Corran is a market town on the river Ness. Its weekly wool market is held every Thursday."
QUESTION = "How long is the Tarrow viaduct?"
#: A viaduct no passage names.
UNANSWERABLE = "How long is the Marlow viaduct?"
DRAFT = "612 metres\n\nThe Tarrow viaduct is 612 metres long [1]."
#: The tentative answer's text: no bold line, the sentence of the source that states the short answer.
TENTATIVE_TEXT = (
    "Not sure \u2014 the closest the documents come is: It is 612 metres long and has 14 arches. [1]"
)


TARROW = passage(1, TARROW_TEXT, "Tarrow viaduct", relevance=0.9)
CORRAN = passage(2, CORRAN_TEXT, "Corran", relevance=0.2)


def candidates(draft: str = "", focused_read: str = "", extractive: str = "") -> Candidates:
    return Candidates(draft=draft, focused_read=focused_read, extractive=extractive)


def facts(**changes: Any) -> DraftFacts:
    fields: dict[str, Any] = {
        "question": QUESTION,
        "short_answer": "612 metres",
        "explanation": "The Tarrow viaduct is 612 metres long [1].",
        "candidates": candidates("612 metres", "612 metres", "612 metres long"),
        "sources": [TARROW],
        "evidence": [],
        "documents": [TARROW, CORRAN],
        "short_logprobs": [-0.5, -0.1, -30.0],
        "short_answer_source": "model",
        "reader_declined": False,
        "generation_fallback": False,
        "comparison": False,
        "strategy": "HYBRID",
    }
    return DraftFacts(**{**fields, **changes})


def record(
    probability: float,
    *,
    short: str = "612 metres",
    explanation: str = "The Tarrow viaduct is 612 metres long [1].",
    signals: dict[str, float] | None = None,
    closest: ClosestSentence | None = None,
    band: Band = "not_found",
) -> AnswerRecord:
    return AnswerRecord(
        short_answer=short,
        explanation=explanation,
        candidates=candidates(short),
        signals=signals or {},
        probability=probability,
        band=band,
        decline_reason="",
        closest=closest,
        calibrator="test",
    )


# --- signals ------------------------------------------------------------------------------------------------


def test_token_f1_compares_words_without_case_or_punctuation_and_chinese_by_characters() -> None:
    assert token_f1("612 metres", "612 Metres.") == 1.0
    assert token_f1("the Tarrow viaduct", "Tarrow viaduct") == pytest.approx(0.8)  # P 2/3, R 1
    assert token_f1("Paris", "Lyon") == 0.0
    assert token_f1("", "Paris") == 0.0 and token_f1("Paris", "  ") == 0.0
    assert token_f1("澄河石桥", "石桥") == pytest.approx(2 / 3)  # 2 of 4 characters, both of 2


def test_every_signal_of_every_group_is_computed() -> None:
    assert SIGNAL_NAMES == tuple(name for group in SIGNAL_GROUPS.values() for name in group)
    assert len(set(SIGNAL_NAMES)) == len(SIGNAL_NAMES)
    signals = draft_signals(facts())
    assert set(signals) == set(SIGNAL_NAMES)
    assert all(isinstance(value, float) and math.isfinite(value) for value in signals.values())


def test_the_signals_of_an_answer_the_passages_hold() -> None:
    signals = draft_signals(facts(), similarity=lambda question, texts: 0.75)
    # log-probabilities: a token below the floor counts as the floor (-10)
    assert signals["logprob_mean"] == pytest.approx((-0.5 - 0.1 - 10.0) / 3)
    assert signals["logprob_min"] == -10.0 and signals["has_logprobs"] == 1.0
    # readers: draft and focused read agree, the extractive span adds a word (F1 0.8)
    assert signals["agree_draft_focused"] == 1.0
    assert signals["agree_draft_extractive"] == pytest.approx(0.8)
    assert signals["readers_proposing"] == 3.0
    # the answer is in the top passage and in its explanation
    assert signals["short_in_top_passage"] == 1.0 and signals["short_in_explanation"] == 1.0
    assert signals["short_in_evidence"] == 1.0
    # retrieval: the graded relevances 0.9 and 0.2
    assert signals["top_relevance"] == 0.9 and signals["relevance_margin"] == pytest.approx(0.7)
    assert signals["relevant_passages"] == 1.0
    assert signals["question_evidence_similarity"] == 0.75 and signals["has_similarity"] == 1.0
    # term checks: the question's name is there and its terms are covered
    assert signals["missing_anchors"] == 0.0 and signals["term_check_declines"] == 0.0
    assert signals["term_coverage"] == 1.0
    assert signals["reader_declined"] == 0.0 and signals["has_short_answer"] == 1.0
    assert signals["short_from_extractive"] == 0.0 and signals["language_zh"] == 0.0


def test_the_term_checks_are_signals_of_a_question_no_passage_names() -> None:
    signals = draft_signals(facts(question=UNANSWERABLE))
    assert signals["missing_anchors"] == 1.0  # "Marlow"
    assert signals["term_check_declines"] == 1.0
    assert signals["term_coverage"] < 1.0


def test_missing_inputs_are_zero_with_their_flag() -> None:
    signals = draft_signals(
        facts(short_logprobs=[], candidates=candidates(), documents=[], short_answer_source="extractive")
    )
    assert signals["has_logprobs"] == 0.0 and signals["logprob_mean"] == 0.0
    assert signals["has_similarity"] == 0.0  # no embedding model given
    assert signals["readers_proposing"] == 0.0 and signals["agree_draft_focused"] == 0.0
    assert signals["top_relevance"] == 0.0 and signals["short_from_extractive"] == 1.0


def test_the_judge_reads_the_readers_and_their_decline_from_prompt_info() -> None:
    prompt_info = {
        "candidates": {"draft": "", "extractive": "612 metres"},
        "reader_declined": True,
        "short_logprobs": [-0.2, -0.4],
        "short_answer_source": "extractive",
    }
    judged = judge_answer(
        question=QUESTION,
        draft=DRAFT,
        sources=[TARROW],
        evidence=[],
        documents=[TARROW],
        prompt_info=prompt_info,
        strategy="HYBRID",
        calibrator=constant(0.9),
    )
    assert judged["signals"]["reader_declined"] == 1.0
    assert judged["signals"]["short_from_extractive"] == 1.0
    assert judged["signals"]["logprob_mean"] == pytest.approx(-0.3)
    assert judged["candidates"] == {"draft": "", "focused_read": "", "extractive": "612 metres"}
    assert judged["signals"]["readers_proposing"] == 1.0
    assert (judged["short_answer"], judged["probability"], judged["band"]) == ("612 metres", 0.9, "confident")
    assert judged["calibrator"] == "test-constant-0.9"


# --- the decision -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("probability", "band"),
    [(0.95, "confident"), (0.7, "confident"), (0.69, "tentative"), (0.3, "tentative"), (0.29, "not_found")],
)
def test_the_band_follows_the_thresholds(probability: float, band: str) -> None:
    assert band_of(probability, Thresholds(confident=0.7, floor=0.3)) == band


def test_an_explanation_that_states_another_answer_contradicts_the_short_one() -> None:
    question = "Which address does it listen on?"
    assert contradicts(question, "127.0.0.1", "It listens on 0.0.0.0 by default [1].")
    assert not contradicts(question, "0.0.0.0", "It listens on 0.0.0.0 by default [1].")
    assert not contradicts(question, "127.0.0.1", "")


def test_a_contradicted_short_answer_is_never_confident() -> None:
    contradicted = record(0.95, short="127.0.0.1", explanation="It listens on 0.0.0.0 by default [1].")
    decided = decide(contradicted, "Which address does it listen on?", TEST_THRESHOLDS, has_text=True)
    assert decided["band"] == "tentative" and decided["decline_reason"] == ""
    agreeing = record(0.95, short="0.0.0.0", explanation="It listens on 0.0.0.0 by default [1].")
    assert decide(agreeing, "Which address does it listen on?", TEST_THRESHOLDS, has_text=True)["band"] == (
        "confident"
    )


def test_a_decline_says_why_in_plain_words() -> None:
    low = decide(record(0.1), QUESTION, TEST_THRESHOLDS, has_text=True)
    assert low["band"] == "not_found"
    assert low["decline_reason"] == "the engine's confidence (0.10) is below its floor (0.30)"
    declined = record(0.1, signals={"reader_declined": 1.0, "readers_proposing": 0.0})
    assert decide(declined, QUESTION, TEST_THRESHOLDS, has_text=True)["decline_reason"] == (
        REASON_READER_DECLINED
    )
    unnamed = record(0.1, signals={"reader_declined": 1.0, "readers_proposing": 1.0, "missing_anchors": 1.0})
    assert decide(unnamed, UNANSWERABLE, TEST_THRESHOLDS, has_text=True)["decline_reason"] == (
        REASON_MISSING_ANCHORS
    )
    empty = decide(record(0.95), QUESTION, TEST_THRESHOLDS, has_text=False)
    assert (empty["band"], empty["decline_reason"]) == ("not_found", REASON_NO_ANSWER)
    nothing_read = decide(
        record(0.95, signals={"reader_declined": 1.0}), QUESTION, TEST_THRESHOLDS, has_text=False
    )
    assert nothing_read["decline_reason"] == REASON_READER_DECLINED
    # tentative with nothing to show: neither a short answer nor a sentence of the sources
    bare = decide(record(0.5, short=""), QUESTION, TEST_THRESHOLDS, has_text=True)
    assert bare["band"] == "not_found"


def test_each_band_has_its_text() -> None:
    closest = ClosestSentence(text="It is 612 metres long and has 14 arches.", source=1, start=67, end=107)
    assert rendered_answer(record(0.9, closest=closest, band="confident"), "en") == DRAFT
    # a one-sentence draft is shown as written, markers and full stop included
    one_sentence = "The Tarrow viaduct is 612 metres long [1]."
    assert rendered_answer(record(0.9, band="confident"), "en", draft=one_sentence) == one_sentence
    assert rendered_answer(record(0.5, closest=closest, band="tentative"), "en") == TENTATIVE_TEXT
    assert rendered_answer(record(0.5, band="tentative"), "en") == (
        "Not sure \u2014 the closest the documents come is: 612 metres"
    )
    assert rendered_answer(record(0.1, closest=closest), "en") == NOT_FOUND_EN
    assert rendered_answer(record(0.1, closest=closest), "zh") == NOT_FOUND_ZH


def test_a_chinese_tentative_answer() -> None:
    closest = ClosestSentence(text="塔罗高架桥长612米。", source=2, start=0, end=11)
    chinese = record(0.5, short="612米", explanation="", closest=closest, band="tentative")
    assert rendered_answer(chinese, "zh") == "不确定——文档中最接近的说法是： 塔罗高架桥长612米。 [2]"


# --- the calibrator -----------------------------------------------------------------------------------------

FITTED = Calibrator(
    name="fitted",
    models=("qwen2.5-coder-0.5b",),
    features=("logprob_mean", "readers_proposing"),
    mean=(-1.0, 1.5),
    scale=(0.5, 1.0),
    coef=(2.0, -1.0),
    intercept=0.25,
    isotonic_x=(0.1, 0.5, 0.9),
    isotonic_y=(0.0, 0.4, 1.0),
    thresholds=Thresholds(confident=0.8, floor=0.2),
    fit={"records": 120},
)


def test_an_artifact_round_trips_through_its_json_file(tmp_path: Path) -> None:
    path = tmp_path / "fitted.json"
    path.write_text(json.dumps(FITTED.to_json()), encoding="utf-8")
    assert load_calibrator(path) == FITTED


def test_the_probability_is_the_logistic_regression_through_the_isotonic_map() -> None:
    signals = {"logprob_mean": -0.5, "readers_proposing": 3.0, "unused": 9.0}
    z = 0.25 + 2.0 * (-0.5 + 1.0) / 0.5 - 1.0 * (3.0 - 1.5) / 1.0  # 0.75
    raw = 1 / (1 + math.exp(-z))  # 0.679
    assert FITTED.raw_score(signals) == pytest.approx(raw)
    assert FITTED.probability(signals) == pytest.approx(0.4 + (raw - 0.5) / 0.4 * 0.6)
    assert FITTED.raw_score({}) == pytest.approx(1 / (1 + math.exp(-(0.25 + 4.0 + 1.5))))  # missing = 0


def test_interpolate_is_piecewise_linear_and_clipped() -> None:
    xs, ys = (0.0, 0.5, 1.0), (0.1, 0.2, 0.9)
    assert interpolate(-1.0, xs, ys) == 0.1 and interpolate(2.0, xs, ys) == 0.9
    assert interpolate(0.25, xs, ys) == pytest.approx(0.15)
    assert interpolate(0.75, xs, ys) == pytest.approx(0.55)
    assert interpolate(0.5, (0.0, 0.5, 0.5, 1.0), (0.0, 0.3, 0.6, 1.0)) == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 99}, "version"),
        ({"coef": [1.0]}, "differ in length"),
        ({"isotonic": {"x": [0.1, 0.2], "y": [0.5]}}, "isotonic"),
        ({"intercept": "high"}, "malformed"),
        ({"thresholds": {"confident": 0.8}}, "malformed"),
        ({"features": None}, "malformed"),
    ],
)
def test_a_malformed_artifact_is_a_calibrator_error(change: dict[str, Any], message: str) -> None:
    with pytest.raises(CalibratorError, match=message):
        calibrator_from_json({**FITTED.to_json(), **change})


@pytest.fixture
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An artifact folder of this test's own, read without the test calibrator the conftest installs."""
    monkeypatch.setattr(calibrator_module, "CALIBRATOR_DIR", tmp_path)
    committed_calibrators.cache_clear()
    with use_calibrator(None):
        yield tmp_path
    committed_calibrators.cache_clear()


def test_a_model_gets_its_own_calibrator_else_the_default(artifacts: Path) -> None:
    default = Calibrator(**{**FITTED.__dict__, "name": "default", "models": ()})
    for calibrator in (FITTED, default):
        (artifacts / f"{calibrator.name}.json").write_text(json.dumps(calibrator.to_json()), encoding="utf-8")
    assert calibrator_for("local:Qwen2.5-Coder-0.5B-Instruct@") == (FITTED, True)
    assert calibrator_for("openai:gpt-4o@https://api.example.com") == (default, False)
    with use_calibrator(constant(0.5)) as installed:  # installed: used for every model, names none
        assert calibrator_for("local:qwen2.5-coder-0.5b@") == (installed, False)
    with use_calibrator(FITTED):
        assert calibrator_for("local:qwen2.5-coder-0.5b@") == (FITTED, True)
        assert calibrator_for("openai:gpt-4o@") == (FITTED, False)
    assert calibrator_for("local:qwen2.5-coder-0.5b@") == (FITTED, True)


def test_without_a_default_artifact_an_unknown_model_is_a_calibrator_error(artifacts: Path) -> None:
    (artifacts / "fitted.json").write_text(json.dumps(FITTED.to_json()), encoding="utf-8")
    with pytest.raises(CalibratorError, match="no default calibrator"):
        calibrator_for("openai:gpt-4o@")


def test_the_committed_artifacts_load_and_weigh_known_signals() -> None:
    """Their numbers are refit; their form is not: every artifact loads, a default exists, and every
    feature is a signal answering.signals computes."""
    committed_calibrators.cache_clear()
    found = committed_calibrators()
    assert found[-1].name == "default"
    for calibrator in found:
        assert set(calibrator.features) <= set(SIGNAL_NAMES), calibrator.name
        assert 0.0 <= calibrator.thresholds.floor <= calibrator.thresholds.confident <= 1.0


# --- the graph ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    root = tmp_path_factory.mktemp("answering")
    base = KnowledgeBase(isolated_settings(root), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    corpus = {"tarrow.md": f"# Tarrow viaduct\n\n{TARROW_TEXT}", "corran.md": f"# Corran\n\n{CORRAN_TEXT}"}
    ingest_paths(base, list(write_corpus(root / "corpus", corpus).values()))
    yield base
    base.close()


def ask(kb: KnowledgeBase, reply: str, question: str = QUESTION) -> dict[str, Any]:
    model = TaskChatModel(replies={"generate": reply})
    resources = Resources(
        kb.settings, knowledge_base=kb, generator=model, grader=model, strengths={"generate": "weak"}
    )
    with use_resources(resources):
        return build_graph(InMemorySaver()).invoke(
            {"question": question},
            config={"configurable": {"thread_id": "t"}},
            context=Context(max_iterations=1),
        )


def test_a_confident_answer_carries_its_record_band_and_confidence(kb: KnowledgeBase) -> None:
    out = ask(kb, DRAFT)
    assert out["band"] == "confident" and out["confidence"] == 0.9 and not out["not_found"]
    assert out["answer"] == DRAFT and out["short_answer"] == "612 metres"
    judged = out["answer_record"]
    assert judged["calibrator"] == "test-constant-0.9" and judged["probability"] == 0.9
    assert judged["candidates"]["draft"] == "612 metres" and set(judged["signals"]) == set(SIGNAL_NAMES)


def test_a_tentative_answer_shows_the_closest_sentence_without_a_short_answer(
    kb: KnowledgeBase, calibrator: Any
) -> None:
    calibrator(constant(0.5))
    out = ask(kb, DRAFT)
    assert (out["band"], out["confidence"], out["not_found"]) == ("tentative", 0.5, False)
    assert out["answer"] == TENTATIVE_TEXT and out["short_answer"] == ""
    assert [citation["title"] for citation in out["citations"]] == ["Tarrow viaduct"]


def test_the_reader_s_none_is_a_signal_not_a_decline(kb: KnowledgeBase, calibrator: Any) -> None:
    """The reader replies "none": the judgement still weighs the other readers' answer (here the
    calibrator ignores the decline, so it is shown); a calibrator that heeds it declines, saying why."""
    shown = ask(kb, "none")
    assert shown["answer_record"]["signals"]["reader_declined"] == 1.0
    assert shown["band"] == "confident" and not shown["not_found"] and shown["answer"] != NOT_FOUND_EN
    assert "612" in shown["short_answer"]
    calibrator(following("reader_declined", inverted=True))
    declined = ask(kb, "none")
    assert declined["band"] == "not_found" and declined["not_found"] and declined["answer"] == NOT_FOUND_EN
    assert declined["confidence"] == 0.0 and declined["sources"] == [] and declined["citations"] == []
    assert declined["not_found_reason"] == "the engine's confidence (0.00) is below its floor (0.30)"


def test_a_low_probability_draft_about_a_name_no_passage_mentions_is_not_found(
    kb: KnowledgeBase, calibrator: Any
) -> None:
    calibrator(following("missing_anchors", inverted=True))
    out = ask(kb, "612 metres\n\nThe Marlow viaduct is 612 metres long [1].", UNANSWERABLE)
    assert out["band"] == "not_found" and out["answer"] == NOT_FOUND_EN
    assert out["not_found_reason"] == REASON_MISSING_ANCHORS
    assert out["answer_record"]["signals"]["missing_anchors"] == 1.0


def test_the_not_found_sentence_is_no_answer_to_judge() -> None:
    """The extractive answerer found nothing: however sure the calibrator, nothing is shown."""
    judged = judge_answer(
        question=QUESTION,
        draft=NOT_FOUND_EN,
        sources=[TARROW],
        evidence=[],
        documents=[TARROW],
        prompt_info={"reader_declined": True},
        strategy="HYBRID",
        calibrator=constant(0.9),
    )
    assert (judged["band"], judged["decline_reason"]) == ("not_found", REASON_READER_DECLINED)


def test_the_loop_aims_at_the_highest_band_the_calibrator_reaches() -> None:
    """A calibrator whose isotonic map never reaches its confident threshold (a weak reader's) makes tentative
    the best band: the Self-RAG loop stops there instead of spending its budget on an unreachable band."""
    from answering.decision import best_band, reached_best_band

    weak = Calibrator(
        **{
            **FITTED.__dict__,
            "isotonic_x": (0.0, 1.0),
            "isotonic_y": (0.05, 0.6),
            "thresholds": Thresholds(0.95, 0.1),
        }
    )
    strong = Calibrator(
        **{
            **FITTED.__dict__,
            "isotonic_x": (0.0, 1.0),
            "isotonic_y": (0.05, 0.99),
            "thresholds": Thresholds(0.9, 0.1),
        }
    )
    assert best_band(weak) == "tentative" and best_band(strong) == "confident"
    assert reached_best_band("tentative", weak) and not reached_best_band("not_found", weak)
    assert not reached_best_band("tentative", strong) and reached_best_band("confident", strong)
