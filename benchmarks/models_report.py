"""The results file of `python -m benchmarks models` and the default it names: one row per model, the rule
that picks the default (`choose_default`), and the README table drawn from the file (`markdown_table`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evals.environment import machine_description

#: The default must answer the long prompt within this.
LONG_PROMPT_BUDGET_S = 30.0


def _contains_gold(row: Mapping[str, Any]) -> float:
    """A model's gold containment; older results name it "accuracy"."""
    return float(row["contains_gold"] if "contains_gold" in row else row["accuracy"])


def choose_default(rows: dict[str, dict[str, Any]]) -> str | None:
    """The instruction-tuned model with the best gold containment (then F1) among those that answered the
    long prompt within the budget; None when no measured model qualifies."""
    eligible = [
        row
        for row in rows.values()
        if row.get("instruct")
        and row.get("long_prompt", {}).get("within_budget")
        and row.get("questions")
        and not row.get("partial")
    ]
    if not eligible:
        return None
    best = max(eligible, key=lambda row: (_contains_gold(row), row["f1"]))
    return str(best["model"])


def build_report(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The results file's content for these model rows (rows of separate runs can be combined)."""
    return {
        "benchmark": "models",
        "machine": machine_description(),
        "cpu_count": os.cpu_count(),
        "setup": "gold passages in the prompt (HotpotQA: supporting paragraphs; CMRC: the question's "
        "paragraph), greedy decoding, one request at a time, one llama.cpp slot",
        "long_prompt_budget_s": LONG_PROMPT_BUDGET_S,
        "models": rows,
        "default": choose_default(rows),
    }


def markdown_table(report: dict[str, Any]) -> list[str]:
    """The README table of a results file (every number read from it; `partial` rows say how far they got)."""
    lines = [
        "| model | questions (HotpotQA+CMRC) | EM | F1 | contains gold | JSON-schema valid | prompt tok/s "
        "| gen tok/s | s/question | ~1500-token prompt s (alone / wall) | self-test "
        "| load avg before -> after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in report["models"].items():
        by = row["by_dataset"]
        long = row["long_prompt"]
        json_cell = (
            "-" if row.get("json_valid") is None else f"{row['json_valid']:.2f} of {row['json_questions']}"
        )
        notes = (" (base model)" if not row["instruct"] else "") + (
            " (partial)" if row.get("partial") else ""
        )
        lines.append(
            f"| {name}{notes} "
            f"| {by['hotpotqa']['questions']}+{by['cmrc']['questions']} | {row['em']:.2f} | {row['f1']:.2f} "
            f"| {_contains_gold(row):.2f} | {json_cell} | {row['prompt_tok_s']} | {row['gen_tok_s']} "
            f"| {row['s_per_question']:.1f} | {long.get('alone_s', '-')} / {long['wall_s']} "
            f"| {row['self_test']['strength']} | {row['loadavg_before'][0]} -> {row['loadavg_after'][0]} |"
        )
    return lines


if (
    __name__ == "__main__"
):  # print the README table of a results file: python -m benchmarks.models results/models.json
    import sys

    print("\n".join(markdown_table(json.loads(Path(sys.argv[1]).read_text()))))
