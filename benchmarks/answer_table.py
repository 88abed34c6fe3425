"""The answer-quality table of docs/answer-quality.md from per-question QA records (`rag eval qa --results`).

    .venv/bin/python -m benchmarks.answer_table [--split test] results/runs/RUN.jsonl ...

Columns: questions; accuracy on answerable questions (their count); short-answer accuracy on them; "not found"
on answerable ones; unanswerable questions declined (their count); declines whose withheld answer held a gold
answer; accuracy on answerable questions before any decline (the reader's own; both from `candidate_right`,
the short answer the engine had, or in older records `candidate_contains_gold`); model calls, prompt tokens
and p50 seconds per question. `--split` keeps one half of the records (evals.splits.split_of), so a run over
a file's first questions can also be read without the development half.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.qa import read_records
from evals.qa_scoring import current_names
from evals.splits import ALL_SPLITS, SPLITS, split_of

HEADER = (
    "| run | n | answerable right | short right | answerable not found | unanswerable declined "
    "| declines holding gold | right before any decline | LLM calls/q | prompt tokens/q | p50 s |"
)


def share(part: float, whole: int) -> str:
    return f"{part / whole:.2f}" if whole else "–"


def load_records(path: Path, split: str = ALL_SPLITS) -> list[dict[str, Any]]:
    """The records of one results file, of one half of the questions or all of them."""
    # read_records: the latest record per question, as `rag eval qa` resumes them (a torn last line skipped);
    # current_names: older records name the gold containment "accuracy"
    records = [current_names(record) for record in read_records(path).values()]
    return [r for r in records if split == ALL_SPLITS or split_of(str(r["qid"])) == split]


def prompt_tokens_per_question(records: Sequence[dict[str, Any]]) -> float | None:
    """Mean prompt tokens over the questions whose model calls were counted.

    Why not over all: before the engine estimated them (nodes/instrumentation.estimated_usage), a streamed
    reply cut by the loop guard recorded a model call with 0 prompt tokens; that is an unknown count, not a
    free call, and averaging it in would understate the prompt size of the models that loop most."""
    counted = [r["prompt_tokens"] for r in records if r["prompt_tokens"] or not r["llm_calls"]]
    return sum(counted) / len(counted) if counted else None


#: A record's field saying whether the answer the engine had, shown or not, held a gold answer: the judged
#: short answer's, else (records written before the judgement) the whole candidate answer's.
CANDIDATE_FIELDS = ("candidate_right", "candidate_contains_gold")


def candidate_held_gold(record: dict[str, Any]) -> bool:
    """Whether the answer the engine had for the question held a gold answer: the first of CANDIDATE_FIELDS
    the record has decides."""
    key = next((key for key in CANDIDATE_FIELDS if key in record), None)
    return key is not None and bool(record[key])


def row(name: str, records: Sequence[dict[str, Any]]) -> str:
    answerable = [r for r in records if r.get("answerable", True)]
    unanswerable = [r for r in records if not r.get("answerable", True)]
    declined = [r for r in records if r["not_found"]]
    n = len(records)
    tokens = prompt_tokens_per_question(records)
    # records written before the engine kept the withheld answer cannot say what a decline held
    keeps_candidates = any(key in r for r in records for key in CANDIDATE_FIELDS)
    cells = [
        name,
        str(n),
        f"{share(sum(r['contains_gold'] for r in answerable), len(answerable))} ({len(answerable)})",
        share(sum(r.get("short_contains_gold", 0) for r in answerable), len(answerable)),
        share(sum(r["not_found"] for r in answerable), len(answerable)),
        f"{share(sum(r['not_found'] for r in unanswerable), len(unanswerable))} ({len(unanswerable)})"
        if unanswerable
        else "–",
        f"{sum(1 for r in declined if candidate_held_gold(r))}/{len(declined)}" if keeps_candidates else "–",
        share(sum(1 for r in answerable if candidate_held_gold(r)), len(answerable))
        if keeps_candidates
        else "–",
        f"{sum(r['llm_calls'] for r in records) / n:.2f}" if n else "–",
        f"{tokens:.0f}" if tokens is not None else "–",
        f"{statistics.median(r['latency_s'] for r in records):.1f}" if n else "–",
    ]
    return "| " + " | ".join(cells) + " |"


def table(paths: Sequence[Path], split: str = ALL_SPLITS) -> list[str]:
    """The header and one row per results file."""
    suffix = "" if split == ALL_SPLITS else f" ({split} half)"
    lines = [HEADER, "|---" * (HEADER.count("|") - 1) + "|"]
    return lines + [row(path.stem + suffix, load_records(path, split)) for path in paths]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, ALL_SPLITS), default=ALL_SPLITS)
    parser.add_argument("files", nargs="+", type=Path)
    arguments = parser.parse_args(argv)
    print("\n".join(table(arguments.files, arguments.split)))


if __name__ == "__main__":
    main()
