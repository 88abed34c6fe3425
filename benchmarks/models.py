"""`python -m benchmarks models`: the embedded models compared on reading comprehension, speed and JSON
output.

How the benchmark is set up, and why:
- every model answers the same questions (HotpotQA: the gold paragraphs; CMRC 2018: the question's
  paragraph) with the passages in the prompt: reading comprehension without retrieval noise, so the numbers
  are the model's own;
- each model runs alone in its own llama.cpp server (one slot, the settings' threads), one question at a
  time; the answer call's llama.cpp timings give prompt and generation tokens/s, its wall time s/question;
- the same messages are asked again with `with_structured_output(method="json_schema")` (the engine's
  structured path): the JSON-schema validity column; llama.cpp's prompt cache makes this second call cheap;
- a ~1500-token prompt (many paragraphs, an answer with its explanation, up to 128 tokens, no prompt cache)
  is timed once per model: the <= 30 s criterion for the default;
- each model's self-test verdict (models/capability.py) is recorded: it decides the LLM paths at run time;
- the machine's load average before and after each model is recorded: other processes on a 2-core machine
  change the speed columns, and a reader must be able to see that.
The results file keeps one entry per model; running one model again replaces only its entry.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import convert_to_messages
from pydantic import BaseModel, Field

from benchmarks.bench_server import BenchServer
from benchmarks.data import HOTPOTQA_FILE, SHARED_DATA_DIR
from benchmarks.models_report import LONG_PROMPT_BUDGET_S, build_report
from benchmarks.reading_prompts import (
    EXAMPLE_ANSWER_EN,
    EXAMPLE_ANSWER_ZH,
    EXAMPLE_QUESTION_EN,
    EXAMPLE_QUESTION_ZH,
    LONG_SYSTEM,
    PASSAGE_LINE,
    READING_PROMPT_EN,
    READING_PROMPT_ZH,
    READING_SYSTEM_EN,
    READING_SYSTEM_ZH,
)
from config.settings import LocalModelName, Settings
from evals.datasets import (
    CMRC_FILE,
    LANGUAGE_CHINESE,
    Passage,
    QAExample,
    load_cmrc,
    load_hotpotqa,
)
from evals.metrics import contains_gold_answer, exact_match, f1_score
from models.capability import SelfTest, run_self_test
from models.local_catalog import CATALOG, LocalModel

logger = logging.getLogger(__name__)

DEFAULT_HOTPOTQA = 100
DEFAULT_CMRC = 50
#: Questions (in run order) that also get the JSON-schema call: enough for a validity rate, and each call
#: costs as much as an answer on a small model.
DEFAULT_JSON_QUESTIONS = 30
#: The results file is rewritten after this many questions, so a long run stopped early keeps its rows.
CHECKPOINT_EVERY = 10
#: Completion cap of the short answer (a phrase; more is a model that does not stop).
ANSWER_MAX_TOKENS = 32
#: The short answer ends at the first line break (small models add an explanation after it).
ANSWER_STOP = ("\n",)
#: Completion cap of the JSON answer (an object with a phrase and a number).
JSON_MAX_TOKENS = 96
#: The timing prompt: at least this many prompt tokens, and up to this many generated.
LONG_PROMPT_TOKENS = 1500
LONG_MAX_TOKENS = 128
#: Prefixes a model may put before its short answer; removed before scoring.
_ANSWER_PREFIXES = ("answer:", "答案：", "答案:", "a:")

Progress = Callable[[str], None]


class ReadingAnswer(BaseModel):
    """The structured answer of the JSON-schema column."""

    answer: str = Field(description="the short answer, copied from the passages")
    passage: int = Field(description="the number of the passage that contains the answer")


def select_examples(data_dir: Path, hotpotqa: int, cmrc: int) -> list[QAExample]:
    """The first `hotpotqa` HotpotQA questions that have gold paragraphs and the first `cmrc` CMRC ones,
    interleaved in proportion, so that a run stopped early has measured both datasets alike."""
    hotpot = [example for example in load_hotpotqa(data_dir / HOTPOTQA_FILE) if gold_passages(example)]
    chinese = [example for example in load_cmrc(data_dir / CMRC_FILE) if example.answers]
    chosen = [(index / max(hotpotqa, 1), 0, example) for index, example in enumerate(hotpot[:hotpotqa])]
    chosen += [(index / max(cmrc, 1), 1, example) for index, example in enumerate(chinese[:cmrc])]
    return [example for _position, _dataset, example in sorted(chosen, key=lambda item: item[:2])]


def gold_passages(example: QAExample) -> list[Passage]:
    """The passages the answer is in, in the dataset's order."""
    return [passage for passage in example.passages if passage.passage_id in example.supporting]


def _passage_block(passages: Sequence[Passage]) -> str:
    return "\n".join(
        PASSAGE_LINE.format(number=number, title=passage.title, text=passage.text)
        for number, passage in enumerate(passages, start=1)
    )


def reading_messages(example: QAExample) -> list[dict[str, str]]:
    """The short-answer request in the question's language: system, one worked example, the question.

    The system message and the example are the same for every question of a language, so llama.cpp's
    prompt cache serves them after the first question."""
    chinese = example.language == LANGUAGE_CHINESE
    template = READING_PROMPT_ZH if chinese else READING_PROMPT_EN
    question = template.format(passages=_passage_block(gold_passages(example)), question=example.question)
    return [
        {"role": "system", "content": READING_SYSTEM_ZH if chinese else READING_SYSTEM_EN},
        {"role": "user", "content": EXAMPLE_QUESTION_ZH if chinese else EXAMPLE_QUESTION_EN},
        {"role": "assistant", "content": EXAMPLE_ANSWER_ZH if chinese else EXAMPLE_ANSWER_EN},
        {"role": "user", "content": question},
    ]


def clean_answer(text: str) -> str:
    """The short answer in a reply: its first non-empty line without an 'Answer:' prefix or end period."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    lowered = line.lower()
    for prefix in _ANSWER_PREFIXES:
        if lowered.startswith(prefix):
            line = line[len(prefix) :].strip()
            break
    return line.strip().strip('"').rstrip(".。").strip()


def score_answer(prediction: str, golds: Sequence[str]) -> dict[str, float]:
    """EM, F1 and gold containment (evals.metrics.contains_gold_answer, as in `rag eval qa`) of one
    prediction."""
    return {
        "em": exact_match(prediction, golds),
        "f1": f1_score(prediction, golds),
        "contains_gold": contains_gold_answer(prediction, golds),
    }


def json_answer(bench: BenchServer, example: QAExample) -> tuple[bool, str, float]:
    """(schema-valid, answer or what was wrong, seconds) of the JSON-schema call on the same messages (the
    grammar forces the form; a model that never closes the object within the cap is invalid)."""
    messages = convert_to_messages(reading_messages(example))
    structured = bench.chat_model(JSON_MAX_TOKENS).with_structured_output(
        ReadingAnswer, method="json_schema", include_raw=True
    )
    started = time.perf_counter()
    try:
        result = structured.invoke(messages)
    except Exception as error:  # noqa: BLE001 - any refusal or transport error is an invalid answer, recorded
        return False, f"error: {error}"[:200], time.perf_counter() - started
    seconds = time.perf_counter() - started
    parsed = result.get("parsed")
    if parsed is None or result.get("parsing_error") is not None:
        raw = result.get("raw")
        return False, f"invalid: {getattr(raw, 'content', '')}"[:200], seconds
    return True, parsed.answer, seconds


def long_prompt_timing(bench: BenchServer, examples: Sequence[QAExample]) -> dict[str, Any]:
    """Wall time of one ~1500-token RAG-sized prompt (all paragraphs of the first questions) answered with
    up to 128 tokens, prompt cache off."""
    passages: list[Passage] = []
    english = [example for example in examples if example.language != LANGUAGE_CHINESE]
    question = english[0].question if english else examples[0].question
    for example in english or examples:
        for passage in example.passages:
            passages.append(passage)
            if bench.count_tokens(_passage_block(passages)) >= LONG_PROMPT_TOKENS:
                break
        else:
            continue
        break
    messages = [
        {"role": "system", "content": LONG_SYSTEM},
        {
            "role": "user",
            "content": READING_PROMPT_EN.format(passages=_passage_block(passages), question=question),
        },
    ]
    cpu_started = time.process_time()  # the server runs in this process: its threads' CPU time counts
    _text, timings, wall = bench.chat(messages, LONG_MAX_TOKENS, cache_prompt=False)
    cpu = time.process_time() - cpu_started
    alone = cpu / bench.server.threads
    return {
        "prompt_tokens": timings.get("prompt_n"),
        "generated_tokens": timings.get("predicted_n"),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "alone_s": round(alone, 2),
        "within_budget": alone <= LONG_PROMPT_BUDGET_S,
    }


def _rate(tokens: float, milliseconds: float) -> float | None:
    return round(1000 * tokens / milliseconds, 1) if milliseconds > 0 else None


def _json_summary(asked: Sequence[dict[str, Any]]) -> dict[str, Any]:
    if not asked:
        return {"json_questions": 0, "json_valid": None, "json_em": None, "json_s_per_question": None}
    count = len(asked)
    return {
        "json_questions": count,
        "json_valid": round(sum(r["json_valid"] for r in asked) / count, 3),
        "json_em": round(sum(r["json_em"] for r in asked) / count, 3),
        "json_s_per_question": round(sum(r["json_seconds"] for r in asked) / count, 3),
    }


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means of the scores, the JSON validity and the speed of a set of per-question records."""
    count = len(records)
    if not count:
        return {"questions": 0}

    def mean(key: str) -> float:
        return round(sum(float(record[key]) for record in records) / count, 3)

    return {
        "questions": count,
        "em": mean("em"),
        "f1": mean("f1"),
        "contains_gold": mean("contains_gold"),
        **_json_summary([record for record in records if record.get("json_asked", True)]),
        "prompt_tok_s": _rate(sum(r["prompt_n"] for r in records), sum(r["prompt_ms"] for r in records)),
        "gen_tok_s": _rate(sum(r["predicted_n"] for r in records), sum(r["predicted_ms"] for r in records)),
        "s_per_question": mean("seconds"),
        "mean_prompt_tokens": round(sum(r["prompt_tokens"] for r in records) / count, 1),
    }


def evaluate_model(
    name: LocalModelName,
    examples: Sequence[QAExample],
    settings: Settings,
    progress: Progress,
    *,
    json_questions: int = DEFAULT_JSON_QUESTIONS,
    checkpoint: Callable[[dict[str, Any]], None] = lambda _row: None,
) -> dict[str, Any]:
    """One model's row: scores per dataset and overall, speed, JSON validity, long prompt, self-test.

    `checkpoint` receives the row so far every CHECKPOINT_EVERY questions (marked `partial`)."""
    model = CATALOG[name]
    load_before = [round(value, 2) for value in os.getloadavg()]
    started = time.perf_counter()
    records: list[dict[str, Any]] = []
    with BenchServer(name, settings) as bench:
        self_test = run_self_test(bench.chat_model(128), supports_json_schema=True)
        progress(f"{name}: loaded in {bench.server.load_seconds:.1f}s, self-test {self_test.strength}")
        long_prompt = long_prompt_timing(bench, examples)
        progress(f"{name}: ~{long_prompt['prompt_tokens']}-token prompt answered in {long_prompt['wall_s']}s")
        for index, example in enumerate(examples, start=1):
            text, timings, wall = bench.chat(reading_messages(example), ANSWER_MAX_TOKENS, stop=ANSWER_STOP)
            prediction = clean_answer(text)
            asked_json = index <= json_questions
            valid, structured, json_seconds = json_answer(bench, example) if asked_json else (False, "", 0.0)
            records.append(
                {
                    "qid": example.qid,
                    "dataset": "cmrc" if example.language == LANGUAGE_CHINESE else "hotpotqa",
                    "prediction": prediction,
                    "raw": text,
                    "gold": example.answers,
                    **score_answer(prediction, example.answers),
                    "json_asked": asked_json,
                    "json_valid": float(valid),
                    "json_answer": structured,
                    "json_em": exact_match(structured, example.answers) if valid else 0.0,
                    "seconds": round(wall, 3),
                    "json_seconds": round(json_seconds, 3),
                    "prompt_tokens": int(timings.get("prompt_n", 0)) + int(timings.get("cache_n", 0)),
                    "prompt_n": int(timings.get("prompt_n", 0)),
                    "prompt_ms": float(timings.get("prompt_ms", 0.0)),
                    "predicted_n": int(timings.get("predicted_n", 0)),
                    "predicted_ms": float(timings.get("predicted_ms", 0.0)),
                }
            )
            if index % CHECKPOINT_EVERY == 0 or index == len(examples):
                progress(f"{name}: {index}/{len(examples)} ({summarize(records)['f1']} F1 so far)")
                if index < len(examples):
                    checkpoint(
                        {
                            **_row(
                                model,
                                records,
                                long_prompt,
                                self_test,
                                settings,
                                started,
                                load_before,
                                bench.server.load_seconds,
                            ),
                            "partial": True,
                        }
                    )
        load_seconds = bench.server.load_seconds
    return _row(model, records, long_prompt, self_test, settings, started, load_before, load_seconds)


def _row(
    model: LocalModel,
    records: list[dict[str, Any]],
    long_prompt: dict[str, Any],
    self_test: SelfTest,
    settings: Settings,
    started: float,
    load_before: list[float],
    load_seconds: float | None,
) -> dict[str, Any]:
    by_dataset = {
        dataset: summarize([record for record in records if record["dataset"] == dataset])
        for dataset in ("hotpotqa", "cmrc")
    }
    return {
        "model": model.name,
        "description": model.description,
        "instruct": model.instruct,
        "packages": list(model.packages),
        "sha256": model.sha256 or None,
        "load_s": round(load_seconds or 0.0, 2),
        **summarize(records),
        "by_dataset": by_dataset,
        "long_prompt": long_prompt,
        "self_test": {
            "strength": self_test.strength,
            "reason": self_test.reason,
            "seconds": round(self_test.seconds, 2),
        },
        "threads": settings.local_threads,
        "partial": False,
        "wall_s": round(time.perf_counter() - started, 1),
        "loadavg_before": load_before,
        "loadavg_after": [round(value, 2) for value in os.getloadavg()],
        "records": records,
    }


def run_models_eval(
    models: Sequence[LocalModelName],
    settings: Settings,
    *,
    results_path: Path,
    data_dir: Path = SHARED_DATA_DIR,
    hotpotqa: int = DEFAULT_HOTPOTQA,
    cmrc: int = DEFAULT_CMRC,
    json_questions: int = DEFAULT_JSON_QUESTIONS,
    progress: Progress = logger.info,
) -> dict[str, Any]:
    """Measure `models` and merge their rows into the results file (other models' rows are kept; each row
    names the questions it was measured on)."""
    examples = select_examples(data_dir, hotpotqa, cmrc)
    questions = {
        "hotpotqa": sum(e.language != LANGUAGE_CHINESE for e in examples),
        "cmrc": sum(e.language == LANGUAGE_CHINESE for e in examples),
    }
    report: dict[str, Any] = {}
    if results_path.is_file():
        try:
            report = json.loads(results_path.read_text())
        except json.JSONDecodeError:
            report = {}
    rows: dict[str, dict[str, Any]] = dict(report.get("models", {}))

    def save(name: str, row: dict[str, Any]) -> None:
        rows[name] = {**row, "question_set": questions}
        _write(results_path, build_report(rows))

    for name in models:
        save(
            name,
            evaluate_model(
                name,
                examples,
                settings,
                progress,
                json_questions=json_questions,
                checkpoint=functools.partial(save, name),
            ),
        )
    return build_report(rows)


def _write(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.tmp")
    partial.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    partial.replace(path)
