"""judge_answer: the one place a draft is judged (signals -> calibrated probability -> band), by grade_answer
for every draft of the agentic graph (the probability is the Self-RAG loop's score, so a revision never
replaces a draft of higher probability) and by cite for graphs without a grader."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from answering.calibrator import Calibrator, calibrator_for
from answering.decision import closest_sentence, decide
from answering.signals import DraftFacts, Similarity, draft_signals
from query.signals import question_signals
from retrieval.answer_text import answer_parts, is_not_found_answer
from state.answer_record import AnswerRecord, Candidates
from state.schemas import RetrievedDoc

logger = logging.getLogger(__name__)

#: prompt_info keys generate writes for the judgement.
CANDIDATES_KEY = "candidates"
SHORT_LOGPROBS_KEY = "short_logprobs"
READER_DECLINED_KEY = "reader_declined"


def empty_candidates() -> Candidates:
    """No reader proposed anything."""
    return Candidates(draft="", focused_read="", extractive="")


def embedding_similarity(embed: Any) -> Similarity:
    """A Similarity over an embedding model: the best cosine of question and texts (None on failure)."""

    def similarity(question: str, texts: Sequence[str]) -> float | None:
        try:
            query = embed.embed_query(question)
            vectors = embed.embed_documents(list(texts))
        except Exception as exc:  # noqa: BLE001 - a signal, never a failure of the answer
            logger.warning("judge: question-evidence similarity unavailable (%s)", type(exc).__name__)
            return None
        return max((cosine(query, vector) for vector in vectors), default=None)

    return similarity


def cosine(first: Sequence[float], second: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0 when either is all zeros)."""
    dot = sum(a * b for a, b in zip(first, second, strict=False))
    norm = math.sqrt(sum(a * a for a in first)) * math.sqrt(sum(b * b for b in second))
    return dot / norm if norm else 0.0


def judge_answer(
    *,
    question: str,
    draft: str,
    sources: Sequence[RetrievedDoc],
    evidence: Sequence[RetrievedDoc],
    documents: Sequence[RetrievedDoc],
    prompt_info: dict[str, Any],
    strategy: str,
    calibrator: Calibrator,
    similarity: Similarity | None = None,
) -> AnswerRecord:
    """The judged record of one draft (band and reason set by answering.decision.decide)."""
    short, explanation = answer_parts(draft)
    candidates: Candidates = {**empty_candidates(), **(prompt_info.get(CANDIDATES_KEY) or {})}
    facts = DraftFacts(
        question=question,
        short_answer=short,
        explanation=explanation,
        candidates=candidates,
        sources=sources,
        evidence=evidence,
        documents=documents,
        short_logprobs=prompt_info.get(SHORT_LOGPROBS_KEY) or [],
        short_answer_source=prompt_info.get("short_answer_source") or "",
        reader_declined=bool(prompt_info.get(READER_DECLINED_KEY)),
        generation_fallback=bool(prompt_info.get("generation_fallback")),
        comparison=question_signals(question).comparison,
        strategy=strategy,
    )
    signals = draft_signals(facts, similarity)
    record = AnswerRecord(
        short_answer=short,
        explanation=explanation,
        candidates=candidates,
        signals=signals,
        probability=round(calibrator.probability(signals), 4),
        band="not_found",
        decline_reason="",
        closest=closest_sentence(question, short, explanation, sources),
        calibrator=calibrator.name,
    )
    # The engine's own not-found sentence (the extractive answerer found nothing) is no answer to judge.
    has_text = bool(draft.strip()) and not is_not_found_answer(draft)
    return decide(record, question, calibrator.thresholds, has_text=has_text)


def model_calibrator(model_identity: str) -> Calibrator:
    """The calibrator of the answering model (its own, else the default)."""
    return calibrator_for(model_identity)[0]
