"""Slim `rag eval qa` records for committing: keep what the judgement's reports read (question, gold, the
judged record's fields, calls and time), drop the bulky debugging fields (token log-probabilities, per-node
timings, the passage ids), and gzip them. `rag eval calibrate` and benchmarks/judgement_plots.py read the
.jsonl.gz files as they are.

    python -m benchmarks.slim_records results/runs/judge-squad-dev-naive.jsonl   # -> ...jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

#: The record fields kept in a committed, slimmed file.
KEPT_FIELDS = (
    "qid",
    "language",
    "question",
    "answers",
    "answerable",
    "prediction",
    "short_answer",
    "contains_gold",
    "short_contains_gold",
    "not_found",
    "not_found_reason",
    "confidence",
    "band",
    "candidate_short_answer",
    "candidate_right",
    "candidates",
    "signals",
    "short_answer_source",
    "strategy",
    "llm_calls",
    "generation_rounds",
    "retrieval_rounds",
    "prompt_tokens",
    "latency_s",
    "model",
    "load_1m",
    "error",
)
#: Digits kept of each signal (the calibrator's inputs).
SIGNAL_DIGITS = 4


def slim(record: dict[str, object]) -> dict[str, object]:
    """The kept fields of one record, signals rounded."""
    kept = {key: record[key] for key in KEPT_FIELDS if key in record}
    signals = kept.get("signals")
    if isinstance(signals, dict):
        kept["signals"] = {name: round(float(value), SIGNAL_DIGITS) for name, value in signals.items()}
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+", help="JSONL records; each is written as FILE.gz")
    args = parser.parse_args()
    for path in args.files:
        records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        target = path.with_name(path.name + ".gz")
        with gzip.open(target, "wt", encoding="utf-8", compresslevel=9) as out:
            out.writelines(json.dumps(slim(record), ensure_ascii=False) + "\n" for record in records)
        print(f"{target}: {len(records)} records, {target.stat().st_size} bytes")


if __name__ == "__main__":
    main()
