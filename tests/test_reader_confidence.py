"""The gold-paragraph reading campaign (benchmarks/reader_confidence.py): the request it sends, the record it
writes for each kind of reply, and that its confidence ranks the records. A fake server stands in for
llama.cpp; every expected number is worked out by hand beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.reader_confidence import read_messages, read_record, reply_logprobs, run_reader_confidence
from evals.datasets import LANGUAGE_ENGLISH, Passage, QAExample
from evals.metrics import auroc
from nodes.focused_read import FOCUSED_READ_MAX_TOKENS
from prompts.answer import FOCUSED_READ_SYSTEM


def _example(qid: str, answers: list[str]) -> QAExample:
    return QAExample(
        qid=qid,
        question="Who repainted the tower?",
        answers=answers,
        passages=[
            Passage("D", "Harbour", "The harbour wall is older than the town."),
            Passage("G", "Tower", "Ilsa Marrow repainted the tower in 1911."),
        ],
        supporting={"G"},
        kind=None,
        language=LANGUAGE_ENGLISH,
        answerable=bool(answers),
    )


def _payload(reply: str, logprobs: list[float]) -> dict[str, Any]:
    content = [{"token": f"t{index}", "logprob": value} for index, value in enumerate(logprobs)]
    return {
        "choices": [{"message": {"content": reply}, "logprobs": {"content": content}}],
        "usage": {"prompt_tokens": 42},
    }


def test_the_request_holds_only_the_gold_paragraph_and_the_engine_prompt() -> None:
    messages = read_messages(_example("q", ["Ilsa Marrow"]))
    assert messages[0] == {"role": "system", "content": FOCUSED_READ_SYSTEM}
    assert "Ilsa Marrow repainted the tower" in messages[1]["content"]
    assert "harbour wall" not in messages[1]["content"]  # the distractor paragraph is not read
    assert messages[1]["content"].startswith("Passage: Tower:")
    assert messages[1]["content"].endswith("Question: Who repainted the tower?")


def test_a_right_reply_is_a_correct_candidate_with_its_mean_log_probability() -> None:
    record = read_record(_example("q", ["Ilsa Marrow"]), "Ilsa Marrow", [-0.5, -0.1, -0.3], "m")
    assert record["candidate_contains_gold"] == 1.0
    assert record["not_found"] is False
    assert record["answer_confidence"] == pytest.approx(-0.3)  # (-0.5 - 0.1 - 0.3) / 3
    assert record["confidence_min"] == -0.5
    assert record["reply_tokens"] == 3


def test_a_none_reply_is_declined_at_every_threshold_and_holds_no_gold() -> None:
    record = read_record(_example("q", ["Ilsa Marrow"]), "None.", [-0.2], "m")
    assert record["not_found"] is True
    assert record["declined_answer"] == ""
    assert record["candidate_contains_gold"] == 0.0


def test_an_answer_to_an_unanswerable_question_is_a_wrong_candidate() -> None:
    record = read_record(_example("u", []), "Ilsa Marrow", [-0.01], "m")
    assert record["answerable"] is False
    assert record["not_found"] is False
    assert record["candidate_contains_gold"] == 0.0


def test_a_reply_without_log_probabilities_has_no_confidence() -> None:
    assert reply_logprobs({"choices": [{"message": {"content": "x"}}]}) == []
    assert read_record(_example("q", ["Ilsa Marrow"]), "Ilsa Marrow", [], "m")["answer_confidence"] is None


class _FakeBench:
    """Replies in turn; records what was asked."""

    def __init__(self, replies: list[tuple[str, list[float]]]) -> None:
        self.replies = list(replies)
        self.asked: list[tuple[list[dict[str, str]], int, bool]] = []

    def completion(
        self, messages: list[dict[str, str]], max_tokens: int, *, logprobs: bool = False
    ) -> tuple[dict[str, Any], float]:
        self.asked.append((messages, max_tokens, logprobs))
        reply, values = self.replies.pop(0)
        return _payload(reply, values), 0.5


def test_the_run_writes_records_whose_confidence_ranks_right_above_wrong(tmp_path: Path) -> None:
    # Two right answers given confidently, one wrong answer to an unanswerable question given with doubt, one
    # "none": the confident ones rank above the doubtful one, so AUROC is 1.0 over the three with a reply.
    examples = [_example("a1", ["Ilsa Marrow"]), _example("a2", ["1911"])]
    examples += [_example("u1", []), _example("u2", [])]
    bench = _FakeBench(
        [("Ilsa Marrow", [-0.1, -0.1]), ("1911", [-0.2]), ("Ilsa Marrow", [-1.5, -0.5]), ("none", [-0.3])]
    )
    path = tmp_path / "runs" / "reader.jsonl"
    records = run_reader_confidence("qwen2.5-coder-0.5b", bench, examples, path, lambda _line: None)  # type: ignore[arg-type]
    assert [asked[1:] for asked in bench.asked] == [(FOCUSED_READ_MAX_TOKENS, True)] * 4
    written = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert written == records
    assert [record["prompt_tokens"] for record in written] == [42] * 4
    replied = [record for record in written if not record["not_found"]]
    assert [record["qid"] for record in replied] == ["a1", "a2", "u1"]
    confidences = [record["answer_confidence"] for record in replied]
    assert confidences == [-0.1, -0.2, -1.0]  # the mean of each reply's log-probabilities
    assert auroc(confidences, [record["candidate_contains_gold"] for record in replied]) == 1.0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--model", "gpt-9"], "unknown model 'gpt-9'"),
        (["--split", "train"], "unknown split 'train'"),
        (["--dataset", "absent.json.gz"], "question file not found: absent.json.gz"),
    ],
)
def test_the_command_names_a_bad_option_before_loading_any_model(arguments: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from benchmarks.commands import app

    result = CliRunner().invoke(app, ["reader-confidence", *arguments])
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())
