"""The answer-quality table (benchmarks/answer_table.py): its columns, the split filter, uncounted usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.answer_table import HEADER, load_records, prompt_tokens_per_question, row, table
from evals.splits import split_of


def record(qid: str, **fields: Any) -> dict[str, Any]:
    base = {
        "qid": qid,
        "answerable": True,
        "contains_gold": 0.0,
        "short_contains_gold": 0.0,
        "not_found": False,
        "candidate_contains_gold": False,
        "llm_calls": 1,
        "prompt_tokens": 500,
        "latency_s": 2.0,
    }
    return {**base, **fields}


def test_a_model_call_without_a_count_is_left_out_of_the_prompt_tokens() -> None:
    records = [record("a", prompt_tokens=600), record("b", prompt_tokens=0), record("c", prompt_tokens=400)]
    assert prompt_tokens_per_question(records) == 500.0
    # a question answered without a model call read nothing: it counts as 0
    assert prompt_tokens_per_question([record("a"), record("b", llm_calls=0, prompt_tokens=0)]) == 250.0
    assert prompt_tokens_per_question([record("a", prompt_tokens=0)]) is None


def test_a_row_reads_answerable_and_unanswerable_questions_apart() -> None:
    records = [
        record("a", contains_gold=1.0, short_contains_gold=1.0, candidate_contains_gold=True),
        record("b", not_found=True, candidate_contains_gold=True),
        record("c", answerable=False, not_found=True),
        record("d", answerable=False, latency_s=4.0),
    ]
    cells = [cell.strip() for cell in row("run", records).strip("|").split("|")]
    assert len(cells) == HEADER.count("|") - 1
    assert cells == ["run", "4", "0.50 (2)", "0.50", "0.50", "0.50 (2)", "1/2", "1.00", "1.00", "500", "2.0"]


def test_the_split_keeps_one_half_of_the_questions(tmp_path: Path) -> None:
    qids = [f"q{number}" for number in range(12)]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(record(qid)) + "\n" for qid in qids), encoding="utf-8")
    test_half = [qid for qid in qids if split_of(qid) == "test"]
    assert 0 < len(test_half) < len(qids)
    assert [r["qid"] for r in load_records(path, "test")] == test_half
    assert len(load_records(path)) == len(qids)
    lines = table([path], "test")
    assert lines[0] == HEADER and lines[2].startswith(f"| run (test half) | {len(test_half)} |")


def test_records_without_the_withheld_answer_leave_the_decline_columns_empty() -> None:
    old = [
        {key: value for key, value in record("a", not_found=True).items() if key != "candidate_contains_gold"}
    ]
    cells = [cell.strip() for cell in row("old", old).strip("|").split("|")]
    assert cells[6:8] == ["–", "–"]


def test_judged_records_read_the_declines_from_the_short_answer_the_engine_had() -> None:
    def judged(qid: str, right: float, **fields: Any) -> dict[str, Any]:
        plain = {
            key: value for key, value in record(qid, **fields).items() if key != "candidate_contains_gold"
        }
        return {**plain, "candidate_right": right}

    records = [
        judged("a", 1.0, contains_gold=1.0),
        judged("b", 1.0, not_found=True),  # a right short answer declined
        judged("c", 0.0, not_found=True),
        # written while records kept both: the judged short answer decides
        {**judged("d", 0.0, not_found=True), "candidate_contains_gold": True},
    ]
    cells = [cell.strip() for cell in row("judged", records).strip("|").split("|")]
    # declines: b, c, d; only b held a right answer. Right before any decline: a and b of 4 answerable.
    assert cells[6:8] == ["1/3", "0.50"]
