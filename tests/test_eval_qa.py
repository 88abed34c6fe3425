"""The QA benchmark: dataset detection, per-question scoring, aggregation math, resumable runs and failing
questions (fake models, milliseconds), plus one slow smoke run of each pipeline with the real models."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from answering.decision import REASON_MISSING_ANCHORS, REASON_READER_DECLINED
from config.settings import Settings
from evals.datasets import LANGUAGE_CHINESE, LANGUAGE_ENGLISH, Passage, QAExample
from evals.environment import code_commit
from evals.metrics import contains_gold_answer
from evals.qa import (
    PIPELINES,
    append_record,
    gold_filter,
    load_qa_examples,
    pool_examples,
    read_records,
    run_qa_eval,
    select_examples,
)
from evals.qa_aggregate import UNRECORDED_COMMIT, aggregate, score_means
from evals.qa_scoring import (
    SUPPORT_RECALL_KEY,
    UNRECORDED_REASON,
    answer_scores,
    error_record,
    question_record,
)
from graphs.runner import Session
from prompts.answer import NOT_FOUND_EN
from tests.fakes import TaskChatModel, fake_resources_factory

REQUIRED_REPORT_KEYS = {
    "pipeline",
    "n",
    "em",
    "f1",
    "rouge_l",
    "short_rouge_l",
    "support_recall@5",
    "citation_precision",
    "not_found_rate",
    "llm_calls_per_question",
    "tokens_per_question",
    "latency_p50_s",
    "by_strategy",
    "by_type",
    "dataset",
    "machine",
    "model",
}
FAKE_REPLY = "Yes [1]."

HOTPOT_RECORDS: list[dict[str, Any]] = [
    {
        "_id": "h1",
        "question": "Which magazine was started first, Harbor Quarterly or Lantern Review?",
        "answer": "Harbor Quarterly",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": [["Harbor Quarterly", 0], ["Lantern Review", 0]],
        "context": [
            ["Harbor Quarterly", ["Harbor Quarterly (1851-1860) was an American literary periodical."]],
            [
                "Lantern Review",
                [
                    "Lantern Review is a science magazine published by Orrel Press.",
                    "It was started in 1992.",
                ],
            ],
            ["Kestrel FM", ["Kestrel FM is the first private radio station of Varnholm."]],
        ],
    },
    {
        "_id": "h2",
        "question": "The director of the comedy Quarry Hollow is based in what district of Clarion City?",
        "answer": "Elm Terrace, Clarion City",
        "type": "bridge",
        "level": "hard",
        "supporting_facts": [["Quarry Hollow (film)", 0], ["Mirela Voss", 0]],
        "context": [
            [
                "Quarry Hollow (film)",
                ["Quarry Hollow is a 2014 romantic comedy film directed by Mirela Voss."],
            ],
            [
                "Mirela Voss",
                ["Mirela Voss is a best-selling author based in Elm Terrace, Clarion City."],
            ],
        ],
    },
    {
        "_id": "h3",
        "question": "Were Tobin Marsh and Idris Calloway of the same nationality?",
        "answer": "yes",
        "type": "comparison",
        "level": "hard",
        "supporting_facts": [["Tobin Marsh", 0], ["Idris Calloway", 0]],
        "context": [
            ["Tobin Marsh", ["Tobin Marsh is an American director, screenwriter and producer."]],
            ["Idris Calloway", ["Idris Owen Calloway Jr. was an American filmmaker, actor and producer."]],
        ],
    },
]

CMRC_DOCUMENT = {
    "version": "v1.0",
    "data": [
        {
            "id": "DEV_0",
            "title": "《星河旅人2》",
            "paragraphs": [
                {
                    "id": "DEV_0_P0",
                    "context": "《星河旅人2》是由青石工作室和北辰互动开发的星河旅人系列的正统第二续作。"
                    "本作于2011年9月发售。",
                    "qas": [
                        {
                            "id": "DEV_0_Q0",
                            "question": "《星河旅人2》是由哪两个公司合作开发的？",
                            "answers": [{"text": "青石工作室和北辰互动", "answer_start": 9}],
                        },
                        {
                            "id": "DEV_0_Q1",
                            "question": "《星河旅人2》是什么时候发售的？",
                            "answers": [{"text": "2011年9月", "answer_start": 39}],
                        },
                    ],
                }
            ],
        },
        {
            "id": "DEV_1",
            "title": "竹编灯",
            "paragraphs": [
                {
                    "id": "DEV_1_P0",
                    "context": "竹编灯是指用细竹条编成骨架、外糊彩纸的传统手工灯具。",
                    "qas": [
                        {
                            "id": "DEV_1_Q0",
                            "question": "竹编灯是什么？",
                            "answers": [{"text": "外糊彩纸的传统手工灯具", "answer_start": 14}],
                        },
                    ],
                }
            ],
        },
    ],
}


def recording_model() -> TaskChatModel:
    """The project's per-task fake: every answer-writing prompt gets FAKE_REPLY; calls are recorded."""
    return TaskChatModel(replies={"generate": FAKE_REPLY, "chat": FAKE_REPLY})


def prompts_text(model: TaskChatModel) -> str:
    """Everything the model was shown, as one string."""
    return "\n".join(str(message.content) for _task, messages in model.calls for message in messages)


@pytest.fixture
def hotpot_file(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "hotpot_tiny.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in HOTPOT_RECORDS), encoding="utf-8")
    return path


@pytest.fixture
def cmrc_file(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "cmrc_tiny.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(CMRC_DOCUMENT, ensure_ascii=False), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------------------
# Datasets


def test_hotpotqa_jsonl_and_array_are_detected(hotpot_file: Path, tmp_path: Path) -> None:
    examples = load_qa_examples(hotpot_file)
    assert [example.qid for example in examples] == ["h1", "h2", "h3"]
    assert [example.kind for example in examples] == ["comparison", "bridge", "comparison"]
    assert examples[0].language == LANGUAGE_ENGLISH
    assert examples[1].supporting == {"Quarry Hollow (film)", "Mirela Voss"}
    as_array = tmp_path / "hotpot_array.json"
    as_array.write_text(json.dumps(HOTPOT_RECORDS), encoding="utf-8")
    assert [example.qid for example in load_qa_examples(as_array)] == ["h1", "h2", "h3"]


def test_cmrc_is_detected_as_chinese_squad(cmrc_file: Path) -> None:
    examples = load_qa_examples(cmrc_file)
    assert [example.qid for example in examples] == ["DEV_0_Q0", "DEV_0_Q1", "DEV_1_Q0"]
    assert {example.language for example in examples} == {LANGUAGE_CHINESE}
    assert examples[2].supporting == {"DEV_1_P0"} and examples[2].kind is None


def test_missing_dataset_and_bad_limit(tmp_path: Path, hotpot_file: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_qa_examples(tmp_path / "nope.json")
    examples = load_qa_examples(hotpot_file)
    assert [example.qid for example in select_examples(examples, 2)] == ["h1", "h2"]
    assert len(select_examples(examples, None)) == 3
    with pytest.raises(ValueError):
        select_examples(examples, 0)


# --------------------------------------------------------------------------------------------------------
# Scoring and aggregation


def _example(
    supporting: set[str], passages: tuple[str, ...] = ("A", "B", "C"), kind: str | None = "bridge"
) -> QAExample:
    return QAExample(
        qid="x",
        question="Who?",
        answers=["Paris"],
        passages=[Passage(pid, pid, f"text {pid}") for pid in passages],
        supporting=supporting,
        kind=kind,
        language=LANGUAGE_ENGLISH,
    )


def test_the_gold_filter_reads_gold_paragraphs_else_the_context_and_names_a_question_without() -> None:
    assert gold_filter(_example({"B", "Q"})) == {"doc_id": {"$in": ["B"]}}  # Q is not in the file
    assert gold_filter(_example(set(), passages=("P",))) == {"doc_id": {"$in": ["P"]}}  # a SQuAD paragraph
    with pytest.raises(ValueError, match="question x: the file gives it no gold paragraph"):
        gold_filter(_example({"B"}, passages=()))


def test_question_record_ranks_unique_doc_ids_and_scores_support_and_citations() -> None:
    result = {
        "answer": "Paris [1].",
        "sources": [{"doc_id": d} for d in ("Z", "A", "Z", "Y", "X", "W", "B")],  # B is 6th unique
        "citations": [{"doc_id": "A"}, {"doc_id": "Z"}, {"doc_id": "A"}],
        "not_found": False,
        "llm_calls": 2,
        "usage": {"prompt_tokens": 100.0, "completion_tokens": 7.0},
        "strategy": "ITERATIVE",
        "timings_ms": {"generate": 12.345, "model": 10.0},
    }
    record = question_record(_example({"A", "B"}), result, latency_s=1.23456)
    assert record["retrieved"] == ["Z", "A", "Y", "X", "W", "B"]
    assert record[SUPPORT_RECALL_KEY] == 0.5  # A within the first five unique ids, B is not
    assert record["cited"] == ["A", "Z"] and record["citation_precision"] == 0.5
    assert record["em"] == 1.0 and record["f1"] == 1.0
    assert (record["llm_calls"], record["prompt_tokens"], record["completion_tokens"]) == (2, 100, 7)
    assert record["latency_s"] == 1.235 and record["timings_ms"]["generate"] == 12.35
    assert record["strategy"] == "ITERATIVE" and record["kind"] == "bridge"


def test_support_metrics_are_undefined_without_a_gold_passage_in_the_corpus() -> None:
    example = _example({"Missing"})
    result = {"answer": "x", "sources": [{"doc_id": "A"}], "citations": [{"doc_id": "A"}]}
    record = question_record(example, result, latency_s=0.1)
    assert record[SUPPORT_RECALL_KEY] is None and record["citation_precision"] is None
    # known to the pooled corpus (another question's paragraph): defined again
    pooled = question_record(example, result, latency_s=0.1, in_corpus={"A", "Missing"})
    assert pooled[SUPPORT_RECALL_KEY] == 0.0 and pooled["citation_precision"] == 0.0
    uncited = question_record(_example({"A"}), {"answer": "x", "sources": []}, latency_s=0.1)
    assert uncited["citation_precision"] is None and uncited[SUPPORT_RECALL_KEY] == 0.0


def test_the_run_counts_not_found_reasons_and_the_declines_that_held_a_right_answer() -> None:
    def declined(short: str, reason: str) -> dict[str, Any]:
        return {
            **_judged(short, "not_found", 0.1, not_found=True, not_found_reason=reason),
            "answer": NOT_FOUND_EN,
        }

    # the engine's short answer held the gold "Paris" but was declined: a right answer thrown away
    wrong_decline = question_record(_example(set()), declined("Paris", REASON_MISSING_ANCHORS), latency_s=1.0)
    assert wrong_decline["candidate_right"] == 1.0 and wrong_decline["contains_gold"] == 0.0
    right_decline = question_record(_example(set()), declined("Lyon", REASON_MISSING_ANCHORS), latency_s=1.0)
    assert right_decline["candidate_right"] == 0.0
    model_record = question_record(_example(set()), declined("", REASON_READER_DECLINED), latency_s=1.0)
    answered = question_record(
        _example(set()), _judged("Paris", "confident", 0.9, answer="Paris [1]."), latency_s=1.0
    )
    # written before records named a reason or kept the judgement (and with the fields of that time)
    legacy = {**_record(), "not_found": True, "declined_answer": "Paris.", "candidate_contains_gold": 1.0}
    for old in ("declined_answer", "declined_contains_gold", "answer_confidence", "candidate_contains_gold"):
        assert old not in wrong_decline
    report = aggregate([wrong_decline, right_decline, model_record, answered, legacy])
    assert report["not_found"] == {
        "reasons": {REASON_MISSING_ANCHORS: 2, REASON_READER_DECLINED: 1, UNRECORDED_REASON: 1}
    }
    # four declines; only the first held a right short answer (the legacy record has no candidate_right)
    assert (report["answerability"]["declines"], report["answerability"]["declines_with_gold"]) == (4, 1)
    assert report["answerability"]["declines_with_gold_share"] == 0.25


def _judged(short: str, band: str, confidence: float, **extra: Any) -> dict[str, Any]:
    """An output state judged by the answering package: its record's short answer and signals."""
    record = {"short_answer": short, "signals": {"reader_logprob": -0.25, "support": 1}}
    return {"band": band, "confidence": confidence, "answer_record": record, **extra}


def test_records_keep_the_judgement_and_whether_the_candidate_short_answer_was_right() -> None:
    # tentative: nothing bold was shown, yet the engine's short answer held the gold one
    tentative = _judged("Paris [1]", "tentative", 0.41237, answer="Not sure — ... Paris is the capital [1]")
    record = question_record(_example(set()), tentative, latency_s=1.0)
    assert record["band"] == "tentative" and record["confidence"] == 0.4124
    assert record["candidate_short_answer"] == "Paris [1]" and record["candidate_right"] == 1.0
    assert record["signals"] == {"reader_logprob": -0.25, "support": 1.0}
    wrong = question_record(_example(set()), _judged("Lyon", "confident", 0.9), latency_s=1.0)
    assert wrong["candidate_right"] == 0.0 and wrong["band"] == "confident"
    # "Parisian" does not hold "Paris" as a token: the same containment as short_contains_gold
    assert (
        question_record(_example(set()), _judged("Parisian", "confident", 0.9), latency_s=1.0)[
            "candidate_right"
        ]
        == 0.0
    )
    unanswerable = QAExample(
        "u", "Who?", [], [], set(), kind=None, answerable=False, language=LANGUAGE_ENGLISH
    )
    declined = _judged("Paris", "not_found", 0.05, not_found=True, not_found_reason="no passage mentions X")
    assert question_record(unanswerable, declined, latency_s=1.0)["candidate_right"] == 0.0
    unjudged = question_record(_example(set()), {"answer": "Paris [1]."}, latency_s=1.0)
    assert unjudged["confidence"] is None and unjudged["band"] is None
    assert unjudged["candidate_short_answer"] == "" and unjudged["candidate_right"] == 0.0
    assert unjudged["signals"] == {}
    failed = error_record(_example(set()), RuntimeError("boom"), latency_s=0.1)
    assert failed["band"] is None and failed["candidate_right"] == 0.0 and failed["signals"] == {}


def test_the_report_counts_each_band_and_measures_the_confidence() -> None:
    unanswerable = QAExample(
        "u", "Who?", [], [], set(), kind=None, answerable=False, language=LANGUAGE_ENGLISH
    )
    records = [
        question_record(_example(set()), _judged("Paris", "confident", 0.9), latency_s=1.0),
        question_record(_example(set()), _judged("Lyon", "confident", 0.8), latency_s=1.0),
        question_record(_example(set()), _judged("Paris", "tentative", 0.4), latency_s=1.0),
        question_record(
            unanswerable,
            _judged("Nice", "not_found", 0.1, not_found=True, not_found_reason="x"),
            latency_s=1.0,
        ),
        question_record(_example(set()), {"answer": "Paris [1]."}, latency_s=1.0),  # no judgement
    ]
    judgement = aggregate(records)["judgement"]
    assert judgement["by_band"] == {
        "confident": {"n": 2, "right": 1, "unanswerable": 0},
        "tentative": {"n": 1, "right": 1, "unanswerable": 0},
        "not_found": {"n": 1, "right": 0, "unanswerable": 1},
        "unrecorded": {"n": 1, "right": 0, "unanswerable": 0},
    }
    # confidences 0.9 (right), 0.8 (wrong), 0.4 (right), 0.1 (wrong): pairs right > wrong are
    # (0.9, 0.8), (0.9, 0.1), (0.4, 0.1) of 4, so AUROC = 3/4
    assert judgement["confidence_records"] == 4 and judgement["confidence_auroc"] == 0.75
    # one record per bin: |0.9 - 1| + |0.8 - 0| + |0.4 - 1| + |0.1 - 0| over 4 = 1.6 / 4
    assert judgement["confidence_ece"] == 0.4
    all_right = aggregate(records[:1])["judgement"]
    assert all_right["confidence_auroc"] is None  # one class only: no ranking to judge
    assert all_right["confidence_ece"] == 0.1


def _record(**fields: Any) -> dict[str, Any]:
    base = {
        "em": 0.0,
        "f1": 0.0,
        SUPPORT_RECALL_KEY: None,
        "citation_precision": None,
        "cited": [],
        "not_found": False,
        "llm_calls": 1,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": 1.0,
        "strategy": "DIRECT",
        "kind": None,
        "timings_ms": {},
    }
    return {**base, **fields}


def test_aggregate_means_rates_percentiles_and_breakdowns() -> None:
    records = [
        _record(
            em=1.0,
            f1=1.0,
            **{SUPPORT_RECALL_KEY: 1.0},
            citation_precision=1.0,
            cited=["A"],
            llm_calls=2,
            prompt_tokens=100,
            completion_tokens=10,
            latency_s=1.0,
            strategy="ITERATIVE",
            kind="bridge",
            timings_ms={"generate": 100.0, "model": 90.0},
        ),
        _record(
            em=0.0,
            f1=0.5,
            **{SUPPORT_RECALL_KEY: 0.5},
            citation_precision=0.0,
            cited=["B"],
            llm_calls=4,
            prompt_tokens=300,
            completion_tokens=30,
            latency_s=3.0,
            strategy="HYBRID",
            kind="comparison",
            timings_ms={"generate": 300.0, "retrieve": 50.0},
        ),
        _record(
            em=0.0,
            f1=0.0,
            not_found=True,
            llm_calls=1,
            prompt_tokens=50,
            completion_tokens=5,
            latency_s=2.0,
            strategy="ITERATIVE",
            kind="bridge",
        ),
        _record(
            em=0.0,
            f1=0.0,
            **{SUPPORT_RECALL_KEY: 0.0},
            llm_calls=0,
            latency_s=0.1,
            strategy=None,
            kind="bridge",
            error="RuntimeError: boom",
        ),
    ]
    report = aggregate(records)
    assert report["n"] == 4 and report["errors"] == 1
    assert report["em"] == 0.25 and report["f1"] == 0.375
    assert report[SUPPORT_RECALL_KEY] == 0.5  # (1 + 0.5 + 0) / 3: None left out, the failure counts 0
    assert report["citation_precision"] == 0.5 and report["citation_rate"] == round(2 / 3, 4)
    assert report["not_found_rate"] == 0.25
    # cost and latency over the three answered questions
    assert report["llm_calls_per_question"] == round(7 / 3, 2)
    assert report["tokens_per_question"] == round((110 + 330 + 55) / 3, 1)
    assert report["latency_p50_s"] == 2.0 and report["latency_mean_s"] == 2.0
    assert report["per_node_ms"] == {"generate": round(400 / 3, 2), "retrieve": round(50 / 3, 2)}
    assert set(report["by_strategy"]) == {"ITERATIVE", "HYBRID", "NONE"}
    iterative = report["by_strategy"]["ITERATIVE"]
    assert {key: iterative[key] for key in ("n", "em", "f1", "llm_calls", SUPPORT_RECALL_KEY)} == {
        "n": 2,
        "em": 0.5,
        "f1": 0.5,
        "llm_calls": 1.5,
        SUPPORT_RECALL_KEY: 1.0,
    }
    assert report["by_type"]["bridge"]["n"] == 3 and report["by_type"]["comparison"]["f1"] == 0.5


def test_aggregate_without_types_has_an_empty_type_breakdown() -> None:
    report = aggregate([_record(f1=1.0, em=1.0)])
    assert report["by_type"] == {} and report["by_strategy"]["DIRECT"]["n"] == 1


def test_error_record_scores_an_empty_prediction() -> None:
    record = error_record(_example({"A"}), RuntimeError("boom"), latency_s=0.5)
    assert record["error"] == "RuntimeError: boom" and record["prediction"] == ""
    assert record["em"] == 0.0 and record[SUPPORT_RECALL_KEY] == 0.0 and record["citation_precision"] is None


def test_a_json_report_names_its_command_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.cli.common import write_json_report

    monkeypatch.setattr(sys, "argv", ["/venv/bin/rag", "eval", "qa", "--limit", "5", "--dataset", "a b.json"])
    monkeypatch.setenv("RAG_CACHE_ENABLED", "false")
    monkeypatch.setenv("RAG_OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("RAG_DATABASE_URL", "postgresql://user:pw@db/rag")
    path = tmp_path / "report.json"
    write_json_report(path, {"n": 5})
    written = json.loads(path.read_text())
    assert written["n"] == 5
    assert "RAG_CACHE_ENABLED=false" in written["command"]
    assert written["command"].endswith("rag eval qa --limit 5 --dataset 'a b.json'")
    assert "sk-secret-value" not in written["command"] and "pw@db" not in written["command"]
    # a report that already says how it was made keeps its own command
    write_json_report(path, {"n": 1, "command": "bash benchmarks/qa_campaign.sh"})
    assert json.loads(path.read_text())["command"] == "bash benchmarks/qa_campaign.sh"


def test_records_file_survives_a_cut_off_last_line(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "r.jsonl"
    append_record(path, {"qid": "a", "em": 1.0})
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"qid": "b", "em"')  # killed mid-write
    append_record(path, {"qid": "c", "em": 0.0})
    assert set(read_records(path)) == {"a", "c"}
    assert read_records(tmp_path / "absent.jsonl") == {}


# --------------------------------------------------------------------------------------------------------
# Runs with fake models


def test_every_pipeline_runs_with_fake_models(hotpot_file: Path, settings: Settings, tmp_path: Path) -> None:
    for pipeline in PIPELINES:
        model = recording_model()
        report = run_qa_eval(
            hotpot_file,
            settings,
            pipeline=pipeline,
            results_path=tmp_path / f"{pipeline}.jsonl",
            resources=fake_resources_factory(model),
        )
        assert REQUIRED_REPORT_KEYS <= set(report)
        assert report["n"] == 3 and report["errors"] == 0 and report["pipeline"] == pipeline
        assert report["llm_calls_per_question"] >= 1 and report["latency_p50_s"] > 0
        assert set(report["by_type"]) == {"bridge", "comparison"}
        records = [json.loads(line) for line in (tmp_path / f"{pipeline}.jsonl").read_text().splitlines()]
        assert [record["qid"] for record in records] == ["h1", "h2", "h3"]
        judged_keys = {"confidence", "band", "candidate_short_answer", "candidate_right", "signals"}
        assert all(judged_keys <= set(record) for record in records)
        assert all(record["candidate_right"] in (0.0, 1.0) for record in records)
        assert set(report["judgement"]["by_band"]) <= {"confident", "tentative", "not_found", "unrecorded"}
        assert sum(band["n"] for band in report["judgement"]["by_band"].values()) == 3
        if pipeline == "no-retrieval":
            assert all(record["retrieved"] == [] for record in records)
        else:
            # the pooled corpus holds all 7 paragraphs; fake embeddings + BM25 still find gold ones
            assert report["corpus_passages"] == 7 and report[SUPPORT_RECALL_KEY] > 0
    # one index for the three runs: the corpus is keyed by the questions, so it is reused
    indexes = [path for path in (settings.data_dir / "eval").iterdir() if path.is_dir()]
    assert len(indexes) == 1


def test_the_gold_pipeline_reads_only_the_questions_gold_paragraphs(
    hotpot_file: Path, settings: Settings, tmp_path: Path
) -> None:
    """The reader's ceiling: the same naive graph and model, searching only the gold paragraphs."""
    run_qa_eval(
        hotpot_file,
        settings,
        pipeline="gold",
        pool="all",
        results_path=tmp_path / "gold.jsonl",
        resources=fake_resources_factory(recording_model()),
    )
    gold = {example.qid: example.supporting_available for example in load_qa_examples(hotpot_file)}
    records = [json.loads(line) for line in (tmp_path / "gold.jsonl").read_text().splitlines()]
    for record in records:
        assert record["retrieved"] and set(record["retrieved"]) <= gold[record["qid"]], record["qid"]


def test_the_pool_sets_the_corpus_apart_from_the_answered_questions(
    hotpot_file: Path, settings: Settings, tmp_path: Path
) -> None:
    examples = load_qa_examples(hotpot_file)
    first = select_examples(examples, 1)
    assert pool_examples(examples, first, None) == first
    assert pool_examples(examples, first, 2) == examples[:2]
    assert pool_examples(examples, select_examples(examples, 2), 1) == examples[:2]  # never fewer
    assert select_examples(examples, 1, skip=2) == examples[2:]
    assert pool_examples(examples, select_examples(examples, 1, skip=2), 1) == [examples[0], examples[2]]
    with pytest.raises(ValueError, match="--skip"):
        select_examples(examples, 1, skip=-1)
    assert pool_examples(examples, first, "all") == examples
    with pytest.raises(ValueError, match="--pool"):
        pool_examples(examples, first, 0)
    results = tmp_path / "naive.jsonl"
    reports = [
        run_qa_eval(
            hotpot_file,
            settings,
            pipeline="naive",
            limit=limit,
            pool="all",
            results_path=results,
            resources=fake_resources_factory(recording_model()),
        )
        for limit in (1, 2)
    ]
    # one question answered over every question's paragraphs, then a second one over the same index
    assert [report["n"] for report in reports] == [1, 2] and reports[1]["resumed"] == 1
    assert {report["corpus_passages"] for report in reports} == {7}
    assert {report["pool_questions"] for report in reports} == {3}
    assert len([path for path in (settings.data_dir / "eval").iterdir() if path.is_dir()]) == 1


@pytest.mark.parametrize("pool", ["0", "some", "-3"])
def test_the_cli_names_a_bad_pool(hotpot_file: Path, pool: str) -> None:
    from typer.testing import CliRunner

    from service.cli import app

    arguments = ["eval", "qa", "--dataset", str(hotpot_file), "--pipeline", "naive", "--pool", pool]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 2 and "--pool" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--split", "train", "unknown split 'train'; choose one of dev, test, all"),
        ("--pipeline", "magic", "unknown pipeline 'magic'"),
        ("--limit", "0", "--limit must be at least 1, got 0"),
    ],
)
def test_the_cli_names_a_bad_split_pipeline_or_limit(
    hotpot_file: Path, option: str, value: str, message: str
) -> None:
    from typer.testing import CliRunner

    from service.cli import app

    options = {"--dataset": str(hotpot_file), "--pipeline": "naive", option: value}
    result = CliRunner().invoke(app, ["eval", "qa", *[part for pair in options.items() for part in pair]])
    assert result.exit_code == 2 and message in " ".join(result.output.split())
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_run_resumes_without_rerunning_recorded_questions(
    hotpot_file: Path, settings: Settings, tmp_path: Path
) -> None:
    results = tmp_path / "naive.jsonl"
    earlier = _record(qid="h2", em=1.0, f1=1.0, llm_calls=5, strategy="NAIVE", kind="bridge")
    append_record(results, earlier)
    model = recording_model()
    report = run_qa_eval(
        hotpot_file, settings, pipeline="naive", results_path=results, resources=fake_resources_factory(model)
    )
    assert report["n"] == 3 and report["resumed"] == 1
    assert model.tasks() == ["generate", "generate"]  # the naive graph: one call per question
    assert HOTPOT_RECORDS[1]["question"] not in prompts_text(model)
    assert HOTPOT_RECORDS[0]["question"] in prompts_text(model)
    assert [json.loads(line)["qid"] for line in results.read_text().splitlines()] == ["h2", "h1", "h3"]
    assert report["by_strategy"]["NAIVE"]["n"] == 3
    # the new records name the commit and the load they ran under; the old one is counted as unrecorded
    stamped = read_records(results)
    assert "code_commit" not in stamped["h2"]
    assert {stamped[qid]["code_commit"] for qid in ("h1", "h3")} == {code_commit()}
    assert all(isinstance(stamped[qid]["load_1m"], float) for qid in ("h1", "h3"))
    assert report["code_commits"] == {code_commit(): 2, UNRECORDED_COMMIT: 1}
    load = report["machine_load"]
    assert load["questions_measured"] == 2 and load["load_1m_max"] >= load["load_1m_median"] >= 0
    # a second run has nothing left to do
    again = recording_model()
    rerun = run_qa_eval(
        hotpot_file, settings, pipeline="naive", results_path=results, resources=fake_resources_factory(again)
    )
    assert again.calls == [] and rerun["resumed"] == 3 and rerun["f1"] == report["f1"]


def test_a_failing_question_is_recorded_and_the_run_goes_on(
    hotpot_file: Path, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Session.ask

    def flaky(self: Session, question: str, **kwargs: Any) -> dict[str, Any]:
        if "Quarry Hollow" in question:
            raise RuntimeError("boom")
        return original(self, question, **kwargs)

    monkeypatch.setattr(Session, "ask", flaky)
    results = tmp_path / "agentic.jsonl"
    report = run_qa_eval(
        hotpot_file,
        settings,
        pipeline="agentic",
        results_path=results,
        resources=fake_resources_factory(recording_model()),
    )
    assert report["n"] == 3 and report["errors"] == 1
    records = read_records(results)
    assert records["h2"]["error"] == "RuntimeError: boom" and records["h2"]["prediction"] == ""
    assert "error" not in records["h1"] and "error" not in records["h3"]
    # a rerun retries only the failed question
    monkeypatch.setattr(Session, "ask", original)
    model = recording_model()
    rerun = run_qa_eval(
        hotpot_file,
        settings,
        pipeline="agentic",
        results_path=results,
        resources=fake_resources_factory(model),
    )
    assert rerun["errors"] == 0 and rerun["resumed"] == 2
    asked = prompts_text(model)
    assert HOTPOT_RECORDS[1]["question"] in asked and HOTPOT_RECORDS[0]["question"] not in asked


def test_chinese_dataset_runs_with_fake_models(cmrc_file: Path, settings: Settings, tmp_path: Path) -> None:
    report = run_qa_eval(
        cmrc_file,
        settings,
        pipeline="naive",
        results_path=tmp_path / "cmrc.jsonl",
        resources=fake_resources_factory(recording_model()),
    )
    assert report["n"] == 3 and report["by_type"] == {} and report["corpus_passages"] == 2
    assert report[SUPPORT_RECALL_KEY] is not None


def _squad2_mixed_document(qids: list[str]) -> dict[str, Any]:
    """Invented SQuAD 2.0 text: one paragraph, every other question unanswerable (is_impossible)."""
    context = "The Harrow canal opened in 1911; its first barge carried slate."
    qas = [
        {
            "id": qid,
            "question": f"What did the first Harrow barge carry ({qid})?",
            "answers": [{"text": "slate"}],
        }
        if position % 2 == 0
        else {
            "id": qid,
            "question": f"Who closed the Harrow canal ({qid})?",
            "answers": [],
            "plausible_answers": [{"text": "1911"}],
            "is_impossible": True,
        }
        for position, qid in enumerate(qids)
    ]
    return {
        "version": "v2.0",
        "data": [{"title": "Harrow", "paragraphs": [{"context": context, "qas": qas}]}],
    }


def test_a_split_run_answers_only_its_half_and_records_answerability(
    settings: Settings, tmp_path: Path
) -> None:
    qids = [f"harrow-{index}" for index in range(8)]
    path = tmp_path / "squad2_tiny.json"
    path.write_text(json.dumps(_squad2_mixed_document(qids)), encoding="utf-8")
    # the documented rule: development half = even first byte of SHA-256(id)
    dev = [qid for qid in qids if hashlib.sha256(qid.encode()).digest()[0] % 2 == 0]
    assert 0 < len(dev) < len(qids)  # the fixture's ids fall in both halves
    results = tmp_path / "dev.jsonl"
    report = run_qa_eval(
        path,
        settings,
        pipeline="no-retrieval",
        split="dev",
        results_path=results,
        resources=fake_resources_factory(recording_model()),
    )
    records = read_records(results)
    assert list(records) == dev and report["n"] == len(dev) and report["split"] == "dev"
    for qid, record in records.items():
        assert record["answerable"] is (qids.index(qid) % 2 == 0)
        assert "candidate_right" in record and "confidence" in record
    limited = run_qa_eval(
        path,
        settings,
        pipeline="no-retrieval",
        split="test",
        limit=1,
        results_path=tmp_path / "test.jsonl",
        resources=fake_resources_factory(recording_model()),
    )
    first_test = next(qid for qid in qids if qid not in dev)
    assert list(read_records(tmp_path / "test.jsonl")) == [first_test] and limited["n"] == 1


def test_unknown_pipeline_is_refused(hotpot_file: Path, settings: Settings) -> None:
    with pytest.raises(ValueError, match="unknown pipeline"):
        run_qa_eval(hotpot_file, settings, pipeline="fancy")


# --------------------------------------------------------------------------------------------------------
# Real models (slow)


@pytest.mark.slow
def test_smoke_run_of_each_pipeline_with_the_real_models(
    hotpot_file: Path, settings: Settings, tmp_path: Path
) -> None:
    """Embedded default model + MiniLM, one question per pipeline: the structure, not the quality (the
    fake-model tests above cover several questions, resuming and the aggregates)."""
    for pipeline in PIPELINES:
        report = run_qa_eval(
            hotpot_file, settings, pipeline=pipeline, limit=1, results_path=tmp_path / f"{pipeline}.jsonl"
        )
        assert REQUIRED_REPORT_KEYS <= set(report)
        assert report["n"] == 1 and report["errors"] == 0
        assert report["llm_calls_per_question"] >= 1
        assert report["latency_p50_s"] > 0
        records = read_records(tmp_path / f"{pipeline}.jsonl")
        assert all(record["llm_calls"] >= 1 and record["latency_s"] > 0 for record in records.values())


def test_records_of_another_model_are_run_again(
    hotpot_file: Path, settings: Settings, tmp_path: Path
) -> None:
    results = tmp_path / "naive.jsonl"
    append_record(results, _record(qid="h1", em=1.0, f1=1.0, kind="comparison", model="some-other-model"))
    model = recording_model()
    report = run_qa_eval(
        hotpot_file, settings, pipeline="naive", results_path=results, resources=fake_resources_factory(model)
    )
    assert report["resumed"] == 0 and len(model.calls) == 3
    assert read_records(results)["h1"]["model"] == report["model"] != "some-other-model"


@pytest.mark.parametrize(
    ("prediction", "golds", "accurate"),
    [
        ("The bridge opened in 1931 [1].", ["1931"], 1.0),
        ("It opened in 19310.", ["1931"], 0.0),  # token boundaries, not substrings
        ("The Velmar Bridge", ["Velmar Bridge", "the bridge"], 1.0),
        ("Velmar", ["Velmar Bridge"], 0.0),  # the whole gold answer must be there
        ("青石桥建于1931年。", ["1931年"], 1.0),
        ("", [], 1.0),  # unanswerable: only the empty answer is right
        ("1931", [], 0.0),
    ],
)
def test_answer_accuracy_is_gold_contained(prediction: str, golds: list[str], accurate: float) -> None:
    assert contains_gold_answer(prediction, golds) == accurate


def test_answer_scores_on_the_answer_and_on_its_short_answer() -> None:
    scores = answer_scores(
        "Velmar Bridge\n\nThe Velmar Bridge opened in 1931 [1].", "Velmar Bridge", ["Velmar Bridge"]
    )
    assert (scores["short_em"], scores["short_f1"], scores["short_contains_gold"]) == (1.0, 1.0, 1.0)
    assert scores["em"] == 0.0 and scores["contains_gold"] == 1.0 and 0.0 < scores["f1"] < 1.0
    # Without a short answer the answer itself is scored as the short one.
    assert answer_scores("1931 [1]", "", ["1931"])["short_em"] == 1.0


def test_records_before_short_answers_are_rescored_from_their_prediction() -> None:
    old = {"prediction": "It opened in 1931 [1].", "answers": ["1931"], "em": 0.0, "f1": 0.5}
    means = score_means([old])
    assert means["em"] == 0.0 and means["f1"] == 0.5  # the record's own scores are kept
    assert means["contains_gold"] == 1.0 and means["short_contains_gold"] == 1.0 and means["short_em"] == 0.0


# --- ROUGE-L, against hand-computed values ---------------------------------------------------------------


def test_rouge_l_of_the_answer_and_of_its_short_answer_by_hand() -> None:
    # "the" is dropped by normalisation: velmar bridge opened in 1931 (5 tokens) against velmar bridge
    # opened 1931 (4): LCS 4, precision 4/5, recall 1, F = 2 * 0.8 / 1.8 = 8/9
    scores = answer_scores("The Velmar Bridge opened in 1931 [1].", "1931", ["Velmar Bridge opened 1931"])
    assert scores["rouge_l"] == round(8 / 9, 4)
    # the short answer "1931" against the same gold: LCS 1, precision 1, recall 1/4, F = 2 * 0.25 / 1.25 = 0.4
    assert scores["short_rouge_l"] == 0.4
    # order matters, unlike F1: "opened bridge velmar" shares all 3 tokens but an LCS of 1 (F = 1/3)
    reversed_order = answer_scores("opened bridge velmar", "", ["velmar bridge opened"])
    assert reversed_order["f1"] == 1.0 and reversed_order["rouge_l"] == round(1 / 3, 4)


def test_rouge_l_uses_characters_as_tokens_for_chinese() -> None:
    # 青 石 桥 建 于 1931 年 (7 tokens; the digits stay one token) against 1931 年 建 成 (4): the LCS is
    # "1931 年" (2), precision 2/7, recall 2/4, F = 2 * (2/7) * (1/2) / (2/7 + 1/2) = 4/11
    assert answer_scores("青石桥建于1931年。", "", ["1931年建成"])["rouge_l"] == round(4 / 11, 4)
    # several gold answers: the best one counts
    assert answer_scores("北京大学", "", ["大学北京", "北京大学"])["rouge_l"] == 1.0


def test_records_and_the_report_carry_rouge_l() -> None:
    example = _example({"A"})  # gold answer "Paris"
    record = question_record(example, {"answer": "It is Paris [1].", "short_answer": "Paris"}, latency_s=1.0)
    # it is paris (3 tokens) against paris: LCS 1, precision 1/3, recall 1, F = 0.5
    assert (record["rouge_l"], record["short_rouge_l"]) == (0.5, 1.0)
    unanswerable = QAExample(
        qid="u",
        question="Who?",
        answers=[],
        passages=[],
        supporting=set(),
        kind=None,
        language=LANGUAGE_ENGLISH,
        answerable=False,
    )
    declined = question_record(unanswerable, {"answer": NOT_FOUND_EN, "not_found": True}, latency_s=1.0)
    assert declined["rouge_l"] == declined["short_rouge_l"] == 1.0  # declining is the right answer there
    # records written before ROUGE-L get it from their prediction; an unanswerable one its declined score
    old = {"prediction": "Paris", "answers": ["Paris"], "em": 1.0, "f1": 1.0}
    old_declined = {"prediction": NOT_FOUND_EN, "answers": [], "answerable": False, "not_found": True}
    report = aggregate([{**_record(), **record, "strategy": "HYBRID"}, {**_record(), **old}])
    assert report["rouge_l"] == 0.75 and report["short_rouge_l"] == 1.0  # (0.5 + 1) / 2, (1 + 1) / 2
    assert report["by_strategy"]["HYBRID"]["rouge_l"] == 0.5
    assert score_means([old_declined])["rouge_l"] == 1.0


def test_the_cli_summary_shows_rouge_l(
    tmp_path: Path, hotpot_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import evals.qa
    from service.cli import app

    records = [_record(prediction="It is Paris", answers=["Paris"], strategy="HYBRID")]
    report = {
        **aggregate(records),
        **{"dataset": "hotpotqa", "pipeline": "naive", "model": "fake", "resumed": 0},
        "results_file": str(tmp_path / "r.jsonl"),
    }
    monkeypatch.setattr(evals.qa, "run_qa_eval", lambda *args, **kwargs: report)
    out = tmp_path / "report.json"
    arguments = ["eval", "qa", "--dataset", str(hotpot_file), "--pipeline", "naive", "--json", str(out)]
    result = CliRunner().invoke(app, arguments, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "ROUGE-L" in result.stdout and "0.500" in result.stdout  # it is paris vs paris: F = 0.5
    assert "HYBRID: n 1" in result.stdout and "ROUGE-L 0.500" in result.stdout
    assert json.loads(out.read_text())["rouge_l"] == 0.5
    # a record without a judgement: counted apart, and no AUROC without confidences
    assert "bands: unrecorded 1 (0 right, 0 unanswerable); confidence AUROC -" in result.stdout


def test_records_and_reports_written_as_accuracy_read_as_contains_gold() -> None:
    """Older files call the gold containment "accuracy": an old
    record's scores are read under the current names, nothing recomputed, and the aggregate uses them."""
    old = {"qid": "q", "answers": ["Paris"], "prediction": "It is Lyon.", "short_answer": "Lyon"}
    old |= {"em": 0.0, "f1": 0.0, "accuracy": 1.0, "rouge_l": 0.0, "short_em": 0.0, "short_f1": 0.0}
    old |= {"short_accuracy": 1.0, "short_rouge_l": 0.0, "candidate_accuracy": 1.0, "declined_accuracy": None}
    old |= {"not_found": False, "llm_calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 1.0}
    # Recomputed, "It is Lyon." would not contain "Paris": 1.0 can only come from the file.
    assert score_means([old])["contains_gold"] == 1.0 and score_means([old])["short_contains_gold"] == 1.0
    report = aggregate([old])
    assert "accuracy" not in report and report["answerability"]["answerable_contains_gold"] == 1.0
