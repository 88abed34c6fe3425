"""Evaluation metrics against hand-computed cases (the arithmetic is in the comments)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np
import pytest

from core.text import contains_cjk
from evals.metrics import (
    answer_tokens,
    auroc,
    citation_precision,
    dedupe_to_documents,
    exact_match,
    expected_calibration_error,
    f1_score,
    linear_percentile,
    mean_of_defined,
    mrr_at_k,
    ndcg_at_k,
    normalize_answer,
    recall_at_k,
    rouge_l,
    support_recall_at_k,
)

LOG2_3 = math.log2(3)

# --------------------------------------------------------------------------------------------------------
# Retrieval


def test_ndcg_one_relevant_at_rank_two() -> None:
    # DCG = 0/log2(2) + 1/log2(3) + 0/log2(4) = 0.6309; ideal = 1/log2(2) = 1 -> nDCG = 0.6309
    assert ndcg_at_k(["d1", "d2", "d3"], {"d2": 1}, k=3) == pytest.approx(1 / LOG2_3)


def test_ndcg_graded_relevance_uses_grade_as_gain() -> None:
    # ranking a(1), b(2), c(0); d(3) is relevant but not retrieved.
    # DCG  = 1/log2(2) + 2/log2(3) + 0          = 1 + 1.26186          = 2.26186
    # IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4)  = 3 + 1.26186 + 0.5    = 4.76186
    relevance = {"a": 1, "b": 2, "c": 0, "d": 3}
    expected = (1 + 2 / LOG2_3) / (3 + 2 / LOG2_3 + 0.5)
    assert ndcg_at_k(["a", "b", "c"], relevance, k=3) == pytest.approx(expected)
    assert expected == pytest.approx(0.47499, abs=1e-5)


def test_ndcg_cutoff_and_ideal_truncated_at_k() -> None:
    # the relevant doc is at rank 3, outside k=2 -> 0
    assert ndcg_at_k(["x", "y", "a"], {"a": 1}, k=2) == 0.0
    # three relevant docs but k=1: ideal = 1/log2(2) = 1, DCG = 1 -> 1.0
    assert ndcg_at_k(["a"], {"a": 1, "b": 1, "c": 1}, k=1) == pytest.approx(1.0)
    # perfect ranking of two relevant docs: (1 + 1/log2(3)) / (1 + 1/log2(3)) = 1
    assert ndcg_at_k(["a", "b", "x"], {"a": 1, "b": 1}, k=10) == pytest.approx(1.0)


def test_ndcg_counts_a_repeated_document_once() -> None:
    # [a, a, b] is scored as [a, b]: DCG = 1 + 1/log2(3) = IDCG -> 1.0 (not above 1)
    assert ndcg_at_k(["a", "a", "b"], {"a": 1, "b": 1}, k=2) == pytest.approx(1.0)


def test_ndcg_without_relevant_documents_is_zero() -> None:
    assert ndcg_at_k(["a", "b"], {}, k=10) == 0.0
    assert ndcg_at_k(["a", "b"], {"a": 0}, k=10) == 0.0


@pytest.mark.parametrize("metric", [ndcg_at_k, recall_at_k, mrr_at_k])
def test_retrieval_metrics_reject_k_below_one(
    metric: Callable[[list[str], dict[str, int], int], float],
) -> None:
    with pytest.raises(ValueError, match="k must be"):
        metric(["a"], {"a": 1}, 0)


def test_recall_at_k() -> None:
    # relevant = {a, b, c} (z has grade 0: judged irrelevant)
    relevance = {"a": 1, "b": 1, "c": 2, "z": 0}
    ranking = ["x", "a", "y", "b", "z"]
    assert recall_at_k(ranking, relevance, k=1) == 0.0  # {}      -> 0/3
    assert recall_at_k(ranking, relevance, k=2) == pytest.approx(1 / 3)  # {a}    -> 1/3
    assert recall_at_k(ranking, relevance, k=5) == pytest.approx(2 / 3)  # {a, b} -> 2/3
    assert recall_at_k(ranking, {}, k=5) == 0.0


def test_mrr_at_k() -> None:
    # first relevant doc at rank 3 -> 1/3; outside the cutoff k=2 -> 0
    assert mrr_at_k(["x", "y", "a", "b"], {"a": 1, "b": 1}, k=3) == pytest.approx(1 / 3)
    assert mrr_at_k(["x", "y", "a"], {"a": 1}, k=2) == 0.0
    # a duplicate does not push the relevant doc down: [x, x, a] -> [x, a] -> 1/2
    assert mrr_at_k(["x", "x", "a"], {"a": 1}, k=3) == pytest.approx(1 / 2)


def test_dedupe_to_documents_keeps_best_chunk_rank() -> None:
    assert dedupe_to_documents(["d1", "d2", "d1", "d3", "d2"]) == ["d1", "d2", "d3"]
    assert dedupe_to_documents([]) == []


def test_support_recall_at_k() -> None:
    # gold {a, b}: top-2 [a, x] holds 1 of 2 -> 0.5; top-3 holds both -> 1.0
    assert support_recall_at_k(["a", "x", "b"], {"a", "b"}, k=2) == pytest.approx(0.5)
    assert support_recall_at_k(["a", "x", "b"], {"a", "b"}, k=3) == pytest.approx(1.0)
    assert support_recall_at_k(["a"], set(), k=3) is None


def test_percentile_linear_interpolation() -> None:
    values = [4.0, 1.0, 3.0, 2.0]  # sorted: 1, 2, 3, 4
    assert linear_percentile(values, 50) == pytest.approx(2.5)  # position 3*0.5 = 1.5 -> 2 + 0.5*(3-2)
    assert linear_percentile(values, 95) == pytest.approx(3.85)  # position 3*0.95 = 2.85 -> 3 + 0.85*(4-3)
    assert linear_percentile(values, 0) == 1.0
    assert linear_percentile(values, 100) == 4.0
    assert linear_percentile([7.0], 95) == 7.0
    sample = [random.Random(7).uniform(0, 100) for _ in range(37)]
    for q in (5, 50, 90, 99):
        assert linear_percentile(sample, q) == pytest.approx(float(np.percentile(sample, q)))


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        linear_percentile([], 50)
    with pytest.raises(ValueError):
        linear_percentile([1.0], 101)


def test_mean_of_defined_skips_none() -> None:
    assert mean_of_defined([1.0, None, 0.0]) == pytest.approx(0.5)
    assert mean_of_defined([None, None]) is None


# --------------------------------------------------------------------------------------------------------
# QA: normalisation and tokens


def test_normalize_answer_english() -> None:
    assert normalize_answer("The  Cat, sat!") == "cat sat"
    assert normalize_answer("An apple") == "apple"
    assert normalize_answer("don't") == "dont"  # deleted, not replaced by a space (SQuAD)
    assert normalize_answer("theatre") == "theatre"  # an article only as a whole word


def test_normalize_answer_chinese() -> None:
    # full-width punctuation removed, spaces next to CJK characters dropped
    assert normalize_answer("《北京》 大学。") == "北京大学"
    assert normalize_answer("“光荣”和ω-force！") == "光荣和ωforce"


def test_contains_cjk() -> None:
    assert not contains_cjk("Beijing University")
    assert contains_cjk("Beijing 大学")
    assert contains_cjk("カタカナ")
    assert not contains_cjk("한국어")  # Hangul keeps word tokens


def test_answer_tokens_mixed_segmentation() -> None:
    assert answer_tokens("The cat sat") == ["cat", "sat"]
    assert answer_tokens("他是Peter Smith先生") == ["他", "是", "peter", "smith", "先", "生"]


# --------------------------------------------------------------------------------------------------------
# QA: EM and F1


def test_exact_match_english() -> None:
    assert exact_match("the cat", ["Cat", "dog"]) == 1.0
    assert exact_match("cat sat", ["cat"]) == 0.0
    assert exact_match("Paris.", "paris") == 1.0


def test_exact_match_chinese_ignores_punctuation_and_spaces() -> None:
    assert exact_match("北京 大学。", ["北京大学"]) == 1.0
    assert exact_match("北京大学", ["北京"]) == 0.0


def test_exact_match_unanswerable_follows_squad_v2() -> None:
    # no gold (or only golds normalising to "") -> the empty prediction is the correct one
    assert exact_match("", []) == 1.0
    assert exact_match("something", []) == 0.0
    assert f1_score("", ["."]) == 1.0


def test_f1_english_token_overlap() -> None:
    # pred "the cat sat on the mat" -> [cat, sat, on, mat] (4); gold "a cat on a mat" -> [cat, on, mat] (3)
    # common 3: P = 3/4, R = 3/3, F1 = 2 * 0.75 * 1 / 1.75 = 0.857142...
    assert f1_score("the cat sat on the mat", ["a cat on a mat"]) == pytest.approx(6 / 7)


def test_f1_takes_max_over_gold_answers() -> None:
    # vs "dog": 0; vs "cat sat": P = 1/1, R = 1/2, F1 = 2 * 1 * 0.5 / 1.5 = 2/3
    assert f1_score("cat", ["dog", "cat sat"]) == pytest.approx(2 / 3)
    assert f1_score("cat", ["dog"]) == 0.0


def test_f1_chinese_is_character_level() -> None:
    # pred 北京大学 -> [北, 京, 大, 学] (4); gold 北京 -> [北, 京] (2); common 2
    # P = 2/4, R = 2/2, F1 = 2 * 0.5 * 1 / 1.5 = 0.6667
    assert f1_score("北京大学", ["北京"]) == pytest.approx(2 / 3, abs=1e-4)
    # word-level would give 0 here ("北京大学" != "北京"): the CJK split is what makes partial credit possible


def test_f1_mixed_chinese_keeps_ascii_words_whole() -> None:
    # pred 光荣和ω-force -> [光, 荣, 和, ωforce] (4); gold 光荣 -> [光, 荣] (2); P = 2/4, R = 1 -> F1 = 2/3
    assert f1_score("光荣和ω-force", ["光荣"]) == pytest.approx(2 / 3)
    # pred 他是Peter Smith先生 -> 6 tokens; gold "Peter Smith" -> [peter, smith]; common 2
    # P = 2/6, R = 2/2, F1 = 2 * (1/3) * 1 / (4/3) = 0.5
    assert f1_score("他是Peter Smith先生", ["Peter Smith"]) == pytest.approx(0.5)


# --------------------------------------------------------------------------------------------------------
# ROUGE-L


def test_rouge_l_rewards_order_unlike_f1() -> None:
    # pred [cat, sat, on, mat], ref [mat, sat, on, cat]: LCS = [sat, on] = 2
    # P = 2/4, R = 2/4 -> F = 0.5, while the bag-of-tokens F1 is 1.0
    prediction, reference = "the cat sat on the mat", "the mat sat on a cat"
    assert rouge_l(prediction, reference) == pytest.approx(0.5)
    assert f1_score(prediction, [reference]) == pytest.approx(1.0)


def test_rouge_l_subsequence_not_substring() -> None:
    # pred [a1, x, b1, y, c1] vs ref [a1, b1, c1]: LCS = 3 (non-contiguous)
    # P = 3/5, R = 3/3 -> F = 2 * 0.6 * 1 / 1.6 = 0.75
    assert rouge_l("a1 x b1 y c1", "a1 b1 c1") == pytest.approx(0.75)


def test_rouge_l_chinese_and_multiple_references() -> None:
    # 北京大学 vs 大学北京: LCS = 2 (北京 or 大学); P = R = 2/4 -> 0.5
    assert rouge_l("北京大学", "大学北京") == pytest.approx(0.5)
    # max over references: the exact one gives 1.0
    assert rouge_l("北京大学", ["大学北京", "北京大学"]) == pytest.approx(1.0)
    assert rouge_l("", "") == 1.0
    assert rouge_l("cat", "") == 0.0
    with pytest.raises(ValueError):
        rouge_l("cat", [])


# --------------------------------------------------------------------------------------------------------
# Citations


def test_citation_precision() -> None:
    assert citation_precision([], {"p1"}) is None  # nothing cited: undefined, not 0
    # distinct cited [p1, p2]; p1 supports -> 1/2 (the repeated p1 counts once)
    assert citation_precision(["p1", "p2", "p1"], {"p1"}) == pytest.approx(0.5)
    assert citation_precision(["p1"], {"p1", "p3"}) == 1.0
    assert citation_precision(["p9"], set()) == 0.0


# --------------------------------------------------------------------------------------------------------
# Confidence


def test_auroc_of_a_confidence_against_right_and_wrong_answers_by_hand() -> None:
    # right answers at 0.8 and 0.3, wrong ones at 0.6 and 0.3: pairs (0.8 > 0.6), (0.8 > 0.3), the tie
    # (0.3 = 0.3) half, (0.3 < 0.6) none: 2.5 of 4
    assert auroc([0.8, 0.6, 0.3, 0.3], [1.0, 0.0, 1.0, 0.0]) == pytest.approx(0.625)
    assert auroc([0.8, 0.6], [0.0, 0.0]) is None


def test_expected_calibration_error_bins_by_hand() -> None:
    # bins of width 0.1: 0.1 falls in [0.1, 0.2), 1.0 in the last bin with 0.95
    # bin 1: one record, said 0.1, wrong -> |0.1 - 0| = 0.1, weight 1/4
    # bin 9: three records, said (0.95 + 1.0 + 0.95) / 3 = 0.9667, right 2/3 -> 0.3, weight 3/4
    ece = expected_calibration_error([0.1, 0.95, 1.0, 0.95], [0.0, 1.0, 1.0, 0.0])
    assert ece == pytest.approx(0.25 * 0.1 + 0.75 * (2.9 / 3 - 2 / 3))
    assert expected_calibration_error([], []) is None
