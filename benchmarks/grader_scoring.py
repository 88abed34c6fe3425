"""Scoring of `python -m benchmarks graders`: binary relevance metrics and the score grader's ranking quality.

Pure arithmetic on (gold label, verdict) pairs, apart from the run in benchmarks/graders.py, so the numbers
can
be checked on hand-made labels. Conventions, chosen to match the QA report: a metric whose denominator is
empty (precision with no passage judged relevant, recall with no relevant passage) is None rather than 0,
because "undefined" and "always wrong" must not look alike in a table; values are rounded to DIGITS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DIGITS = 4


def _ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator rounded, None when the denominator is 0 (the metric is undefined)."""
    return round(numerator / denominator, DIGITS) if denominator else None


def _check_lengths(labels: Sequence[Any], other: Sequence[Any], name: str) -> None:
    """Labels and verdicts pair up one to one; a length mismatch is a caller bug, never silently zipped."""
    if len(labels) != len(other):
        raise ValueError(f"{len(labels)} labels but {len(other)} {name}")


def binary_metrics(labels: Sequence[bool], predictions: Sequence[bool]) -> dict[str, Any]:
    """Accuracy, precision, recall and F1 of `predictions` against gold `labels` (True = relevant), the share
    judged relevant, and the confusion counts.

    F1 is None only when precision or recall is undefined; it is 0.0 when both are 0.
    """
    _check_lengths(labels, predictions, "predictions")
    true_positive = sum(1 for label, guess in zip(labels, predictions, strict=True) if label and guess)
    false_positive = sum(1 for label, guess in zip(labels, predictions, strict=True) if guess and not label)
    false_negative = sum(1 for label, guess in zip(labels, predictions, strict=True) if label and not guess)
    true_negative = len(labels) - true_positive - false_positive - false_negative
    precision = _ratio(true_positive, true_positive + false_positive)
    recall = _ratio(true_positive, true_positive + false_negative)
    if precision is None or recall is None:
        f1 = None
    elif precision + recall == 0:
        f1 = 0.0
    else:
        f1 = round(2 * precision * recall / (precision + recall), DIGITS)
    return {
        "accuracy": _ratio(true_positive + true_negative, len(labels)),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "judged_relevant": _ratio(true_positive + false_positive, len(labels)),
        "confusion": {"tp": true_positive, "fp": false_positive, "fn": false_negative, "tn": true_negative},
    }


def base_rate(labels: Sequence[bool]) -> float | None:
    """Share of passages labelled relevant: the precision of calling everything relevant."""
    return _ratio(sum(1 for label in labels if label), len(labels))


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), DIGITS) if values else None


def roc_auc(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Probability that a random relevant passage outscores a random irrelevant one (ties count half):
    the Mann-Whitney form of ROC AUC, from average ranks so that it stays O(n log n) on large runs.

    None when one class is empty (the ranking cannot be judged).
    """
    _check_lengths(labels, scores, "scores")
    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if not positives or not negatives:
        return None
    order = sorted(range(len(scores)), key=lambda index: scores[index])
    ranks = [0.0] * len(scores)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        average_rank = (start + end) / 2 + 1  # 1-based rank shared by a run of ties
        for position in range(start, end + 1):
            ranks[order[position]] = average_rank
        start = end + 1
    positive_rank_sum = sum(rank for rank, label in zip(ranks, labels, strict=True) if label)
    wins = positive_rank_sum - positives * (positives + 1) / 2
    return round(wins / (positives * negatives), DIGITS)


def ranking_quality(labels: Sequence[bool], scores: Sequence[float]) -> dict[str, float | None]:
    """How well the score grader's continuous score separates relevant from irrelevant passages,
    whatever the threshold: the mean score of each class, their gap, and ROC AUC (0.5 = chance)."""
    _check_lengths(labels, scores, "scores")
    relevant = [score for score, label in zip(scores, labels, strict=True) if label]
    irrelevant = [score for score, label in zip(scores, labels, strict=True) if not label]
    mean_relevant, mean_irrelevant = _mean(relevant), _mean(irrelevant)
    gap = (
        round(mean_relevant - mean_irrelevant, DIGITS)
        if mean_relevant is not None and mean_irrelevant is not None
        else None
    )
    return {
        "mean_score_relevant": mean_relevant,
        "mean_score_irrelevant": mean_irrelevant,
        "score_gap": gap,
        "auc": roc_auc(labels, scores),
    }


def cost_summary(ms_per_question: Sequence[float]) -> dict[str, float | None]:
    """Total and mean grading time per question (milliseconds)."""
    total = sum(ms_per_question)
    return {
        "total_ms": round(total, 2),
        "mean_ms_per_question": round(total / len(ms_per_question), 2) if ms_per_question else None,
    }
