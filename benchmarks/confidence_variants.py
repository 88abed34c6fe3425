"""Compare confidence signals for the calibrated "not found" on development QA records
(docs/answer-quality.md, "Calibrated 'not found'").

    .venv/bin/python -m benchmarks.confidence_variants results/runs/calib-squad-dev-naive.jsonl

Each record of a run made with RAG_ANSWER_CONFIDENCE_THRESHOLD=-1000 keeps the reply's token log-probabilities
(`reply_logprobs`) and what the term checks alone decided (`term_check_reason`), so every signal below is
replayed on the same answers without running the model again. For each signal: how many answers have one,
its AUROC (right answers vs wrong or unanswerable ones), the threshold of least cost chosen on these records
(benchmarks.calibration's rule), and the engine's cost at it: answers without that signal are decided by the
term checks, as the engine does. The last row is the term checks alone (the behaviour before calibration).
Development records only: never pass test records here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.calibration import (
    COST_CORRECT_WITHHELD,
    COST_WRONG_SHOWN,
    Candidate,
    auroc,
    candidate_of,
    scores_by_class,
    thresholds_of,
)
from models.confidence import answer_confidence, first_line_range, values_in

Signal = Callable[[Mapping[str, Any]], float | None]
FIRST_TOKENS = 8
#: Signals also tried together with the term checks (decline when either declines).
COMBINED = ("short answer mean (recorded; none for an extractive answer)",)


def pairs_of(record: Mapping[str, Any]) -> list[tuple[str, float]]:
    return [(str(token), float(value)) for token, value in record.get("reply_logprobs") or []]


def model_short(record: Mapping[str, Any]) -> str:
    """The short answer the model itself wrote (the extractive answerer may have replaced it)."""
    if record.get("short_answer_source") == "model":
        return str(record.get("short_answer") or "")
    return str(record.get("model_short_answer") or "")


def first_line_values(record: Mapping[str, Any]) -> list[float]:
    """Log-probabilities of the tokens of the reply's first line with words (its label left out)."""
    pairs = pairs_of(record)
    wanted = first_line_range("".join(token for token, _ in pairs))
    return values_in(pairs, wanted) if wanted else []


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _short_min(record: Mapping[str, Any]) -> float | None:
    """The lowest log-probability of the short answer's tokens, for an answer with a recorded confidence."""
    if record.get("answer_confidence") is None:
        return None
    pairs = pairs_of(record)
    text = "".join(token for token, _ in pairs)
    short = str(record.get("short_answer") or "")
    start = text.find(short) if short else -1
    return min(values_in(pairs, (start, start + len(short))), default=None) if start >= 0 else None


SIGNALS: dict[str, Signal] = {
    "short answer mean (recorded; none for an extractive answer)": lambda r: r.get("answer_confidence"),
    "short answer min (where the model wrote it)": lambda r: _short_min(r),
    "short answer mean, every model reply": lambda r: answer_confidence(pairs_of(r) or None, model_short(r)),
    "first line mean": lambda r: _mean(first_line_values(r)),
    f"first {FIRST_TOKENS} tokens mean": lambda r: _mean(
        [value for token, value in pairs_of(r) if token.strip()][:FIRST_TOKENS]
    ),
    "first line min": lambda r: min(first_line_values(r), default=None),
    "whole reply mean": lambda r: _mean([value for token, value in pairs_of(r) if token.strip()]),
}


def term_declined(record: Mapping[str, Any]) -> bool:
    """The term checks' decision: the run's own not-found, or the checks' verdict on an answer that had a
    confidence (the run let the confidence decide those, at -1000: never)."""
    return bool(record.get("not_found")) or bool(record.get("term_check_reason"))


def cost(wrong_shown: int, correct_withheld: int) -> int:
    return COST_WRONG_SHOWN * wrong_shown + COST_CORRECT_WITHHELD * correct_withheld


def evaluate(
    records: Sequence[Mapping[str, Any]], signal: Signal | None, *, with_terms: bool = False
) -> dict[str, Any]:
    """AUROC, chosen threshold and engine outcome of one signal (None: the term checks alone).

    The engine declines an answer with the signal when it is below the threshold (with `with_terms`, also
    when the term checks decline it), and an answer without the signal when the term checks decline it. The
    threshold is the one of least engine cost on these records (ties: the lower), which for the signal alone
    is benchmarks.calibration.choose_threshold's.
    """
    scored: list[tuple[Candidate, float | None, bool]] = []
    for record in records:
        base = candidate_of({**record, "answer_confidence": 0.0})  # correctness; confidence set below
        if not isinstance(base, Candidate):
            continue
        value = None if signal is None or base.always_declined else signal(record)
        scored.append((replace(base, confidence=value), value, term_declined(record)))
    with_signal = [c for c, value, _ in scored if value is not None and not c.always_declined]
    positives, negatives = scores_by_class(with_signal)
    area = auroc(positives, negatives)
    thresholds: list[float | None] = [*thresholds_of(with_signal)] or [None]
    outcomes = [_engine_outcome(scored, threshold, with_terms) for threshold in thresholds]
    best = min(outcomes, key=lambda out: (out["cost"], out["threshold"] or 0.0))
    return {"with_signal": len(with_signal), "records": len(scored), "auroc": area, **best}


def _engine_outcome(
    scored: Sequence[tuple[Candidate, float | None, bool]], threshold: float | None, with_terms: bool
) -> dict[str, Any]:
    wrong = withheld = declines = answerable_declined = unanswerable_declined = 0
    answerable = sum(1 for c, _, _ in scored if c.answerable)
    for candidate, value, by_terms in scored:
        if candidate.always_declined:
            show = False
        elif value is not None and threshold is not None:
            show = value >= threshold and not (with_terms and by_terms)
        else:
            show = not by_terms
        if show:
            wrong += not candidate.correct
        else:
            withheld += candidate.correct
            declines += 1
            answerable_declined += candidate.answerable
            unanswerable_declined += not candidate.answerable
    unanswerable = len(scored) - answerable
    return {
        "threshold": threshold,
        "cost": cost(wrong, withheld),
        "wrong_shown": wrong,
        "correct_withheld": withheld,
        "answerable_declined": round(answerable_declined / answerable, 2) if answerable else None,
        "unanswerable_declined": round(unanswerable_declined / unanswerable, 2) if unanswerable else None,
        "declines_with_gold": round(withheld / declines, 2) if declines else None,
    }


def main(paths: Sequence[str]) -> None:
    records = [json.loads(line) for path in paths for line in Path(path).open(encoding="utf-8")]
    print(
        "| signal | answers with it / records | dev AUROC | threshold | dev cost (2 x wrong shown + right "
        "withheld) | answerable declined | unanswerable declined | declines holding gold |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rows: list[tuple[str, Signal | None, bool]] = [(name, signal, False) for name, signal in SIGNALS.items()]
    rows += [(f"{name} + term checks", signal, True) for name, signal in SIGNALS.items() if name in COMBINED]
    rows.append(("term checks alone (before calibration)", None, False))
    for name, signal, with_terms in rows:
        out = evaluate(records, signal, with_terms=with_terms)
        auc = "–" if out["auroc"] is None else f"{out['auroc']:.2f}"
        threshold = "–" if out["threshold"] is None else f"{out['threshold']:.3f}"
        print(
            f"| {name} | {out['with_signal']} / {out['records']} | {auc} | {threshold} | "
            f"{out['cost']} ({out['wrong_shown']} wrong shown, {out['correct_withheld']} right withheld) | "
            f"{out['answerable_declined']} | {out['unanswerable_declined']} | {out['declines_with_gold']} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
