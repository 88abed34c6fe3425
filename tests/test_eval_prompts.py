"""`python -m benchmarks prompts` (benchmarks/prompt_ablation.py) without a model server: the variants'
prompts and decoding, the passages of a question, scoring through the product's parser, and the summary.
Invented questions."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from benchmarks.prompt_ablation import (
    DEV_PASSAGES,
    SUMMARY_KEYS,
    VARIANTS,
    markdown_table,
    prompt_documents,
    question_record,
    summarize,
    system_prompt,
    variant_messages,
)
from evals.datasets import LANGUAGE_ENGLISH, Passage, QAExample
from prompts.answer import ANSWER_STOP_SEQUENCES, ANSWER_SYSTEM_PROMPTS
from state.context import Context
from tests.fakes import ScriptedChatModel

GOLD = Passage("p-gold", "Orrin Glassworks", "The Orrin Glassworks was founded in 1874 by Mara Velt.")
EXAMPLE = QAExample(
    qid="q1",
    question="Who founded the Orrin Glassworks?",
    answers=["Mara Velt"],
    passages=[Passage(f"p-{n}", f"Other {n}", f"Distractor text number {n}.") for n in range(6)] + [GOLD],
    supporting={"p-gold"},
    kind="bridge",
    language=LANGUAGE_ENGLISH,
)


class StopRecorder(ScriptedChatModel):
    """Records the stop sequences each call was made with."""

    stops: list[list[str] | None] = []

    def _generate(self, messages: Any, stop: list[str] | None = None, *args: Any, **kwargs: Any) -> Any:
        self.stops.append(stop)
        return super()._generate(messages, stop, *args, **kwargs)


class FakeBench:
    """Stands in for benchmarks.models.BenchServer: its chat model is a scripted one."""

    def __init__(self, reply: str) -> None:
        self.model = StopRecorder(messages=iter([AIMessage(reply)]), stops=[])

    def chat_model(self, max_tokens: int) -> StopRecorder:
        return self.model


def test_zero_shot_is_the_simple_prompt_without_its_worked_examples() -> None:
    simple = ANSWER_SYSTEM_PROMPTS[("simple", "en")]
    zero = system_prompt("zero-shot", "en")
    assert "Example:" in simple and "Example:" not in zero
    assert simple.startswith(zero) and "Answer:" in zero
    assert "示例" not in system_prompt("zero-shot", "zh")
    assert system_prompt("few-shot", "en") == system_prompt("no-stop", "en") == simple
    assert system_prompt("advanced", "en") == ANSWER_SYSTEM_PROMPTS[("advanced", "en")]


def test_the_prompt_holds_the_gold_passage_first_and_five_passages() -> None:
    documents = prompt_documents(EXAMPLE)
    assert len(documents) == DEV_PASSAGES and documents[0]["chunk_id"] == "p-gold"
    messages = variant_messages("few-shot", EXAMPLE, Context())
    assert "Mara Velt" in messages[-1].text and EXAMPLE.question in messages[-1].text


def test_a_record_is_scored_on_the_parsed_short_answer() -> None:
    bench = FakeBench("Answer: Mara Velt\nExplanation: It was founded by Mara Velt [1].")
    record = question_record(bench, "few-shot", EXAMPLE, Context())  # type: ignore[arg-type]
    assert record["short_answer"] == "Mara Velt"
    assert (record["short_em"], record["short_contains_gold"], record["formatted"], record["grounded"]) == (
        1.0,
        1.0,
        1.0,
        1.0,
    )
    assert bench.model.stops == [list(ANSWER_STOP_SEQUENCES)]


def test_no_stop_calls_without_stop_sequences_and_a_wrong_answer_scores_zero() -> None:
    bench = FakeBench("Answer: Tom Ferro\nExplanation: Tom Ferro founded it [1].")
    record = question_record(bench, "no-stop", EXAMPLE, Context())  # type: ignore[arg-type]
    assert bench.model.stops == [None]
    assert (record["short_em"], record["short_contains_gold"], record["grounded"]) == (0.0, 0.0, 0.0)


def test_summary_and_table_per_variant() -> None:
    keys = ("short_em", "short_f1", "short_contains_gold", "answer_contains_gold", "formatted", "grounded")
    rows = [
        {"dataset": "hotpotqa", **dict.fromkeys(keys, 1.0), "completion_tokens": 10, "seconds": 2.0},
        {"dataset": "cmrc", **dict(zip(keys, (0.0, 0.5, 0.0, 1.0, 0.0, 0.0), strict=True)),
         "completion_tokens": 20, "seconds": 4.0},
    ]  # fmt: skip
    summary = summarize(rows)
    assert summary["questions"] == 2 and summary["short_em"] == 0.5 and summary["short_f1"] == 0.75
    assert summary["by_dataset"]["cmrc"]["completion_tokens"] == 20.0
    table = markdown_table({"variants": {variant: summary for variant in VARIANTS}})
    assert len(table) == 2 + len(VARIANTS)
    assert table[2].startswith(
        "| few-shot | 1+1 | 0.500 | 0.750 | 0.500 | 1.000 | 0.500 | 0.500 | 15.0 | 3.0 |"
    )


def test_the_cli_prints_the_table_and_writes_the_file(tmp_path: Any, monkeypatch: Any) -> None:
    from typer.testing import CliRunner

    import benchmarks.prompt_ablation as ablation
    from benchmarks.commands import app

    summary = summarize([{"dataset": "hotpotqa", **dict.fromkeys(SUMMARY_KEYS, 1.0)}])
    report = {"machine": "test machine", "variants": {"few-shot": summary}, "records": []}
    monkeypatch.setattr(ablation, "run_prompt_ablation", lambda *args, **kwargs: report)
    out = tmp_path / "prompts.json"
    result = CliRunner().invoke(app, ["prompts", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert markdown_table(report)[2] in result.output and out.is_file()
    assert CliRunner().invoke(app, ["prompts", "--model", "llama-70b"]).exit_code == 2
