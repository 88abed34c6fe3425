"""Evaluation metrics: retrieval ranking, extractive QA, citations, ROUGE-L, and the confidence figures
(AUROC, expected calibration error, risk-coverage). Pure Python, no model.

Each function follows a published reference so that numbers are comparable with papers:

- nDCG / recall / MRR follow pytrec_eval as BEIR calls it: gain is the qrels grade itself (not 2^rel - 1),
  the discount is log2(rank + 1), the ideal ranking comes from the qrels, and only grades >= 1 count as
  relevant. A run is a mapping doc -> score there, so a document can appear only once; the functions here
  keep each document's first rank for the same reason.
- EM / F1 follow the SQuAD v1.1 script (normalise, compare, max over gold answers), and for text that
  contains CJK characters they use the CMRC 2018 mixed segmentation: every CJK character is a token of its
  own while runs of other characters (Latin words, numbers) stay whole. Token overlap is counted as a
  multiset intersection, as in SQuAD and MLQA; the CMRC 2018 script counts the longest common substring
  instead, which gives the same number whenever the overlap is one contiguous span.
- ROUGE-L is the F1 (beta = 1) of the longest common subsequence, over the same tokens as F1, so English
  and Chinese answers are measured with the same units as the other QA metrics.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from core.text import CJK_CHAR, CJK_RANGES

#: Qrels grade from which a document counts as relevant (pytrec_eval's default relevance_level).
RELEVANCE_THRESHOLD = 1

#: A space next to a CJK character carries no meaning ("北京 大学" is "北京大学").
_SPACE_NEXT_TO_CJK = re.compile(f"(?<=[{CJK_RANGES}]) +| +(?=[{CJK_RANGES}])")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = frozenset(string.punctuation)
#: Unicode general categories removed by normalisation: every punctuation (P*) and symbol (S*) category.
#: That covers SQuAD's string.punctuation (which includes symbols such as $ + < = > ^ ` | ~) and the
#: full-width Chinese marks of the CMRC 2018 script (，。：？！“”；’《》……·、「」（）－～『』).
_REMOVED_CATEGORY_PREFIXES = ("P", "S")


# --------------------------------------------------------------------------------------------------------
# Retrieval


def _check_k(k: int) -> None:
    """A cutoff below 1 is always a caller bug; failing loudly beats silently returning 0."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def _unique_in_order(ids: Iterable[str]) -> list[str]:
    """`ids` without repeats, each at its first position."""
    return list(dict.fromkeys(ids))


def dedupe_to_documents(ranked_chunk_doc_ids: Iterable[str]) -> list[str]:
    """Document ranking from a chunk ranking: each document at the rank of its best (first) chunk.

    The qrels judge documents while the index returns chunks; scoring every chunk of a relevant document
    would reward a retriever for returning the same document several times.
    """
    return _unique_in_order(ranked_chunk_doc_ids)


def _relevant(relevance: Mapping[str, int]) -> set[str]:
    """Judged-relevant documents (grade >= RELEVANCE_THRESHOLD); grade 0 or below means judged irrelevant."""
    return {doc_id for doc_id, grade in relevance.items() if grade >= RELEVANCE_THRESHOLD}


def ndcg_at_k(ranked_doc_ids: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """nDCG@k as pytrec_eval's ndcg_cut computes it: DCG = sum(rel_i / log2(i + 1)) over ranks i = 1..k.

    The ideal DCG sorts the qrels grades; 0.0 when the query has no relevant document (as pytrec_eval).
    Negative grades (some TREC qrels use them) count as 0 gain.
    """
    _check_k(k)
    ranked = _unique_in_order(ranked_doc_ids)[:k]
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
    found = relevant.intersection(_unique_in_order(ranked_doc_ids)[:k])
    return len(found) / len(relevant)


def mrr_at_k(ranked_doc_ids: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document within the top k, else 0.0."""
    _check_k(k)
    relevant = _relevant(relevance)
    for rank, doc_id in enumerate(_unique_in_order(ranked_doc_ids)[:k], start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def support_recall_at_k(retrieved_ids: Sequence[str], supporting_ids: set[str], k: int) -> float | None:
    """Share of the gold supporting passages (e.g. HotpotQA's two paragraphs) found in the top k retrieved.

    None when the example has no supporting passage: the metric is undefined there, and averaging a 0 or
    a 1 in would bias the mean either way.
    """
    _check_k(k)
    if not supporting_ids:
        return None
    found = supporting_ids.intersection(_unique_in_order(retrieved_ids)[:k])
    return len(found) / len(supporting_ids)


def linear_percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between ranks, as numpy's default method.

    The one percentile of every report (retrieval, QA, latency, load, the campaigns), so a p95 means the same
    in each: position (n - 1) * q / 100 in the sorted values, interpolated between its two neighbours
    (p50 of 100, 200, 300, 400 is 250; nearest rank would say 200). Used for latency reports (p50/p95),
    where numpy would be the only reason to import numpy.
    """
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


def mean_of_defined(values: Iterable[float | None]) -> float | None:
    """Mean over the values that are not None (metrics return None where undefined); None if none is."""
    defined = [value for value in values if value is not None]
    return sum(defined) / len(defined) if defined else None


# --------------------------------------------------------------------------------------------------------
# Extractive QA


def _is_removed_char(char: str) -> bool:
    """Punctuation or symbol, ASCII or not (Chinese full-width marks included)."""
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith(_REMOVED_CATEGORY_PREFIXES)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation extended to Chinese: lowercase, drop punctuation (any script), drop English
    articles, collapse whitespace, and drop spaces next to CJK characters (they separate nothing there).

    Punctuation is deleted, not replaced by a space ("don't" -> "dont"), exactly as in the SQuAD script.
    """
    lowered = text.lower()
    without_punctuation = "".join(char for char in lowered if not _is_removed_char(char))
    without_articles = _ARTICLES.sub(" ", without_punctuation)
    collapsed = " ".join(without_articles.split())
    return _SPACE_NEXT_TO_CJK.sub("", collapsed)


def answer_tokens(text: str) -> list[str]:
    """Tokens of the normalised text: each CJK character alone, other runs split on whitespace.

    For text without CJK characters this is the SQuAD whitespace tokenisation; for Chinese it is the
    CMRC 2018 mixed segmentation ("ω-force是" -> ["ωforce", "是"] after normalisation).
    """
    tokens: list[str] = []
    current: list[str] = []
    for char in normalize_answer(text):
        if char.isspace() or CJK_CHAR.match(char):
            if current:
                tokens.append("".join(current))
                current = []
            if not char.isspace():
                tokens.append(char)
        else:
            current.append(char)
    if current:
        tokens.append("".join(current))
    return tokens


def _gold_list(gold_answers: str | Sequence[str]) -> list[str]:
    """Gold answers as SQuAD v2's script takes them: those that normalise to nothing are dropped, and a
    question left with none is unanswerable, whose only correct prediction is the empty answer.
    """
    golds = [gold_answers] if isinstance(gold_answers, str) else list(gold_answers)
    kept = [gold for gold in golds if normalize_answer(gold)]
    return kept or [""]


def exact_match(prediction: str, gold_answers: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    normalized_prediction = normalize_answer(prediction)
    return max(float(normalized_prediction == normalize_answer(gold)) for gold in _gold_list(gold_answers))


def contains_gold_answer(prediction: str, gold_answers: Sequence[str]) -> float:
    """1.0 when a gold answer's normalised tokens occur, in order and contiguous, in the prediction's.

    What the QA reports publish as `contains_gold` (and the campaigns' model and prompt comparisons too):
    the Adaptive-RAG paper's "accuracy" (Jeong et al., 2024), which credits a right answer inside a longer
    reply that EM rejects, measured on token boundaries rather than as a substring.

    Token boundaries matter: "1931" is not found in "19310"; for Chinese the tokens are characters (CMRC's
    segmentation). An unanswerable question (no gold answer) is accurate only with an empty prediction.
    """
    predicted = answer_tokens(prediction)
    golds = [tokens for tokens in (answer_tokens(gold) for gold in gold_answers) if tokens]
    if not golds:
        return float(not predicted)
    for gold in golds:
        width = len(gold)
        if any(predicted[start : start + width] == gold for start in range(len(predicted) - width + 1)):
            return 1.0
    return 0.0


def _overlap_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    """SQuAD's token F1; when either side is empty, 1.0 only if both are (unanswerable questions)."""
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    common = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(prediction_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


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


def _rouge_l_single(prediction_tokens: list[str], reference_tokens: list[str]) -> float:
    """ROUGE-L F1 against one reference; both empty counts as a match, one empty as 0."""
    if not prediction_tokens or not reference_tokens:
        return float(prediction_tokens == reference_tokens)
    lcs = _lcs_length(prediction_tokens, reference_tokens)
    if lcs == 0:
        return 0.0
    precision = lcs / len(prediction_tokens)
    recall = lcs / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def rouge_l(prediction: str, reference: str | Sequence[str]) -> float:
    """ROUGE-L F1 (LCS-based), max over references when several are given (e.g. CMRC's gold answers).

    Unlike token F1 it rewards keeping the gold tokens in order, which matters for long generated answers.
    """
    references = [reference] if isinstance(reference, str) else list(reference)
    if not references:
        raise ValueError("rouge_l needs at least one reference")
    prediction_tokens = answer_tokens(prediction)
    return max(_rouge_l_single(prediction_tokens, answer_tokens(ref)) for ref in references)


# --------------------------------------------------------------------------------------------------------
# Citations


def citation_precision(cited_ids: Sequence[str], supporting_ids: set[str]) -> float | None:
    """Share of the distinct cited passages that are gold supporting passages; None when nothing is cited.

    An answer without citations has no precision to measure (it is counted by a citation-rate metric
    instead); returning 0 or 1 would bias the mean. Citing the same passage twice counts once.
    """
    distinct = _unique_in_order(cited_ids)
    if not distinct:
        return None
    return sum(cited in supporting_ids for cited in distinct) / len(distinct)


# --------------------------------------------------------------------------------------------------------
# Confidence: ranking, calibration and selective answering

#: Equal-width probability bins of the expected calibration error (Guo et al., 2017, use 15; 10 is the
#: reliability diagram's usual grid and keeps each bin populated on a few hundred records).
CALIBRATION_BINS = 10


def auroc(scores: Sequence[float], labels: Sequence[float]) -> float | None:
    """Area under the ROC curve: P(a random positive (label 1) scores above a random negative (label 0)),
    ties counted half (the Mann-Whitney U from average ranks); None when either class is absent."""
    if len(scores) != len(labels):
        raise ValueError(f"auroc: {len(scores)} scores but {len(labels)} labels")
    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if not positives or not negatives:
        return None
    order = sorted(range(len(scores)), key=lambda index: scores[index])
    positive_rank_sum = 0.0
    start = 0
    while start < len(order):
        end = start
        while end < len(order) and scores[order[end]] == scores[order[start]]:
            end += 1
        average_rank = (start + 1 + end) / 2  # ranks start + 1 .. end share their mean
        positive_rank_sum += average_rank * sum(1 for index in order[start:end] if labels[index])
        start = end
    return (positive_rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def calibration_bin(probability: float, bins: int = CALIBRATION_BINS) -> int:
    """The equal-width bin of a probability: [0, 1/bins), ..., [(bins - 1)/bins, 1] (1.0 in the last)."""
    return min(bins - 1, max(0, math.floor(probability * bins)))


def expected_calibration_error(
    probabilities: Sequence[float], labels: Sequence[float], bins: int = CALIBRATION_BINS
) -> float | None:
    """Expected calibration error: the mean over equal-width bins of |mean probability - share right|,
    each bin weighted by its share of the records; None without records."""
    if len(probabilities) != len(labels):
        raise ValueError(f"calibration error: {len(probabilities)} probabilities but {len(labels)} labels")
    if not probabilities:
        return None
    totals = [[0, 0.0, 0.0] for _ in range(bins)]  # count, sum of probabilities, sum of labels
    for probability, label in zip(probabilities, labels, strict=True):
        total = totals[calibration_bin(probability, bins)]
        total[0] += 1
        total[1] += probability
        total[2] += float(label)
    return sum(abs(summed - right) for count, summed, right in totals if count) / len(probabilities)


def risk_coverage(probabilities: Sequence[float], labels: Sequence[float]) -> list[tuple[float, float]]:
    """(coverage, accuracy of the answers shown) as the threshold falls through the distinct probabilities
    (highest first): showing only answers at or above it covers that share of the records and is right on
    that share of them. Records of equal probability enter together; empty without records."""
    if len(probabilities) != len(labels):
        raise ValueError(f"risk_coverage: {len(probabilities)} probabilities but {len(labels)} labels")
    order = sorted(range(len(probabilities)), key=lambda index: -probabilities[index])
    points: list[tuple[float, float]] = []
    shown = right = 0
    for position, index in enumerate(order):
        shown += 1
        right += 1 if labels[index] else 0
        last = position + 1 == len(order) or probabilities[order[position + 1]] != probabilities[index]
        if last:
            points.append((shown / len(order), right / shown))
    return points
