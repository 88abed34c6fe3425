"""How often the score grader's per-sentence groundedness check catches planted errors, and how often it
flags correct answers.

The test set (benchmarks/fixtures/planted_errors.jsonl) is invented for this check, not taken from any
evaluation data: short passages about made-up places, people and things, each with questions answered
correctly (some paraphrased, some uncited, two in Chinese) and answered with one planted error (a swapped
number, a wrong name, a wrong date, a changed quoted title). A case is *flagged* when the score grader
(nodes.grade_answer.score_answer) says the answer is not grounded.

    python -m benchmarks.groundedness [--fixture FILE] [--json OUT]

prints the catch rate (planted errors flagged) and the false-alarm rate (correct answers flagged), by kind.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from config.settings import get_settings
from nodes.grade_answer import score_answer
from retrieval.grounding import ground_answer
from state.schemas import RetrievedDoc

DEFAULT_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "planted_errors.jsonl"


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a JSONL fixture: id, passages, question, answer, planted (bool), kind."""
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        case = json.loads(line)
        missing = {"id", "passages", "question", "answer", "planted"} - set(case)
        if missing:
            raise ValueError(f"{path}:{number}: case lacks {', '.join(sorted(missing))}")
        cases.append(case)
    return cases


def passages_of(case: dict[str, Any]) -> list[RetrievedDoc]:
    """The case's passages as retrieved documents, numbered as the answer cites them."""
    return [
        RetrievedDoc(
            chunk_id=f"{case['id']}-{index}",
            text=text,
            source=f"{case['id']}-{index}.md",
            title="",
            page=0,
            doc_id=f"{case['id']}-{index}",
            score=1.0,
            relevance=-1.0,
            query=case["question"],
            metadata={},
        )
        for index, text in enumerate(case["passages"], 1)
    ]


def judge(case: dict[str, Any]) -> dict[str, Any]:
    """The grader's verdict on one case, with the anchors it found missing."""
    docs = passages_of(case)
    threshold = get_settings().relevance_threshold
    grade = score_answer(case["question"], case["answer"], docs, relevance_threshold=threshold)
    report = ground_answer(case["answer"], docs)
    return {
        "id": case["id"],
        "planted": bool(case["planted"]),
        "kind": case.get("kind", ""),
        "flagged": not grade.grounded,
        "accuracy": grade.accuracy,
        "missing": [anchor for check in report.claims for anchor in check.missing],
    }


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 3) if whole else 0.0


def evaluate(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Catch rate over planted cases and false-alarm rate over correct ones, overall and by kind."""
    verdicts = [judge(case) for case in cases]
    planted = [v for v in verdicts if v["planted"]]
    correct = [v for v in verdicts if not v["planted"]]
    kinds = sorted({v["kind"] for v in planted})
    return {
        "planted": len(planted),
        "caught": sum(v["flagged"] for v in planted),
        "catch_rate": _rate(sum(v["flagged"] for v in planted), len(planted)),
        "correct": len(correct),
        "false_alarms": sum(v["flagged"] for v in correct),
        "false_alarm_rate": _rate(sum(v["flagged"] for v in correct), len(correct)),
        "by_kind": {
            kind: _rate(
                sum(v["flagged"] for v in planted if v["kind"] == kind),
                sum(v["kind"] == kind for v in planted),
            )
            for kind in kinds
        },
        "missed": [v["id"] for v in planted if not v["flagged"]],
        "false_alarm_ids": [v["id"] for v in correct if v["flagged"]],
        "verdicts": verdicts,
    }


def run_groundedness(fixture: Path = DEFAULT_FIXTURE, json_out: Path | None = None) -> int:
    """Run the evaluation and print its figures; exit code 2 on a missing or malformed fixture."""
    try:
        result = evaluate(load_cases(fixture))
    except (OSError, ValueError) as error:
        print(f"error: cannot read the fixture: {error}", file=sys.stderr)
        return 2
    print(
        f"planted errors caught: {result['caught']}/{result['planted']} ({result['catch_rate']:.1%}); "
        f"false alarms: {result['false_alarms']}/{result['correct']} ({result['false_alarm_rate']:.1%})"
    )
    print("catch rate by kind: " + ", ".join(f"{k} {v:.0%}" for k, v in result["by_kind"].items()))
    if result["missed"]:
        print("missed: " + ", ".join(result["missed"]))
    if result["false_alarm_ids"]:
        print("false alarms: " + ", ".join(result["false_alarm_ids"]))
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m benchmarks.groundedness [--fixture FILE] [--json OUT]` (the same as `python -m benchmarks
    groundedness`)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.groundedness", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument("--json", type=Path, default=None, help="write the full result here")
    args = parser.parse_args(argv)
    return run_groundedness(args.fixture, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
