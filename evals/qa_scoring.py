"""Scoring of the QA benchmark: one record per question from a graph run (evals/qa_aggregate.py sums them up).

A record holds everything measured for one question, so a run resumes from its records and any aggregate (or
a calibrator refit) is recomputed without running a model again. Answer scores (EM, F1, `contains_gold`,
ROUGE-L, each also on the short answer) are computed without citation markers: they are provenance, not
answer. Metrics undefined for a question are None and left out of their mean. An unanswerable question
(SQuAD 2.0) scores 1 everywhere when the engine declined, else 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from answering.decision import (
    REASON_LOW_PROBABILITY,
    REASON_MISSING_ANCHORS,
    REASON_NO_ANSWER,
    REASON_READER_DECLINED,
)
from core.text import strip_references
from evals.datasets import QAExample
from evals.metrics import (
    DIGITS,
    citation_precision,
    contains_gold_answer,
    exact_match,
    f1_score,
    rouge_l,
    rounded,
    support_recall_at_k,
)
from nodes.not_found import REASON_NOTHING_RELEVANT, REASON_NOTHING_RETRIEVED, REASON_STORE_DOWN

#: Retrieved passages over which supporting-passage recall is measured (the graph's default top_k).
SUPPORT_RECALL_K = 5
SUPPORT_RECALL_KEY = f"support_recall@{SUPPORT_RECALL_K}"
#: Every way an answer becomes "not found", by how its `not_found_reason` starts.
NOT_FOUND_REASONS: tuple[str, ...] = (
    REASON_READER_DECLINED,
    REASON_MISSING_ANCHORS,
    REASON_LOW_PROBABILITY.split("(", 1)[0],
    REASON_NO_ANSWER,
    REASON_NOTHING_RETRIEVED,
    REASON_NOTHING_RELEVANT,
    REASON_STORE_DOWN,
)
#: The prompt_info keys a record keeps to tell where its short answer came from.
SHORT_ANSWER_TRACE = (
    "short_answer_source",
    "model_short_answer",
    "focused_read_passage",
    "focused_read_reply",
    "draft_short_answer",
)
#: The reason group of not-found records written before records named their reason.
UNRECORDED_REASON = "unrecorded"


def answer_scores(prediction: str, short: str, gold_answers: Sequence[str]) -> dict[str, float]:
    """EM, F1, gold containment and ROUGE-L of the answer (markers stripped) and of its short answer (the
    answer when none); with no gold answer, against the empty answer."""
    full = strip_references(prediction)
    short = strip_references(short) if short.strip() else full
    references = list(gold_answers) or [""]
    scores: dict[str, float] = {}
    for prefix, text in (("", full), ("short_", short)):
        scores[f"{prefix}em"] = exact_match(text, gold_answers)
        scores[f"{prefix}f1"] = round(f1_score(text, gold_answers), DIGITS)
        scores[f"{prefix}contains_gold"] = contains_gold_answer(text, gold_answers)
        scores[f"{prefix}rouge_l"] = round(rouge_l(text, references), DIGITS)
    return scores


#: Current name -> the name older records and reports use; readers go through `current_names`.
LEGACY_NAMES = {
    "contains_gold": "accuracy",
    "short_contains_gold": "short_accuracy",
    "candidate_contains_gold": "candidate_accuracy",  # read by benchmarks/answer_table.py
    "answerable_contains_gold": "answerable_accuracy",
}


def current_names(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """`mapping` with legacy-named values also under their current names (a current name wins)."""
    renamed = {
        new: mapping[old] for new, old in LEGACY_NAMES.items() if old in mapping and new not in mapping
    }
    return {**mapping, **renamed}


#: The per-record answer scores (answer_scores: on the answer, then its short answer) and their means' names.
_ANSWER_SCORES = ("em", "f1", "contains_gold", "rouge_l")
SCORE_KEYS: tuple[str, ...] = (*_ANSWER_SCORES, *(f"short_{name}" for name in _ANSWER_SCORES))


def ranked_doc_ids(items: Iterable[Mapping[str, Any]]) -> list[str]:
    """The distinct non-empty `doc_id`s of sources or citations, each at its first position."""
    return list(dict.fromkeys(str(item["doc_id"]) for item in items if item.get("doc_id")))


def gold_passages(example: QAExample, in_corpus: set[str] | None) -> set[str]:
    """The example's supporting passages that can be retrieved: in its context, or in the pooled corpus."""
    return example.supporting_available if in_corpus is None else example.supporting & in_corpus


def declined_scores(not_found: bool) -> dict[str, float]:
    """The answer scores of an unanswerable question: all 1 when the engine declined, else all 0."""
    return dict.fromkeys(SCORE_KEYS, float(not_found))


def candidate_right(candidate_short: str, gold_answers: Sequence[str], answerable: bool) -> float:
    """1.0 when the short answer the engine had (shown or not) holds a gold answer: what the calibrated
    confidence predicts; 0.0 for an unanswerable question or no short answer."""
    if not answerable or not candidate_short.strip():
        return 0.0
    return contains_gold_answer(strip_references(candidate_short), gold_answers)


def judgement_fields(result: Mapping[str, Any], example: QAExample) -> dict[str, Any]:
    """The record's view of the calibrated judgement (replayed and refit from the records)."""
    answer_record = result.get("answer_record") or {}
    confidence = result.get("confidence")
    candidate_short = str(answer_record.get("short_answer") or "")
    return {
        "confidence": None if confidence is None else rounded(float(confidence)),
        "band": result.get("band"),
        "candidate_short_answer": candidate_short,
        "candidate_right": candidate_right(candidate_short, example.answers, example.answerable),
        "signals": {str(name): float(value) for name, value in (answer_record.get("signals") or {}).items()},
        "candidates": dict(answer_record.get("candidates") or {}),
    }


def question_record(
    example: QAExample, result: Mapping[str, Any], *, latency_s: float, in_corpus: set[str] | None = None
) -> dict[str, Any]:
    """The record of one answered question; `in_corpus` (the pooled corpus's ids) keeps support recall from
    being charged for gold passages the dataset itself left out."""
    prediction = str(result.get("answer") or "")
    short = str(result.get("short_answer") or "")
    info = result.get("prompt_info") or {}
    supporting = gold_passages(example, in_corpus)
    retrieved = ranked_doc_ids(result.get("retrieved") or result.get("sources") or [])
    cited = ranked_doc_ids(result.get("citations") or [])
    not_found = bool(result.get("not_found", False))
    scores = (
        answer_scores(prediction, short, example.answers)
        if example.answerable
        else declined_scores(not_found)
    )
    return {
        **_example_fields(example),
        "prediction": prediction,
        "short_answer": short,
        **scores,
        **{key: info.get(key) for key in SHORT_ANSWER_TRACE},
        "retrieved": retrieved,
        "supporting": sorted(supporting),
        SUPPORT_RECALL_KEY: rounded(support_recall_at_k(retrieved, supporting, SUPPORT_RECALL_K))
        if supporting
        else None,
        "cited": cited,
        "citation_precision": rounded(citation_precision(cited, supporting)) if supporting else None,
        "not_found": not_found,
        "not_found_reason": str(result.get("not_found_reason") or ""),
        "reply_logprobs": info.get("reply_logprobs"),  # confidence signals are replayed from them
        **judgement_fields(result, example),
        **_cost_fields(result, latency_s),
    }


def _example_fields(example: QAExample) -> dict[str, Any]:
    """A record's question part."""
    return {
        "qid": example.qid,
        "kind": example.kind,
        "language": example.language,
        "question": example.question,
        "answers": list(example.answers),
        "answerable": example.answerable,
    }


def _cost_fields(result: Mapping[str, Any], latency_s: float) -> dict[str, Any]:
    """A record's cost part: model calls, tokens, latency, strategy, loop rounds, per-node timings."""
    usage = result.get("usage") or {}
    return {
        "llm_calls": int(result.get("llm_calls") or 0),
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": int(usage.get("completion_tokens") or 0),
        "latency_s": round(latency_s, 3),
        "strategy": result.get("strategy"),
        "retrieval_rounds": int(result.get("retrieval_rounds") or 0),
        "generation_rounds": int(result.get("generation_rounds") or 0),
        "timings_ms": {
            key: round(float(value), 2) for key, value in (result.get("timings_ms") or {}).items()
        },
    }


def error_record(
    example: QAExample, error: BaseException, *, latency_s: float, in_corpus: set[str] | None = None
) -> dict[str, Any]:
    """The record of a question whose run raised: scored as an empty prediction, the error kept."""
    supporting = gold_passages(example, in_corpus)
    return {
        **_example_fields(example),
        "prediction": "",
        "short_answer": "",
        **(answer_scores("", "", example.answers) if example.answerable else declined_scores(False)),
        "retrieved": [],
        "supporting": sorted(supporting),
        SUPPORT_RECALL_KEY: 0.0 if supporting else None,
        "cited": [],
        "citation_precision": None,
        "not_found": False,
        **judgement_fields({}, example),
        **_cost_fields({}, latency_s),
        "error": f"{type(error).__name__}: {error}",
    }


def rescored(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record with the answer scores it lacks (older records) computed from its prediction, or declined
    scores for an unanswerable question."""
    record = current_names(record)
    if all(key in record for key in SCORE_KEYS):
        return record
    if record.get("answerable") is False:
        scores = declined_scores(bool(record.get("not_found")))
    else:
        prediction = str(record.get("prediction") or "")
        scores = answer_scores(
            prediction, str(record.get("short_answer") or ""), list(record.get("answers") or [])
        )
    return {**scores, **record}  # scores the record already has are kept


def is_answerable(record: Mapping[str, Any]) -> bool:
    """Whether a record's question is answerable (older records: when they have or name no gold answers)."""
    answers = record.get("answers")
    return bool(record.get("answerable", bool(answers) or "answers" not in record))
