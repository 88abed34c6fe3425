"""The signals of one draft: cheap numbers, already at hand, that the calibrator weighs into a probability.

Each check is a signal, not a verdict: the calibrator decides how much each is worth (docs/answer-quality.md,
"Signals and ablation"). Every signal is a float present on every record (0 when it does not apply),
so the artifact's features line up with every answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.text import contains_cjk, split_sentences, strip_references
from retrieval.answer_text import content_terms, normalized
from retrieval.answerability import MIN_QUESTION_COVERAGE, missing_question_anchors, question_coverage
from retrieval.injection import planted_tokens
from state.answer_record import Candidates
from state.schemas import RetrievedDoc

#: Signal groups, for the ablation of `rag eval calibrate --ablation` (a group is dropped as a whole).
SIGNAL_GROUPS: dict[str, tuple[str, ...]] = {
    "log_probability": ("logprob_mean", "logprob_min", "has_logprobs"),
    "reader_agreement": (
        "agree_draft_focused",
        "agree_draft_extractive",
        "agree_focused_extractive",
        "readers_proposing",
    ),
    "answer_in_passages": ("short_in_top_passage", "short_in_evidence", "short_in_explanation"),
    "retrieval": ("top_relevance", "relevance_margin", "relevant_passages"),
    "similarity": ("question_evidence_similarity", "has_similarity"),
    "term_checks": ("term_coverage", "missing_anchors", "term_check_declines"),
    "question": ("comparison", "multi_step_strategy", "language_zh"),
    "answer_form": ("has_short_answer", "answer_words", "short_from_extractive", "short_from_focused_read"),
    "reader_failures": ("reader_declined", "generation_fallback", "planted_instruction"),
}
#: Every signal, in the order of the calibrators' features.
SIGNAL_NAMES: tuple[str, ...] = tuple(name for group in SIGNAL_GROUPS.values() for name in group)
#: Relevance grade from which a passage counts as relevant (grade_retrieval's scale, 0-1).
RELEVANT_GRADE = 0.5
#: Counts are capped so one extreme question does not dominate the standardised feature.
MAX_COUNTED = 5
#: A log-probability below this is read as this (a token the reader all but ruled out).
LOGPROB_FLOOR = -10.0

#: Cosine similarity of a question and texts (None when no embedding model is at hand).
Similarity = Callable[[str, Sequence[str]], float | None]


@dataclass(frozen=True)
class DraftFacts:
    """What the judgement reads about one draft (gathered by answering.judge from state)."""

    question: str
    short_answer: str
    explanation: str
    candidates: Candidates
    sources: Sequence[RetrievedDoc]  # whole chunks, in citation order
    evidence: Sequence[RetrievedDoc]  # the compressed evidence the reader saw ([] for whole chunks)
    documents: Sequence[RetrievedDoc]  # every passage retrieved this turn
    short_logprobs: Sequence[float]  # the reader's over its short answer ([] when none)
    short_answer_source: str  # model | extractive | focused_read | model_explanation | ""
    reader_declined: bool
    generation_fallback: bool  # the extractive draft stood in for an unusable reply
    comparison: bool
    strategy: str


def token_f1(first: str, second: str) -> float:
    """Token-overlap F1 of two short answers (0 when either is empty); with CJK, over characters."""
    left, right = _words(first), _words(second)
    if not left or not right:
        return 0.0
    if any(contains_cjk(token) for token in left + right):
        left, right = list("".join(left)), list("".join(right))
    common = sum(min(left.count(token), right.count(token)) for token in set(left))
    if not common:
        return 0.0
    precision, recall = common / len(left), common / len(right)
    return 2 * precision * recall / (precision + recall)


def _words(text: str) -> list[str]:
    return [word for word in (normalized(part) for part in text.split()) if word]


def _proposals(candidates: Candidates) -> tuple[str, str, str]:
    return candidates["draft"], candidates["focused_read"], candidates["extractive"]


def _contains(text: str, short: str) -> float:
    wanted = normalized(short)
    return 1.0 if wanted and wanted in normalized(text) else 0.0


def _relevances(documents: Sequence[RetrievedDoc]) -> list[float]:
    return sorted((max(0.0, float(doc.get("relevance", 0.0) or 0.0)) for doc in documents), reverse=True)


def draft_signals(facts: DraftFacts, similarity: Similarity | None = None) -> dict[str, float]:
    """Every signal of SIGNAL_NAMES for one draft."""
    short = facts.short_answer
    candidates = facts.candidates
    logprobs = [max(LOGPROB_FLOOR, value) for value in facts.short_logprobs]
    evidence_texts = [doc["text"] for doc in (facts.evidence or facts.sources)]
    relevances = _relevances(facts.documents)
    top = relevances[0] if relevances else 0.0
    second = relevances[1] if len(relevances) > 1 else 0.0
    anchor_texts = facts.sources or facts.documents
    coverage = question_coverage(facts.question, evidence_texts) if evidence_texts else 0.0
    missing = len(missing_question_anchors(facts.question, list(anchor_texts))) if anchor_texts else 0
    planted = planted_tokens(split_sentences(doc["text"]) for doc in facts.sources)
    judged_text = short or strip_references(facts.explanation)
    best_sentence = _answer_sentence(judged_text, evidence_texts)
    score = similarity(facts.question, [best_sentence]) if similarity and best_sentence else None
    return {
        "logprob_mean": sum(logprobs) / len(logprobs) if logprobs else 0.0,
        "logprob_min": min(logprobs) if logprobs else 0.0,
        "has_logprobs": 1.0 if logprobs else 0.0,
        "agree_draft_focused": token_f1(candidates["draft"], candidates["focused_read"]),
        "agree_draft_extractive": token_f1(candidates["draft"], candidates["extractive"]),
        "agree_focused_extractive": token_f1(candidates["focused_read"], candidates["extractive"]),
        "readers_proposing": float(sum(1 for value in _proposals(candidates) if value.strip())),
        "short_in_top_passage": _contains(facts.sources[0]["text"], short) if facts.sources else 0.0,
        "short_in_evidence": max((_contains(text, short) for text in evidence_texts), default=0.0),
        "short_in_explanation": _contains(strip_references(facts.explanation), short),
        "top_relevance": top,
        "relevance_margin": top - second,
        "relevant_passages": float(
            min(MAX_COUNTED, sum(1 for grade in relevances if grade >= RELEVANT_GRADE))
        ),
        "question_evidence_similarity": score if score is not None else 0.0,
        "has_similarity": 0.0 if score is None else 1.0,
        "term_coverage": coverage,
        "missing_anchors": float(min(MAX_COUNTED, missing)),
        "term_check_declines": 1.0 if missing or coverage < TERM_CHECK_COVERAGE else 0.0,
        "comparison": 1.0 if facts.comparison else 0.0,
        "multi_step_strategy": 1.0 if facts.strategy in MULTI_STEP_STRATEGIES else 0.0,
        "language_zh": 1.0 if any("\u4e00" <= char <= "\u9fff" for char in facts.question) else 0.0,
        "has_short_answer": 1.0 if short.strip() else 0.0,
        "answer_words": math.log1p(len(judged_text.split())),
        "short_from_extractive": 1.0 if facts.short_answer_source == "extractive" else 0.0,
        "short_from_focused_read": 1.0 if facts.short_answer_source == "focused_read" else 0.0,
        "reader_declined": 1.0 if facts.reader_declined else 0.0,
        "generation_fallback": 1.0 if facts.generation_fallback else 0.0,
        "planted_instruction": 1.0 if planted else 0.0,
    }


#: Strategies that take several retrieval steps (decomposition, iterative): harder questions.
MULTI_STEP_STRATEGIES = frozenset({"QUERY_DECOMPOSITION", "ITERATIVE"})
#: Question coverage below which the term checks count as declining (a binary signal beside the share).
TERM_CHECK_COVERAGE = MIN_QUESTION_COVERAGE


def _answer_sentence(judged: str, texts: Sequence[str]) -> str:
    """The evidence sentence that holds the judged answer (else the one sharing most of its terms)."""
    wanted = normalized(judged)
    best, best_overlap = "", 0
    terms = content_terms(judged)
    for text in texts:
        for sentence in split_sentences(text):
            if wanted and wanted in normalized(sentence):
                return sentence
            overlap = len(terms & content_terms(sentence))
            if overlap > best_overlap:
                best, best_overlap = sentence, overlap
    return best
