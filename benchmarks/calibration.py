"""`python -m benchmarks calibrate`: choose RAG_ANSWER_CONFIDENCE_THRESHOLD from QA records; check it on
held-out ones.

The engine shows an answer only when its confidence (the mean token log-probability of the model's short
answer, `answer_confidence`) is at least the threshold; below it the answer becomes "not found". Every QA
record keeps the answer the engine would have shown with no decline (`candidate_answer`), whether that held a
gold answer (`candidate_accuracy`) and its confidence, so any threshold can be replayed on the records of one
run without running a model again. Make that run with the confidence decline disabled (-1000, the default):
an answer the run's own threshold declined is still replayed from its record (`declined_answer`), but the
run's own report then mixes in a threshold that has not been chosen yet.

What each record counts as, at a threshold t:
- correct: an answerable question whose candidate answer holds a gold answer (candidate_accuracy 1);
  everything else, an unanswerable question included, is wrong if shown;
- declined at every t: the model (or retrieval) found no answer itself (not_found and no declined answer);
  no threshold can make the engine show one, so these count as declined in every rate;
- shown: any other record with confidence >= t; declined below it;
- left out, and counted: records of a failed question (`error`) and records with a candidate answer but no
  confidence (a model without log-probabilities), since no threshold can be replayed on them.

The operating point (OPERATING_POINT_RULE): over the development records only, the threshold that minimises
COST_WRONG_SHOWN x (wrong answers shown, any answer shown to an unanswerable question included) +
COST_CORRECT_WITHHELD x (correct answers withheld); ties go to the lower threshold (fewer declines). Showing a
wrong answer costs twice a withheld right one: a reader trusts a cited answer, while "not found" only sends
them to read the documents themselves. The test records are then replayed at that threshold, never used to
choose it, and checked against TARGETS.

AUROC (rank-based, ties counted half) measures how well confidence alone orders correct candidates above
wrong or unanswerable ones, over the records with a candidate answer (the model's own declines carry no
answer to rank).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from evals.qa_scoring import with_candidate
from evals.splits import split_of

#: Weights of the operating-point cost: a wrong answer shown costs twice a correct answer withheld.
COST_WRONG_SHOWN = 2
COST_CORRECT_WITHHELD = 1
OPERATING_POINT_RULE = (
    f"threshold minimising {COST_WRONG_SHOWN} x wrong answers shown (any answer to an unanswerable question "
    f"included) + {COST_CORRECT_WITHHELD} x correct answers withheld, over the development records only; "
    "ties -> the lower threshold; an answer is shown when its confidence >= threshold"
)
#: The setting the chosen threshold is printed for.
THRESHOLD_VARIABLE = "RAG_ANSWER_CONFIDENCE_THRESHOLD"
DIGITS = 4
SKIPPED_ERROR = "error"
SKIPPED_NO_CONFIDENCE = "no_confidence"


@dataclass(frozen=True)
class Target:
    """One goal of the confidence decline, checked on the test records at the chosen threshold."""

    metric: str
    comparison: Literal["<=", ">="]
    bound: float

    def met(self, value: float | None) -> bool | None:
        """Whether `value` meets the goal; None when the value is undefined (no record to measure it on)."""
        if value is None:
            return None
        return value <= self.bound if self.comparison == "<=" else value >= self.bound


TARGETS: tuple[Target, ...] = (
    Target("answerable_declined", "<=", 0.20),
    Target("unanswerable_declined", ">=", 0.60),
    Target("declines_with_gold", "<=", 0.10),
    Target("auroc", ">=", 0.85),
)


@dataclass(frozen=True)
class Candidate:
    """What a threshold decides on for one question."""

    qid: str
    answerable: bool
    correct: bool
    """The candidate answer holds a gold answer (answerable questions only)."""
    confidence: float | None
    """None only for a question declined at every threshold."""
    always_declined: bool
    """The model or retrieval found no answer: nothing to show at any threshold."""


# --------------------------------------------------------------------------------------------------------
# Records -> candidates


def candidate_of(record: Mapping[str, Any]) -> Candidate | str:
    """The record as a Candidate, or why it is left out (SKIPPED_ERROR, SKIPPED_NO_CONFIDENCE)."""
    if record.get("error"):
        return SKIPPED_ERROR
    complete = with_candidate(record)
    always_declined = bool(complete.get("not_found")) and not str(complete.get("declined_answer") or "")
    confidence = complete.get("answer_confidence")
    if confidence is None and not always_declined:
        return SKIPPED_NO_CONFIDENCE
    answerable = bool(complete["answerable"])
    return Candidate(
        qid=str(complete.get("qid", "")),
        answerable=answerable,
        correct=answerable and not always_declined and float(complete["candidate_contains_gold"]) == 1.0,
        confidence=None if confidence is None else float(confidence),
        always_declined=always_declined,
    )


def candidates_of(records: Iterable[Mapping[str, Any]]) -> tuple[list[Candidate], dict[str, int]]:
    """The usable candidates of `records`, and how many records were left out for each reason."""
    candidates: list[Candidate] = []
    skipped = {SKIPPED_ERROR: 0, SKIPPED_NO_CONFIDENCE: 0}
    for record in records:
        outcome = candidate_of(record)
        if isinstance(outcome, Candidate):
            candidates.append(outcome)
        else:
            skipped[outcome] += 1
    return candidates, skipped


# --------------------------------------------------------------------------------------------------------
# Ranking quality


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(a random positive scores above a random negative), ties counted half (Mann-Whitney U / (P x N)),
    from average ranks; None when either group is empty."""
    if not positives or not negatives:
        return None
    scored = sorted([(value, True) for value in positives] + [(value, False) for value in negatives])
    positive_rank_sum = 0.0
    start = 0
    while start < len(scored):
        end = start
        while end < len(scored) and scored[end][0] == scored[start][0]:
            end += 1
        average_rank = (start + 1 + end) / 2  # ranks start + 1 .. end share their mean
        positive_rank_sum += average_rank * sum(1 for _value, positive in scored[start:end] if positive)
        start = end
    count_positive, count_negative = len(positives), len(negatives)
    return (positive_rank_sum - count_positive * (count_positive + 1) / 2) / (count_positive * count_negative)


def roc_points(positives: Sequence[float], negatives: Sequence[float]) -> list[tuple[float, float]]:
    """(false positive rate, true positive rate) as the threshold falls through every distinct score,
    from (0, 0) to (1, 1); empty when either group is empty."""
    if not positives or not negatives:
        return []
    points = [(0.0, 0.0)]
    for threshold in sorted(set(positives) | set(negatives), reverse=True):
        true_rate = sum(value >= threshold for value in positives) / len(positives)
        false_rate = sum(value >= threshold for value in negatives) / len(negatives)
        points.append((round(false_rate, DIGITS), round(true_rate, DIGITS)))
    return points


def scores_by_class(candidates: Iterable[Candidate]) -> tuple[list[float], list[float]]:
    """Confidences of the correct candidates and of the wrong or unanswerable ones (declined-at-every-
    threshold questions left out: they hold no answer to rank)."""
    ranked = [candidate for candidate in candidates if not candidate.always_declined]
    positives = [float(c.confidence) for c in ranked if c.correct and c.confidence is not None]
    negatives = [float(c.confidence) for c in ranked if not c.correct and c.confidence is not None]
    return positives, negatives


# --------------------------------------------------------------------------------------------------------
# Outcomes at a threshold


def shown(candidate: Candidate, threshold: float) -> bool:
    """The engine shows the candidate answer: it has one and its confidence reaches the threshold."""
    return (
        not candidate.always_declined
        and candidate.confidence is not None
        and candidate.confidence >= threshold
    )


def _rate(count: int, total: int) -> float | None:
    return round(count / total, DIGITS) if total else None


def outcome_at(candidates: Sequence[Candidate], threshold: float) -> dict[str, Any]:
    """Counts, rates and cost of replaying `threshold` on the candidates."""
    answerable = [c for c in candidates if c.answerable]
    unanswerable = [c for c in candidates if not c.answerable]
    declined = [c for c in candidates if not shown(c, threshold)]
    answered_correct = sum(1 for c in answerable if c.correct and shown(c, threshold))
    wrong_shown = sum(1 for c in candidates if not c.correct and shown(c, threshold))
    correct_withheld = sum(1 for c in declined if c.correct)
    answerable_declined = sum(1 for c in answerable if not shown(c, threshold))
    unanswerable_declined = sum(1 for c in unanswerable if not shown(c, threshold))
    return {
        "threshold": threshold,
        "answerable_accuracy": _rate(answered_correct, len(answerable)),
        "answerable_declined": _rate(answerable_declined, len(answerable)),
        "unanswerable_declined": _rate(unanswerable_declined, len(unanswerable)),
        "declines_with_gold": _rate(correct_withheld, len(declined)),
        "wrong_shown": wrong_shown,
        "correct_withheld": correct_withheld,
        "declines": len(declined),
        "cost": COST_WRONG_SHOWN * wrong_shown + COST_CORRECT_WITHHELD * correct_withheld,
    }


def thresholds_of(candidates: Iterable[Candidate]) -> list[float]:
    """Every distinct confidence, ascending, plus the next float above the highest: each threshold between
    two of them decides like the higher one, and the last one declines every answer."""
    confidences = sorted(
        {c.confidence for c in candidates if c.confidence is not None and not c.always_declined}
    )
    if not confidences:
        return []
    return [*confidences, math.nextafter(confidences[-1], math.inf)]


def trade_off(candidates: Sequence[Candidate]) -> list[dict[str, Any]]:
    """outcome_at every threshold of thresholds_of, ascending."""
    return [outcome_at(candidates, threshold) for threshold in thresholds_of(candidates)]


def choose_threshold(candidates: Sequence[Candidate]) -> float:
    """The operating point of OPERATING_POINT_RULE: the lowest threshold of least cost.

    ValueError when no candidate has a confidence (nothing to choose between).
    """
    curve = trade_off(candidates)
    if not curve:
        raise ValueError("no development record has an answer with a confidence: nothing to calibrate")
    best = min(curve, key=lambda outcome: (outcome["cost"], outcome["threshold"]))
    return float(best["threshold"])


def target_checks(outcome: Mapping[str, Any], area: float | None) -> list[dict[str, Any]]:
    """Each target with its measured value and whether it is met (None: undefined on these records)."""
    values = {**outcome, "auroc": area}
    return [
        {
            "metric": target.metric,
            "comparison": target.comparison,
            "bound": target.bound,
            "value": values.get(target.metric),
            "met": target.met(values.get(target.metric)),
        }
        for target in TARGETS
    ]


# --------------------------------------------------------------------------------------------------------
# The report


def split_summary(
    records: Sequence[Mapping[str, Any]], threshold: float, expected_split: str
) -> dict[str, Any]:
    """One side's numbers at `threshold`: counts, left-out records, AUROC, ROC, trade-off curve, targets.

    `split_mismatch` counts records whose question id lies in the other half (evals.splits.split_of): a
    run not made with `--split`, or files passed on the wrong side.
    """
    candidates, skipped = candidates_of(records)
    positives, negatives = scores_by_class(candidates)
    area = auroc(positives, negatives)
    at_threshold = outcome_at(candidates, threshold)
    return {
        "records": len(records),
        "used": len(candidates),
        "skipped": skipped,
        "answerable": sum(1 for c in candidates if c.answerable),
        "unanswerable": sum(1 for c in candidates if not c.answerable),
        "always_declined": sum(1 for c in candidates if c.always_declined),
        "split_mismatch": sum(1 for c in candidates if split_of(c.qid) != expected_split),
        "models": sorted({str(record.get("model") or "unrecorded") for record in records}),
        "auroc": None if area is None else round(area, DIGITS),
        "at_threshold": at_threshold,
        "targets": target_checks(at_threshold, area),
        "roc": roc_points(positives, negatives),
        "curve": trade_off(candidates),
    }


def calibrate(
    dev_records: Sequence[Mapping[str, Any]], test_records: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Choose the threshold on `dev_records` (OPERATING_POINT_RULE) and replay it on `test_records`.

    The targets are reported on the test records; with none, on the development ones, flagged as measured
    on the data the threshold was chosen on. A question in both sets is an error: the test half would no
    longer be held out.
    """
    shared = {str(record.get("qid")) for record in dev_records} & {
        str(record.get("qid")) for record in test_records
    }
    if shared:
        raise ValueError(
            f"{len(shared)} questions are in both the development and test records, e.g. {sorted(shared)[:3]}"
        )
    dev_candidates, _skipped = candidates_of(dev_records)
    threshold = choose_threshold(dev_candidates)
    dev = split_summary(dev_records, threshold, "dev")
    test = split_summary(test_records, threshold, "test") if test_records else None
    return {
        "rule": OPERATING_POINT_RULE,
        "cost_weights": {"wrong_shown": COST_WRONG_SHOWN, "correct_withheld": COST_CORRECT_WITHHELD},
        "threshold": threshold,
        "setting": f"{THRESHOLD_VARIABLE}={threshold!r}",
        "targets_measured_on": "test" if test else "dev (no test records: the threshold was chosen on these)",
        "dev": dev,
        "test": test,
    }
