"""Naive against agentic on the same test questions, as the judgement sees them: per set, calls and seconds
per question, the bands with how many were right, and (agentic, judged live) how often a shown answer's text
holds a gold answer. Bands of both come from the committed calibrator applied to each record's signals.

    python -m benchmarks.judgement_compare --json results/judgement_agentic.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from answering.calibrator import CALIBRATOR_DIR, Calibrator, load_calibrator
from answering.decision import band_of
from evals.calibration_records import KNOWN_SETS
from evals.datasets import open_text
from evals.environment import machine_description

RUNS = Path("results/runs")


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a run (plain or gzipped JSON lines), failed questions left out."""
    with open_text(path) as text:
        return [record for record in map(json.loads, filter(str.strip, text)) if not record.get("error")]


def summary(records: list[dict[str, Any]], calibrator: Calibrator) -> dict[str, Any]:
    """One run's figures over its records."""
    bands: dict[str, dict[str, int]] = {
        name: {"n": 0, "right": 0} for name in ("confident", "tentative", "not_found")
    }
    for record in records:
        band = band_of(calibrator.probability(record["signals"]), calibrator.thresholds)
        bands[band]["n"] += 1
        bands[band]["right"] += int(bool(record.get("candidate_right")))
    shown = [record for record in records if record.get("band") in ("confident", "tentative")]
    return {
        "n": len(records),
        "llm_calls_per_question": round(statistics.mean(r["llm_calls"] for r in records), 3),
        "latency_p50_s": round(statistics.median(r["latency_s"] for r in records), 2),
        "bands": bands,
        "right_candidates": sum(int(bool(r.get("candidate_right"))) for r in records),
        "more_than_one_generation": sum(1 for r in records if (r.get("generation_rounds") or 1) > 1),
        "engine_bands": {name: sum(1 for r in records if r.get("band") == name) for name in bands},
        "shown_text_holds_gold": sum(
            float(r.get("contains_gold") or 0.0) for r in shown if r.get("answerable")
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="Report to write.")
    parser.add_argument("--calibrator", default="qwen2.5-coder-0.5b", help="Committed calibrator's name.")
    args = parser.parse_args()
    calibrator = load_calibrator(CALIBRATOR_DIR / f"{args.calibrator}.json")
    report: dict[str, Any] = {"machine": machine_description(), "calibrator": args.calibrator, "sets": {}}
    for name in KNOWN_SETS:
        agentic = read_records(RUNS / f"judge-{name}-test-agentic.jsonl.gz")
        ids = {record["qid"] for record in agentic}
        naive = [r for r in read_records(RUNS / f"judge-{name}-test-naive.jsonl.gz") if r["qid"] in ids]
        report["sets"][name] = {
            "naive": summary(naive, calibrator),
            "agentic": summary(agentic, calibrator),
        }
    report["command"] = f"python -m benchmarks.judgement_compare --json {args.json}"
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report["sets"], indent=1))


if __name__ == "__main__":
    main()
