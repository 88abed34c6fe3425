"""`python -m benchmarks reader-confidence`: does the reader's own confidence tell right answers from wrong or
unanswerable ones when it reads only the gold paragraph?

Why: the engine's calibrated "not found" reads the answer's token log-probabilities, on the strength of a
measurement outside the engine (60 SQuAD 2.0 development questions, the gold paragraph alone, "reply none":
AUROC 0.81 for Qwen2.5-Coder-0.5B, 0.86 for the 1.5B). Inside the engine the signal ranked at 0.21-0.70 (docs/
answer-quality.md "Calibrated not found"), which could be the engine's evidence or the signal itself. This
campaign removes the engine: each question of a half of the SQuAD 2.0 mixed file is read over its own
paragraph only (for an unanswerable question, the paragraph it was written against), with the product's
focused-read prompt (prompts.answer.FOCUSED_READ_SYSTEM) and cap (nodes.focused_read.FOCUSED_READ_MAX_TOKENS),
greedy. Each record holds the reply, whether it holds a gold answer and its confidence.

The confidence is the mean log-probability of the reply's tokens (the measure above; the reply is the short
answer, so it is also the mean of models/confidence.py's `answer_logprobs` of this reply). A reply of "none"
is a decline at every threshold; a right answer is one that holds a gold answer (contains_gold_answer).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_server import BenchServer, reply_text
from benchmarks.models import gold_passages
from config.settings import LocalModelName
from evals.datasets import QAExample
from evals.metrics import contains_gold_answer
from nodes.draft_text import is_none_answer
from nodes.focused_read import FOCUSED_READ_MAX_TOKENS
from nodes.instrumentation import token_logprobs_in
from prompts.answer import FOCUSED_READ_SYSTEM, FOCUSED_READ_USER
from retrieval.answer_text import clean_short_answer

#: Progress callback: one line per milestone.
Progress = Callable[[str], None]
#: A progress line every this many questions.
PROGRESS_EVERY = 25
#: Decimal places kept for log-probabilities in the records.
DIGITS = 4


def read_messages(example: QAExample) -> list[dict[str, str]]:
    """The focused-read request over the question's gold paragraph(s), as the engine sends it."""
    passages = gold_passages(example)
    text = "\n".join(passage.text for passage in passages)
    user = FOCUSED_READ_USER.format(title=passages[0].title, passage=text, question=example.question)
    return [{"role": "system", "content": FOCUSED_READ_SYSTEM}, {"role": "user", "content": user}]


def reply_logprobs(payload: dict[str, Any]) -> list[float]:
    """The log-probability of each reply token in an OpenAI-compatible response (empty when it has none)."""
    return [value for _token, value in token_logprobs_in(payload["choices"][0].get("logprobs")) or []]


def read_record(example: QAExample, reply: str, logprobs: Sequence[float], model: str) -> dict[str, Any]:
    """One question's record, in the fields `rag eval qa` records had when the campaign ran.

    A "none" reply is declined with nothing to show (`declined_answer` empty), so every threshold declines
    it; any other reply is the candidate answer, shown when its confidence reaches the threshold."""
    first_line = next((line for line in reply.strip().splitlines() if line.strip()), "")
    declined = is_none_answer(clean_short_answer(first_line) or first_line)
    holds_gold = contains_gold_answer(reply, example.answers) if example.answers and not declined else 0.0
    return {
        "qid": example.qid,
        "question": example.question,
        "answers": example.answers,
        "answerable": bool(example.answers),
        "prediction": reply,
        "not_found": declined,
        "declined_answer": "",
        "candidate_answer": "" if declined else reply,
        "candidate_contains_gold": holds_gold,
        "contains_gold": holds_gold,
        "answer_confidence": round(sum(logprobs) / len(logprobs), DIGITS) if logprobs else None,
        "confidence_min": round(min(logprobs), DIGITS) if logprobs else None,
        "reply_tokens": len(logprobs),
        "model": model,
    }


def usable(example: QAExample) -> bool:
    """A question with its own paragraph to read (every SQuAD 2.0 question has one)."""
    return bool(gold_passages(example))


def run_reader_confidence(
    name: LocalModelName,
    bench: BenchServer,
    examples: Iterable[QAExample],
    records_path: Path,
    progress: Progress,
) -> list[dict[str, Any]]:
    """Read every usable example over its gold paragraph and write one JSON line per question (the file is
    replaced: a run is one model over one half)."""
    chosen = [example for example in examples if usable(example)]
    records: list[dict[str, Any]] = []
    records_path.parent.mkdir(parents=True, exist_ok=True)
    with records_path.open("w", encoding="utf-8") as out:
        for index, example in enumerate(chosen, start=1):
            payload, wall = bench.completion(read_messages(example), FOCUSED_READ_MAX_TOKENS, logprobs=True)
            reply = reply_text(payload)
            record = read_record(example, reply, reply_logprobs(payload), name)
            record["latency_s"] = round(wall, 3)
            record["prompt_tokens"] = (payload.get("usage") or {}).get("prompt_tokens")
            records.append(record)
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            if index % PROGRESS_EVERY == 0 or index == len(chosen):
                progress(f"{name}: {index}/{len(chosen)} questions read")
    return records
