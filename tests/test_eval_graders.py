"""`python -m benchmarks graders`: metric arithmetic on hand-made labels, runs over a 3-question HotpotQA
fixture with fake embeddings and a scripted grading model, the --no-llm path, the CLI table and the report
section."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from typer.testing import CliRunner

from benchmarks.commands import app
from benchmarks.grader_scoring import base_rate, binary_metrics, cost_summary, ranking_quality, roc_auc
from benchmarks.graders import LLM_GRADER, SCORE_GRADER, grade_question, run_grader_eval
from benchmarks.report import README_NAME, load_results, report_kind, write_report
from config.settings import Settings
from evals.datasets import LANGUAGE_ENGLISH, QAExample
from nodes.resources import Resources, use_resources
from state.context import Context
from state.schemas import RetrievedDoc
from tests.fakes import TaskChatModel, fake_resources_factory
from tests.test_eval_qa import HOTPOT_RECORDS

TOP_K = 4
#: Pooled paragraphs of the three fixture questions (3 + 2 + 2): every question can fill TOP_K.
FIXTURE_PASSAGES = 7
GARBAGE = "%%% not json %%%"
#: A listed passage: "[n] " then the chunk text (whitespace collapsed), which starts with the passage's title.
_NUMBERED = re.compile(r"\[(\d+)\] ([^\n]*)")
GRADER_TASK = "grade_retrieval"
REQUIRED_GRADER_KEYS = {
    "accuracy",
    "precision",
    "recall",
    "f1",
    "judged_relevant",
    "llm_calls",
    "total_ms",
    "mean_ms_per_question",
    "failed_replies",
}


# --------------------------------------------------------------------------------------------------------
# Metric arithmetic


def test_binary_metrics_on_hand_made_labels() -> None:
    labels = [True, True, False, False, False]
    predictions = [True, False, True, False, False]
    metrics = binary_metrics(labels, predictions)
    assert metrics["confusion"] == {"tp": 1, "fp": 1, "fn": 1, "tn": 2}
    assert (metrics["accuracy"], metrics["precision"], metrics["recall"], metrics["f1"]) == (
        0.6,
        0.5,
        0.5,
        0.5,
    )
    assert metrics["judged_relevant"] == 0.4
    assert base_rate(labels) == 0.4 and base_rate([]) is None


def test_binary_metrics_undefined_and_zero_cases() -> None:
    never = binary_metrics([True, False], [False, False])
    assert never["precision"] is None and never["recall"] == 0.0 and never["f1"] is None
    no_gold = binary_metrics([False, False], [True, False])
    assert no_gold["recall"] is None and no_gold["precision"] == 0.0 and no_gold["f1"] is None
    wrong = binary_metrics([True, False], [False, True])
    assert (wrong["precision"], wrong["recall"], wrong["f1"], wrong["accuracy"]) == (0.0, 0.0, 0.0, 0.0)
    empty = binary_metrics([], [])
    assert empty["accuracy"] is None and empty["judged_relevant"] is None
    with pytest.raises(ValueError):
        binary_metrics([True], [True, False])


def test_ranking_quality_means_gap_and_auc() -> None:
    labels = [True, True, False, False]
    scores = [0.9, 0.4, 0.5, 0.1]
    quality = ranking_quality(labels, scores)
    assert quality == {
        "mean_score_relevant": 0.65,
        "mean_score_irrelevant": 0.3,
        "score_gap": 0.35,
        "auc": 0.75,  # 3 of the 4 (relevant, irrelevant) pairs are ordered right
    }
    assert roc_auc([True, False], [0.5, 0.5]) == 0.5  # a tie counts half
    assert roc_auc([True, True, False], [0.2, 0.3, 0.9]) == 0.0
    assert roc_auc([True, True], [0.1, 0.2]) is None
    assert ranking_quality([False], [0.3])["score_gap"] is None
    assert cost_summary([10.0, 30.0]) == {"total_ms": 40.0, "mean_ms_per_question": 20.0}
    assert cost_summary([])["mean_ms_per_question"] is None


# --------------------------------------------------------------------------------------------------------
# Grading one question with hand-made passages


MAGAZINES = QAExample(
    qid="h1",
    question="Which magazine was started first, Harbor Quarterly or Lantern Review?",
    answers=["Harbor Quarterly"],
    passages=[],
    supporting={"Harbor Quarterly", "Lantern Review"},
    kind="comparison",
    language=LANGUAGE_ENGLISH,
)


def _doc(number: int, doc_id: str, text: str, dense: float | None) -> RetrievedDoc:
    return RetrievedDoc(
        chunk_id=f"c{number}",
        text=text,
        source="corpus.jsonl",
        title=doc_id,
        page=-1,
        doc_id=doc_id,
        score=1.0 / number,
        relevance=-1.0,
        query="",
        metadata={"dense_score": dense, "bm25_score": None},
    )


def test_grade_question_labels_scores_and_maps_llm_numbers_to_passages(settings: Settings) -> None:
    example = MAGAZINES
    docs = [
        _doc(1, "Kestrel FM", "Kestrel FM is the first private radio station of Varnholm.", 0.1),
        _doc(
            2, "Harbor Quarterly", "Harbor Quarterly was an American literary magazine, started first.", 0.9
        ),
        _doc(3, "Lantern Review", "Lantern Review is a science magazine, started in 1992.", 0.8),
    ]
    model = TaskChatModel(replies={GRADER_TASK: '{"relevant": [2, 3]}'})
    with use_resources(Resources(settings, generator=model, grader=model)):
        grades = grade_question(example, docs, Context(), llm=True)
    assert grades.labels == [False, True, True]
    assert grades.score_verdicts == [score >= Context().relevance_threshold for score in grades.scores]
    assert grades.scores[1] > grades.scores[0]
    assert grades.llm_verdicts == [False, True, True]
    assert (grades.llm_calls, grades.failed_replies, grades.fallback_passages) == (1, 0, 0)


def test_unusable_llm_reply_keeps_the_score_verdicts(settings: Settings) -> None:
    example = MAGAZINES
    docs = [_doc(1, "Kestrel FM", "Kestrel FM is a radio station.", 0.0)]
    model = TaskChatModel(replies={GRADER_TASK: GARBAGE})
    with use_resources(Resources(settings, generator=model, grader=model)):
        grades = grade_question(example, docs, Context(), llm=True)
    assert grades.llm_verdicts == grades.score_verdicts
    assert grades.failed_replies == 1 and grades.fallback_passages == 1
    assert grades.llm_calls == len(model.calls)  # the retry of structured output counts as a call


# --------------------------------------------------------------------------------------------------------
# Runs over the HotpotQA fixture


def _write_hotpot(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in HOTPOT_RECORDS), encoding="utf-8")
    return path


@pytest.fixture
def hotpot_file(tmp_path: Path) -> Path:
    return _write_hotpot(tmp_path / "data" / "hotpot_tiny.jsonl")


def _supporting(question: str) -> set[str]:
    record = next(record for record in HOTPOT_RECORDS if record["question"] in question)
    return {title for title, _sentence in record["supporting_facts"]}


def oracle_reply(garbage_for: str = "") -> Callable[[list[BaseMessage]], str]:
    """A grading model that names exactly the gold passages (by the title each listed chunk starts with, on
    its own line or not), or answers garbage for the question containing `garbage_for`."""

    def reply(messages: list[BaseMessage]) -> str:
        prompt = str(next(m for m in messages if isinstance(m, HumanMessage)).content)
        if garbage_for and garbage_for in prompt:
            return GARBAGE
        gold = _supporting(prompt)
        numbers = [
            int(number)
            for number, text in _NUMBERED.findall(prompt)
            if any(text == title or text.startswith(f"{title} ") for title in gold)
        ]
        return json.dumps({"relevant": numbers})

    return reply


def test_run_with_a_perfect_grading_model(hotpot_file: Path, settings: Settings) -> None:
    model = TaskChatModel(replies={GRADER_TASK: oracle_reply()})
    report = run_grader_eval(
        hotpot_file, settings, limit=3, top_k=TOP_K, resources=fake_resources_factory(model)
    )
    assert (report["questions"], report["passages"], report["top_k"]) == (3, 3 * TOP_K, TOP_K)
    assert report["corpus_passages"] == FIXTURE_PASSAGES and report["dataset"] == "hotpot_tiny"
    assert {"machine", "model", "base_rate", "relevance_threshold"} <= set(report)
    assert report["default_grader"] == SCORE_GRADER  # weak model under `auto`
    assert set(report["graders"]) == {SCORE_GRADER, LLM_GRADER}
    score, llm = report["graders"][SCORE_GRADER], report["graders"][LLM_GRADER]
    assert REQUIRED_GRADER_KEYS <= set(score) and REQUIRED_GRADER_KEYS <= set(llm)
    assert {"mean_score_relevant", "mean_score_irrelevant", "auc"} <= set(score)
    # one call per question, all of them the relevance grader's prompt, none failed
    assert model.tasks() == [GRADER_TASK] * 3
    assert (llm["llm_calls"], llm["failed_replies"], llm["fallback_passages"]) == (3, 0, 0)
    assert llm["llm_calls_per_question"] == 1.0 and score["llm_calls"] == 0
    # the oracle names exactly the gold passages, so the LLM grader matches the labels
    assert llm["confusion"]["fp"] == llm["confusion"]["fn"] == 0
    assert llm["accuracy"] == llm["precision"] == llm["recall"] == llm["f1"] == 1.0
    relevant = llm["confusion"]["tp"]
    assert relevant > 0 and report["base_rate"] == round(relevant / report["passages"], 4)
    assert llm["judged_relevant"] == report["base_rate"]
    # both graders are scored against the same labels
    assert score["confusion"]["tp"] + score["confusion"]["fn"] == relevant
    assert sum(score["confusion"].values()) == report["passages"]


def test_failed_replies_are_counted_and_fall_back_to_the_score_grader(
    hotpot_file: Path, settings: Settings
) -> None:
    model = TaskChatModel(replies={GRADER_TASK: oracle_reply(garbage_for="Quarry Hollow")})
    report = run_grader_eval(
        hotpot_file, settings, limit=3, top_k=TOP_K, resources=fake_resources_factory(model)
    )
    llm = report["graders"][LLM_GRADER]
    assert llm["failed_replies"] == 1 and llm["fallback_passages"] == TOP_K
    assert llm["llm_calls"] == len(model.calls) > 3  # the failed question was retried
    assert sum(llm["confusion"].values()) == report["passages"] == 3 * TOP_K


def test_no_llm_makes_no_model_call(hotpot_file: Path, settings: Settings) -> None:
    model = TaskChatModel(replies={GRADER_TASK: oracle_reply()})
    report = run_grader_eval(
        hotpot_file, settings, limit=2, top_k=TOP_K, llm=False, resources=fake_resources_factory(model)
    )
    assert model.calls == []
    assert set(report["graders"]) == {SCORE_GRADER}
    assert report["questions"] == 2 and report["passages"] == 2 * TOP_K
    assert report["graders"][SCORE_GRADER]["llm_calls"] == 0


def test_limit_below_one_is_refused(hotpot_file: Path, settings: Settings) -> None:
    with pytest.raises(ValueError):
        run_grader_eval(hotpot_file, settings, limit=0, resources=fake_resources_factory(TaskChatModel()))


# --------------------------------------------------------------------------------------------------------
# CLI and report

MACHINE = "Test CPU, 2 cores"
GRADERS_REPORT: dict[str, Any] = {
    "dataset": "hotpot_dev",
    "questions": 30,
    "passages": 240,
    "top_k": 8,
    "base_rate": 0.125,
    "relevance_threshold": 0.35,
    "default_grader": "score",
    "corpus_passages": 300,
    "machine": MACHINE,
    "model": "SmolLM2 (embedded)",
    "embedding": "minilm",
    "graders": {
        "score": {
            "accuracy": 0.8,
            "precision": 0.4,
            "recall": 0.7,
            "f1": 0.5091,
            "judged_relevant": 0.22,
            "confusion": {"tp": 21, "fp": 32, "fn": 9, "tn": 178},
            "mean_score_relevant": 0.55,
            "mean_score_irrelevant": 0.2,
            "score_gap": 0.35,
            "auc": 0.86,
            "llm_calls": 0,
            "total_ms": 12.0,
            "mean_ms_per_question": 0.4,
            "failed_replies": 0,
        },
        "llm": {
            "accuracy": 0.6,
            "precision": 0.15,
            "recall": 0.5,
            "f1": 0.2308,
            "judged_relevant": 0.41,
            "confusion": {"tp": 15, "fp": 84, "fn": 15, "tn": 126},
            "llm_calls": 33,
            "llm_calls_per_question": 1.1,
            "total_ms": 90000.0,
            "mean_ms_per_question": 3000.0,
            "failed_replies": 3,
            "fallback_passages": 24,
            "prompt_tokens": 30000,
            "completion_tokens": 600,
        },
    },
}


def test_cli_prints_the_table_and_writes_json(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, hotpot_file: Path
) -> None:
    seen: dict[str, Any] = {}

    def fake_run(dataset: Path, settings: Settings, **options: Any) -> dict[str, Any]:
        seen.update(options, dataset=dataset)
        return GRADERS_REPORT

    monkeypatch.setattr("benchmarks.graders.run_grader_eval", fake_run)
    out = tmp_path / "results" / "graders.json"
    arguments = ["graders", "--dataset", str(hotpot_file), "--limit", "5", "--no-llm", "--json", str(out)]
    # The report names the command line it ran under (sys.argv; pytest's own, which differs under xdist).
    monkeypatch.setattr("sys.argv", ["benchmarks", *arguments])
    for name in [name for name in os.environ if name.startswith("RAG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RAG_TOP_K", "8")
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    assert (seen["limit"], seen["top_k"], seen["llm"]) == (5, 8, False)
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written.pop("command") == "RAG_TOP_K=8 " + shlex.join(["rag", *arguments])
    assert written == GRADERS_REPORT
    assert "score" in result.output and "0.509" in result.output and "AUC 0.86" in result.output
    for bad in (["--limit", "0"], ["--top-k", "0"], ["--top-k", "101"]):
        refused = CliRunner().invoke(app, ["graders", "--dataset", str(hotpot_file), *bad])
        assert refused.exit_code == 2


def test_report_has_a_retrieval_graders_section(tmp_path: Path) -> None:
    assert report_kind(GRADERS_REPORT) == "graders"
    (tmp_path / "graders_hotpot.json").write_text(json.dumps(GRADERS_REPORT), encoding="utf-8")
    assert len(load_results(tmp_path).graders) == 1
    written = write_report(tmp_path)
    readme = (tmp_path / README_NAME).read_text(encoding="utf-8")
    assert written["reports"]["graders"] == 1
    assert "## Retrieval graders" in readme
    assert (
        "| hotpot_dev | 30 | 240 | 0.125 | score | 0.800 | 0.400 | 0.700 | 0.509 | 0.220 | 0.860 | 0 |"
        in readme
    )
    assert (
        "| hotpot_dev | 30 | 240 | 0.125 | llm | 0.600 | 0.150 | 0.500 | 0.231 | 0.410 | – | 33 | 3000 | 3 |"
        in (readme)
    )
    assert "default grader under these settings: score" in readme and MACHINE in readme


def test_report_without_graders_explains_how_to_get_one(tmp_path: Path) -> None:
    write_report(tmp_path)
    assert "No graders report yet" in (tmp_path / README_NAME).read_text(encoding="utf-8")
