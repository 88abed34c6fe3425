"""The answer-quality table of docs/answer-quality.md from per-question QA records (`rag eval qa --results`).

    .venv/bin/python -m benchmarks.answer_table results/runs/compressed-squad-test-naive.jsonl ...

Columns: questions; accuracy on answerable questions (their count); "not found" on answerable ones;
unanswerable questions declined (their count); declines whose withheld answer held a gold answer; accuracy
on answerable questions before any decline (the reader's own); model calls, prompt tokens and p50 seconds
per question.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from evals.qa_scoring import current_names

HEADER = (
    "| run | n | answerable right | answerable not found | unanswerable declined | declines holding gold "
    "| right before any decline | LLM calls/q | prompt tokens/q | p50 s |"
)


def share(part: float, whole: int) -> str:
    return f"{part / whole:.2f}" if whole else "–"


def row(path: Path) -> str:
    # current_names: records written before issue 22 named the gold containment "accuracy"
    records = [current_names(json.loads(line)) for line in path.open(encoding="utf-8")]
    answerable = [r for r in records if r.get("answerable", True)]
    unanswerable = [r for r in records if not r.get("answerable", True)]
    declined = [r for r in records if r["not_found"]]
    n = len(records)
    cells = [
        path.stem,
        str(n),
        f"{share(sum(r['contains_gold'] for r in answerable), len(answerable))} ({len(answerable)})",
        share(sum(r["not_found"] for r in answerable), len(answerable)),
        f"{share(sum(r['not_found'] for r in unanswerable), len(unanswerable))} ({len(unanswerable)})"
        if unanswerable
        else "–",
        f"{sum(1 for r in declined if r.get('candidate_contains_gold'))}/{len(declined)}",
        share(sum(1 for r in answerable if r.get("candidate_contains_gold")), len(answerable)),
        f"{sum(r['llm_calls'] for r in records) / n:.2f}",
        f"{sum(r['prompt_tokens'] for r in records) / n:.0f}",
        f"{statistics.median(r['latency_s'] for r in records):.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    print(HEADER)
    print("|---" * (HEADER.count("|") - 1) + "|")
    for name in sys.argv[1:]:
        print(row(Path(name)))
