"""Risk-coverage plots of the answer judgement, per set: naive and agentic after (a curve: the shown answers'
accuracy as more of them are shown, most probable first), and before (one point each, over the after-runs'
questions: the engine without a probability showed every answer it did not decline).

"Right" is the short answer holding a gold answer in both: `candidate_right` after, `short_contains_gold`
before (unanswerable questions are never right). Run from the checkout:

    python -m benchmarks.judgement_plots --set squad --after results/runs/judge-squad-test-naive.jsonl \
        --after results/runs/judge-squad-test-agentic.jsonl \
        --before results/runs/reported3-squad-test-naive.jsonl --out results/judgement/risk_coverage_squad.png
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from answering.calibrator import CALIBRATOR_DIR, Calibrator, load_calibrator
from benchmarks.judgement_compare import read_records
from evals.metrics import risk_coverage


def before_point(records: list[dict[str, Any]]) -> tuple[float, float]:
    """(coverage, accuracy) of an engine that showed every answer it did not decline."""
    shown = [record for record in records if not record.get("not_found")]
    right = sum(
        float(record.get("short_contains_gold") or 0.0) for record in shown if record.get("answerable", True)
    )
    return len(shown) / max(1, len(records)), right / max(1, len(shown))


def label_of(path: Path) -> str:
    """A run's legend label from its file name."""
    return "agentic" if "agentic" in path.name else "naive"


def plot(name: str, calibrator: Calibrator, after: list[Path], before: list[Path], out: Path) -> None:
    """One figure: a curve per after-run (the committed calibrator applied to each record's signals, so
    records gathered before the fit are judged as the engine judges now), a point per before-run."""
    figure, axes = plt.subplots(figsize=(5.5, 4))
    runs = [(path, read_records(path)) for path in after]
    for path, records in runs:
        scores = [calibrator.probability(record["signals"]) for record in records]
        labels = [float(record.get("candidate_right") or 0.0) for record in records]
        points = risk_coverage(scores, labels)
        axes.plot(
            [x for x, _ in points],
            [y for _, y in points],
            label=f"{label_of(path)}, calibrated (n={len(records)})",
        )
    questions = {record["qid"] for _path, records in runs for record in records}
    for path in before:  # the same questions as the after-runs
        records = [record for record in read_records(path) if record["qid"] in questions]
        x, y = before_point(records)
        axes.scatter([x], [y], marker="x", s=60, label=f"{label_of(path)}, before (n={len(records)})")
    axes.set_xlabel("coverage (share of questions shown an answer)")
    axes.set_ylabel("accuracy of the shown short answers")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_title(f"{name}: risk-coverage, test half")
    axes.legend(fontsize=7)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", required=True, help="The set's name, for the title.")
    parser.add_argument("--after", type=Path, action="append", default=[], help="Records with confidence.")
    parser.add_argument(
        "--before", type=Path, action="append", default=[], help="Records of the earlier engine."
    )
    parser.add_argument("--out", type=Path, required=True, help="PNG to write.")
    parser.add_argument("--calibrator", default="qwen2.5-coder-0.5b", help="Committed calibrator's name.")
    args = parser.parse_args()
    calibrator = load_calibrator(CALIBRATOR_DIR / f"{args.calibrator}.json")
    plot(args.set, calibrator, args.after, args.before, args.out)


if __name__ == "__main__":
    main()
