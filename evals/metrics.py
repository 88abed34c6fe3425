"""Evaluation metrics: retrieval ranking, extractive QA, citations, ROUGE-L, and the confidence figures
(AUROC, expected calibration error, risk-coverage). Pure Python, no model.

Each follows a published reference so numbers compare with papers: nDCG / recall / MRR as pytrec_eval computes
them for BEIR (gain = grade, each document at its first rank); EM / F1 as the SQuAD v1.1 script, with CMRC
2018's mixed segmentation for CJK text (each CJK character a token); ROUGE-L as the LCS F1 over those tokens.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from core.text import CJK_RANGES

#: Decimals of the figures in a report.
DIGITS = 4
#: Qrels grade from which a document counts as relevant (pytrec_eval's default relevance_level).
RELEVANCE_THRESHOLD = 1

#: A space next to a CJK character carries no meaning ("北京 大学" is "北京大学").
_SPACE_NEXT_TO_CJK = re.compile(f"(?<=[{CJK_RANGES}]) +| +(?=[{CJK_RANGES}])")
#: One CJK character, or a run of other characters up to a space or a CJK character.
_ANSWER_TOKEN = re.compile(f"[{CJK_RANGES}]|[^\\s{CJK_RANGES}]+")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = frozenset(string.punctuation)
#: Unicode categories removed by normalisation (punctuation, symbols): SQuAD's and CMRC 2018's marks alike.
_REMOVED_CATEGORY_PREFIXES = ("P", "S")


def _check_k(k: int) -> None:
    """A cutoff below 1 is always a caller bug; failing loudly beats silently returning 0."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def dedupe_to_documents(ranked_ids: Iterable[str]) -> list[str]:
    """Each id once at its first rank: a document ranks as its best chunk (the qrels judge documents, and
    scoring every chunk would reward returning one document several times)."""
    return list(dict.fromkeys(ranked_ids))


def _relevant(relevance: Mapping[str, int]) -> set[str]:
    """Judged-relevant documents (grade >= RELEVANCE_THRESHOLD); grade 0 or below means judged irrelevant."""
    return {doc_id for doc_id, grade in relevance.items() if grade >= RELEVANCE_THRESHOLD}


def ndcg_at_k(ranked_doc_ids: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """nDCG@k as pytrec_eval's ndcg_cut: sum(rel_i / log2(i + 1)) over the ideal's; 0.0 without a relevant
    document; negative grades count as 0 gain."""
    _check_k(k)
    ranked = dedupe_to_documents(ranked_doc_ids)[:k]
    dcg = sum(
        max(relevance.get(doc_id, 0), 0) / math.log2(rank + 1) for rank, doc_id in enumerate(ranked, start=1)
    )
    ideal_grades = sorted((grade for grade in relevance.values() if grade > 0), reverse=True)[:k]
    ideal = sum(grade / math.log2(rank + 1) for rank, grade in enumerate(ideal_grades, start=1))
    return dcg / ideal if ideal > 0 else 0.0


def recall_at_k(ranked_doc_ids: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top k; 0.0 when the query has none (as pytrec_eval)."""
    _check_k(k)
    relevant = _relevant(relevance)
    if not relevant:
        return 0.0
    found = relevant.intersection(dedupe_to_documents(ranked_doc_ids)[:k])
    return len(found) / len(relevant)


def mrr_at_k(ranked_doc_ids: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document within the top k, else 0.0."""
    _check_k(k)
    relevant = _relevant(relevance)
    for rank, doc_id in enumerate(dedupe_to_documents(ranked_doc_ids)[:k], start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def support_recall_at_k(retrieved_ids: Sequence[str], supporting_ids: set[str], k: int) -> float | None:
    """Share of the gold supporting passages found in the top k retrieved; None without any (undefined)."""
    _check_k(k)
    if not supporting_ids:
        return None
    found = supporting_ids.intersection(dedupe_to_documents(retrieved_ids)[:k])
    return len(found) / len(supporting_ids)


def linear_percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0..100), linearly interpolated between ranks as numpy's default: the one
    percentile of every report, so a p95 means the same in each."""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within [0, 100], got {q}")
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of an empty sequence")
    position = (len(ordered) - 1) * q / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    fraction = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * fraction


def rounded(value: float | None) -> float | None:
    """A figure at DIGITS decimals (None stays None)."""
    return None if value is None else round(value, DIGITS)


def share(count: int, total: int) -> float | None:
    """count / total at DIGITS decimals; None for an empty total."""
    return round(count / total, DIGITS) if total else None


def mean_of_defined(values: Iterable[float | None]) -> float | None:
    """Mean over the values that are not None (metrics return None where undefined); None if none is."""
    defined = [value for value in values if value is not None]
    return sum(defined) / len(defined) if defined else None


def _is_removed_char(char: str) -> bool:
    """Punctuation or symbol, ASCII or not (Chinese full-width marks included)."""
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith(_REMOVED_CATEGORY_PREFIXES)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation extended to Chinese: lowercase, delete punctuation (any script), drop English
    articles, collapse whitespace, and drop spaces next to CJK characters (they separate nothing there)."""
    lowered = text.lower()
    without_punctuation = "".join(char for char in lowered if not _is_removed_char(char))
    without_articles = _ARTICLES.sub(" ", without_punctuation)
    collapsed = " ".join(without_articles.split())
    return _SPACE_NEXT_TO_CJK.sub("", collapsed)


def answer_tokens(text: str) -> list[str]:
    """Tokens of the normalised text: each CJK character alone, other runs split on whitespace (CMRC 2018's
    mixed segmentation; SQuAD's tokens for text without CJK)."""
    return _ANSWER_TOKEN.findall(normalize_answer(text))


def _gold_list(gold_answers: str | Sequence[str]) -> list[str]:
    """Gold answers as SQuAD v2's script takes them: empty ones dropped, none left means "" (unanswerable)."""
    golds = [gold_answers] if isinstance(gold_answers, str) else list(gold_answers)
    kept = [gold for gold in golds if normalize_answer(gold)]
    return kept or [""]


def exact_match(prediction: str, gold_answers: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    normalized_prediction = normalize_answer(prediction)
    return max(float(normalized_prediction == normalize_answer(gold)) for gold in _gold_list(gold_answers))


def contains_gold_answer(prediction: str, gold_answers: Sequence[str]) -> float:
    """1.0 when a gold answer's tokens occur contiguously in the prediction's (Adaptive-RAG's "accuracy",
    on token boundaries: "1931" is not in "19310"); without gold answers, only an empty prediction."""
    predicted = answer_tokens(prediction)
    golds = [tokens for tokens in (answer_tokens(gold) for gold in gold_answers) if tokens]
    if not golds:
        return float(not predicted)
    starts = range(len(predicted))
    return float(any(predicted[start : start + len(gold)] == gold for gold in golds for start in starts))


def _f_measure(matched: int, predicted: int, gold: int) -> float:
    """F1 of `matched` tokens out of `predicted` and `gold`; with an empty side, 1.0 only if both are."""
    if not predicted or not gold:
        return float(predicted == gold)
    return 2 * matched / (predicted + gold)


def _overlap_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    """SQuAD's token F1 (multiset overlap)."""
    common = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    return _f_measure(common, len(prediction_tokens), len(gold_tokens))


def f1_score(prediction: str, gold_answers: str | Sequence[str]) -> float:
    """Token F1, max over gold answers: word tokens for English, character tokens for CJK text."""
    prediction_tokens = answer_tokens(prediction)
    return max(_overlap_f1(prediction_tokens, answer_tokens(gold)) for gold in _gold_list(gold_answers))


def _lcs_length(first: Sequence[str], second: Sequence[str]) -> int:
    """Length of the longest common subsequence, in O(len(first) * len(second)) time and O(len) memory."""
    if len(first) < len(second):
        first, second = second, first
    previous = [0] * (len(second) + 1)
    for item in first:
        current = [0]
        for index, other in enumerate(second, start=1):
            current.append(previous[index - 1] + 1 if item == other else max(previous[index], current[-1]))
        previous = current
    return previous[-1]


def rouge_l(prediction: str, reference: str | Sequence[str]) -> float:
    """ROUGE-L F1 (LCS-based), max over the references: unlike token F1 it rewards gold tokens in order."""
    references = [reference] if isinstance(reference, str) else list(reference)
    if not references:
        raise ValueError("rouge_l needs at least one reference")
    predicted = answer_tokens(prediction)
    return max(
        _f_measure(_lcs_length(predicted, gold), len(predicted), len(gold))
        for gold in map(answer_tokens, references)
    )


def citation_precision(cited_ids: Sequence[str], supporting_ids: set[str]) -> float | None:
    """Share of the distinct cited passages that are gold; None when nothing is cited (undefined)."""
    distinct = dedupe_to_documents(cited_ids)
    if not distinct:
        return None
    return sum(cited in supporting_ids for cited in distinct) / len(distinct)


#: Equal-width probability bins of the calibration error (10 keeps bins populated on a few hundred records).
CALIBRATION_BINS = 10


def auroc(scores: Sequence[float], labels: Sequence[float]) -> float | None:
    """Area under the ROC curve: P(a random positive (label 1) scores above a random negative (label 0)),
    ties counted half (the Mann-Whitney U); None when either class is absent."""
    if len(scores) != len(labels):
        raise ValueError(f"auroc: {len(scores)} scores but {len(labels)} labels")
    positives = [score for score, label in zip(scores, labels, strict=True) if label]
    negatives = sorted(score for score, label in zip(scores, labels, strict=True) if not label)
    if not positives or not negatives:
        return None
    below_or_tied = sum(bisect_left(negatives, s) + bisect_right(negatives, s) for s in positives) / 2
    return below_or_tied / (len(positives) * len(negatives))


def calibration_bin(probability: float, bins: int = CALIBRATION_BINS) -> int:
    """The equal-width bin of a probability: [0, 1/bins), ..., [(bins - 1)/bins, 1] (1.0 in the last)."""
    return min(bins - 1, max(0, math.floor(probability * bins)))


def expected_calibration_error(
    probabilities: Sequence[float], labels: Sequence[float], bins: int = CALIBRATION_BINS
) -> float | None:
    """Mean over equal-width bins of |mean probability - share right|, weighted by size; None if empty."""
    if len(probabilities) != len(labels):
        raise ValueError(f"calibration error: {len(probabilities)} probabilities but {len(labels)} labels")
    if not probabilities:
        return None
    totals = calibration_totals(probabilities, labels, bins)
    return sum(abs(summed - right) for _count, summed, right in totals) / len(probabilities)


def calibration_totals(
    probabilities: Sequence[float], labels: Sequence[float], bins: int = CALIBRATION_BINS
) -> list[tuple[int, float, float]]:
    """(count, sum of probabilities, sum of labels) of each non-empty equal-width bin, in bin order."""
    totals = [[0, 0.0, 0.0] for _ in range(bins)]
    for probability, label in zip(probabilities, labels, strict=True):
        total = totals[calibration_bin(probability, bins)]
        total[0] += 1
        total[1] += probability
        total[2] += float(label)
    return [(int(count), summed, right) for count, summed, right in totals if count]


def band_counts(
    bands: Sequence[str], right: Sequence[bool], unanswerable: Sequence[bool], names: Iterable[str]
) -> dict[str, dict[str, int]]:
    """Per band name: its answers, those whose candidate was right, and those of unanswerable questions."""
    rows = list(zip(bands, right, unanswerable, strict=True))
    return {
        name: {
            "n": sum(band == name for band, _, _ in rows),
            "right": sum(band == name and ok for band, ok, _ in rows),
            "unanswerable": sum(band == name and no for band, _, no in rows),
        }
        for name in names
    }


def risk_coverage(probabilities: Sequence[float], labels: Sequence[float]) -> list[tuple[float, float]]:
    """(coverage, accuracy of the answers shown) as the threshold falls through the distinct probabilities
    (highest first): showing only answers at or above it covers that share of the records and is right on
    that share of them. Records of equal probability enter together; empty without records."""
    if len(probabilities) != len(labels):
        raise ValueError(f"risk_coverage: {len(probabilities)} probabilities but {len(labels)} labels")
    order = sorted(range(len(probabilities)), key=lambda index: -probabilities[index])
    points: list[tuple[float, float]] = []
    right = 0
    for shown, index in enumerate(order, start=1):
        right += 1 if labels[index] else 0
        if shown == len(order) or probabilities[order[shown]] != probabilities[index]:  # last of a tie
            points.append((shown / len(order), right / shown))
    return points
