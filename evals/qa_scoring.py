"""Scoring of the QA benchmark: one record per question from a graph run (evals/qa_aggregate.py sums them up).

Why records first and numbers second: a record holds everything measured for one question (prediction,
retrieved and cited passages, cost), so an interrupted run resumes from its records and any aggregate can be
recomputed, or broken down another way, without running a model again. Four answer scores, each on the
full answer and on its short answer (`short_answer`, the phrase or yes/no the answer starts with; the full
answer when a record has none): EM, F1, `contains_gold` (older records call it "accuracy"), whether a
gold answer is contained in the
prediction (normalised, on token boundaries), as in the Adaptive-RAG paper (Jeong et al., 2024), which
credits a correct answer inside a longer reply that EM rejects, and ROUGE-L (evals.metrics.rouge_l: the
F-measure of the longest common token subsequence, with characters as tokens for Chinese, as F1), which
unlike F1 rewards keeping the gold words in their order; records written before ROUGE-L was measured get it
computed from their prediction when a report is made. Metrics that are undefined for a
question (support recall without a gold passage in the corpus, citation precision of an uncited answer) are
None in the record and left out of their mean rather than counted as 0 or 1. EM and F1 are computed on the
answer without its citation markers ("Paris [1]." scores as "Paris."): the markers are the engine's
provenance, not part of the answer, and their digits would otherwise count as wrong tokens.

Unanswerable questions (SQuAD 2.0): every answer score is 1 when the engine answered "not found" and 0
otherwise, since its not-found reply is a sentence, never the empty prediction SQuAD's own scoring expects.
Each record also keeps the calibrated judgement: `confidence`, `band`, the short answer the engine had
whatever the band showed (`candidate_short_answer`), whether it holds a gold answer (`candidate_right`, what
the confidence predicts, and what a decline threw away) and the calibrator's `signals`, so a calibrator can
be refit and its bands replayed from the records without running a model again.
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
    citation_precision,
    contains_gold_answer,
    exact_match,
    f1_score,
    rouge_l,
    support_recall_at_k,
)
from nodes.not_found import REASON_NOTHING_RELEVANT, REASON_NOTHING_RETRIEVED, REASON_STORE_DOWN

#: Retrieved passages over which supporting-passage recall is measured (the graph's default top_k).
SUPPORT_RECALL_K = 5
SUPPORT_RECALL_KEY = f"support_recall@{SUPPORT_RECALL_K}"
DIGITS = 4
#: Every way an answer becomes "not found", by how its `not_found_reason` starts: the judgement's
#: (answering.decision) and the graph's when nothing relevant was retrieved (nodes.not_found).
NOT_FOUND_REASONS: tuple[str, ...] = (
    REASON_READER_DECLINED,
    REASON_MISSING_ANCHORS,
    REASON_LOW_PROBABILITY.split("(", 1)[0],
    REASON_NO_ANSWER,
    REASON_NOTHING_RETRIEVED,
    REASON_NOTHING_RELEVANT,
    REASON_STORE_DOWN,
)
#: The reason group of not-found records written before records named their reason.
UNRECORDED_REASON = "unrecorded"


def answer_scores(prediction: str, short: str, gold_answers: Sequence[str]) -> dict[str, float]:
    """EM, F1, gold containment and ROUGE-L of the answer (markers stripped) and of its short answer (the
    answer when none). ROUGE-L is the best over the gold answers; with none (an old record of an unanswerable
    question) it compares with the empty answer, as EM and F1 do."""
    full = strip_references(prediction)
    short = strip_references(short) if short.strip() else full
    references = list(gold_answers) or [""]
    return {
        "em": exact_match(full, gold_answers),
        "f1": round(f1_score(full, gold_answers), DIGITS),
        "contains_gold": contains_gold_answer(full, gold_answers),
        "rouge_l": round(rouge_l(full, references), DIGITS),
        "short_em": exact_match(short, gold_answers),
        "short_f1": round(f1_score(short, gold_answers), DIGITS),
        "short_contains_gold": contains_gold_answer(short, gold_answers),
        "short_rouge_l": round(rouge_l(short, references), DIGITS),
    }


#: Names older records and reports use (they call the gold containment "accuracy"):
#: current name -> old name. Readers go through `current_names`, so committed files stay readable.
LEGACY_NAMES = {
    "contains_gold": "accuracy",
    "short_contains_gold": "short_accuracy",
    "candidate_contains_gold": "candidate_accuracy",  # read by benchmarks/answer_table.py
    "answerable_contains_gold": "answerable_accuracy",
}


def current_names(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A record or report with each value written under a legacy name also under its current name (a value
    under the current name wins)."""
    renamed = {
        new: mapping[old] for new, old in LEGACY_NAMES.items() if old in mapping and new not in mapping
    }
    return {**mapping, **renamed}


#: The per-record answer scores (answer_scores) and how each aggregate names their mean.
SCORE_KEYS: tuple[str, ...] = (
    "em",
    "f1",
    "contains_gold",
    "rouge_l",
    "short_em",
    "short_f1",
    "short_contains_gold",
    "short_rouge_l",
)


def ranked_doc_ids(items: Iterable[Mapping[str, Any]]) -> list[str]:
    """The distinct non-empty `doc_id`s of sources or citations, each at its first position."""
    return list(dict.fromkeys(str(item["doc_id"]) for item in items if item.get("doc_id")))


def rounded(value: float | None) -> float | None:
    """A metric at DIGITS decimals (None stays None)."""
    return None if value is None else round(value, DIGITS)


def gold_passages(example: QAExample, in_corpus: set[str] | None) -> set[str]:
    """The example's supporting passages that can be retrieved at all: in its own context (the dataset's
    view) or, when the pooled corpus is known, anywhere in it."""
    return example.supporting_available if in_corpus is None else example.supporting & in_corpus


def declined_scores(not_found: bool) -> dict[str, float]:
    """The answer scores of an unanswerable question: all 1 when the engine declined, else all 0."""
    return dict.fromkeys(SCORE_KEYS, float(not_found))


def candidate_right(candidate_short: str, gold_answers: Sequence[str], answerable: bool) -> float:
    """Whether the short answer the engine had (shown or not) holds a gold answer: 1.0 or 0.0 by the gold
    containment of `short_contains_gold`; 0.0 for an unanswerable question and for no short answer. What
    the calibrated confidence predicts, so its AUROC and calibration error are measured against it."""
    if not answerable or not candidate_short.strip():
        return 0.0
    return contains_gold_answer(strip_references(candidate_short), gold_answers)


def judgement_fields(result: Mapping[str, Any], example: QAExample) -> dict[str, Any]:
    """The record's view of the answer's judgement (the output state's `confidence`, `band` and
    `answer_record`): the calibrated confidence, the band, the short answer the engine had whatever the
    band showed, whether it was right, and the signals the calibrator read."""
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
    """The record of one answered question: prediction, scores, retrieval, citations, cost.

    `in_corpus` (ids of the pooled corpus) narrows the gold passages to those retrievable at all, so support
    recall is not charged for passages the dataset itself left out (HotpotQA questions without context).
    """
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
        **_short_answer_trace(info),
        "retrieved": retrieved,
        "supporting": sorted(supporting),
        SUPPORT_RECALL_KEY: rounded(support_recall_at_k(retrieved, supporting, SUPPORT_RECALL_K))
        if supporting
        else None,
        "cited": cited,
        "citation_precision": rounded(citation_precision(cited, supporting)) if supporting else None,
        "not_found": not_found,
        "not_found_reason": str(result.get("not_found_reason") or ""),
        # The reply's token log-probabilities: confidence signals are replayed from them without running the
        # model again.
        "reply_logprobs": info.get("reply_logprobs"),
        # The calibrated judgement (answering/): confidence, band, the short answer it judged and whether
        # that was right, and the signals it read (so a calibrator can be refit from the records).
        **judgement_fields(result, example),
        **_cost_fields(result, latency_s),
    }


def _example_fields(example: QAExample) -> dict[str, Any]:
    """A record's question part: the example's id, kind, language, question and gold answers."""
    return {
        "qid": example.qid,
        "kind": example.kind,
        "language": example.language,
        "question": example.question,
        "answers": list(example.answers),
        "answerable": example.answerable,
    }


def _short_answer_trace(info: Mapping[str, Any]) -> dict[str, Any]:
    """Where the short answer came from (prompt_info's trace of the answer path)."""
    return {
        # Who wrote the short answer (model / extractive) and, when the extractive answer replaced it, the
        # model's own: the model alone can be scored from the same run.
        "short_answer_source": info.get("short_answer_source"),
        "model_short_answer": info.get("model_short_answer"),
        # The focused read (nodes/focused_read.py): what it read, its reply, the short answer it replaced.
        "focused_read_passage": info.get("focused_read_passage"),
        "focused_read_reply": info.get("focused_read_reply"),
        "draft_short_answer": info.get("draft_short_answer"),
    }


def _cost_fields(result: Mapping[str, Any], latency_s: float) -> dict[str, Any]:
    """A record's cost part: model calls, tokens, latency, the strategy, loop rounds and per-node timings."""
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
        "confidence": None,
        "band": None,
        "candidate_short_answer": "",
        "candidate_right": 0.0,
        "signals": {},
        "llm_calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "latency_s": round(latency_s, 3),
        "strategy": None,
        "retrieval_rounds": 0,
        "generation_rounds": 0,
        "timings_ms": {},
        "error": f"{type(error).__name__}: {error}",
    }


def rescored(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record with the answer scores it lacks computed from its prediction (records written before
    gold containment, short answers or ROUGE-L were measured; their short answer is the whole answer). An
    unanswerable question's missing scores are its declined scores, as when it was answered."""
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
    """Whether a record's question is answerable; records written before they said so are answerable when
    they have gold answers (or name none at all)."""
    answers = record.get("answers")
    return bool(record.get("answerable", bool(answers) or "answers" not in record))
