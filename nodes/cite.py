"""cite: turn the chosen answer into the final cited answer (markers resolved, sources renumbered, rendered).

The chosen answer is the best graded one of the turn (`best_answer`), not necessarily the latest draft: when
the Self-RAG loop gives up, its last attempt may be worse than an earlier one. The best answer's markers
refer to the sources it was generated with, recorded as chunk ids in `best_answer.doc_ids`, so those are
looked up again among the turn's documents (falling back to the latest `sources` if one is missing).

Retrieval off (`retrieval` False, RAG_RETRIEVAL=false): the answer ends with a note that no documents were
consulted (prompts.answer.NO_DOCUMENTS_NOTES), and has no sources nor citations.

Honest "not found": when the passages do not answer the question (a name or number of the question is in
no passage, no sentence of the answer is supported, or the supported part does not address the question;
retrieval.answerability), the answer is the not-found sentence, without citations.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from nodes.events import emit, source_summary
from nodes.instrumentation import timed
from nodes.turn import current_question, language_of
from prompts.answer import NO_DOCUMENTS_NOTES, NOT_FOUND_EN, NOT_FOUND_TEXTS, NOT_FOUND_ZH
from retrieval.answer_text import is_not_found_answer, matches_phrase, short_answer_of
from retrieval.answerability import not_found_reason
from retrieval.citations import resolve_citations
from retrieval.grounding import ground_answer
from state.context import Context, run_context
from state.graph_state import State, reset
from state.schemas import AnswerCandidate, RetrievedDoc

logger = logging.getLogger(__name__)

#: Why `cite` answers "not found" when the check of retrieval.answerability did not decline (state
#: `not_found_reason`; the check's own reasons are retrieval.answerability's REASON_*).
REASON_NO_ANSWER = "no answer was written"
REASON_MODEL_DECLINED = "the model found no answer in the passages"
REASON_LOW_CONFIDENCE = "the answer's confidence is below the threshold:"
THRESHOLD_SETTING = "RAG_ANSWER_CONFIDENCE_THRESHOLD"
#: A threshold at or below this is "no calibrated threshold": the term checks decide every answer. Letting
#: an uncalibrated confidence wave answers through instead cost more on development questions (simple
#: template: 2 x wrong shown + right withheld 70 vs 54, docs/answer-quality.md "Calibrated 'not found'").
CONFIDENCE_OFF = -1000.0


def chosen_answer(state: State) -> tuple[str, list[RetrievedDoc], float | None]:
    """The best answer so far with the sources it was written from and its confidence; else the latest
    draft, sources and confidence (generate's sources are whole chunks already)."""
    best: AnswerCandidate | None = state.get("best_answer")
    latest_sources = state.get("sources") or []
    # Graphs without grade_answer (baseline, direct) leave start_turn's None here; threads checkpointed by
    # older versions may still hold the legacy "__reset__" string.
    if not isinstance(best, dict) or not best.get("text", "").strip():
        return state.get("draft") or "", latest_sources, state.get("draft_confidence")
    pool = {doc["chunk_id"]: doc for doc in [*(state.get("documents") or []), *latest_sources]}
    ids = best.get("doc_ids") or []
    confidence = best.get("confidence")
    if all(chunk_id in pool for chunk_id in ids):
        return best["text"], [pool[chunk_id] for chunk_id in ids], confidence
    return best["text"], latest_sources, confidence


def decline_reason(
    question: str,
    text: str,
    sources: list[RetrievedDoc],
    documents: list[RetrievedDoc],
    confidence: float | None,
    threshold: float,
) -> str:
    """Why an answer the model wrote is replaced by "not found" ("" when it stands). With the answer's
    confidence (models.confidence) and a calibrated threshold, the confidence alone decides; without a
    threshold (CONFIDENCE_OFF, the default) or without log-probabilities, the term checks of
    retrieval.answerability decide."""
    if confidence is not None and threshold > CONFIDENCE_OFF:
        if confidence < threshold:
            return f"{REASON_LOW_CONFIDENCE} {confidence:.2f} < {threshold:g} ({THRESHOLD_SETTING})"
        return ""
    return not_found_reason(question, text, sources, documents) or ""


@timed("cite")
def cite(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Resolve the chosen answer's citations and emit it as the turn's AI message."""
    context = run_context(runtime)
    text, sources, confidence = chosen_answer(state)
    question = current_question(state)
    not_found_text = NOT_FOUND_ZH if language_of(question) == "zh" else NOT_FOUND_EN
    documents = state.get("documents") or []
    reason, declined, term_reason = "", "", None
    if not text.strip():
        text, reason = not_found_text, REASON_NO_ANSWER
    elif sources and not is_not_found_answer(text):
        reason = decline_reason(
            question, text, sources, documents, confidence, context.answer_confidence_threshold
        )
        if confidence is not None and context.answer_confidence_threshold > CONFIDENCE_OFF:
            # What the term checks alone would have decided, for the QA records: the calibrated decline is
            # measured against it on the same answers (docs/answer-quality.md, "Calibrated 'not found'").
            term_reason = not_found_reason(question, text, sources, documents) or ""
        if reason:
            logger.info("cite: answering not found (%s)", reason)
            text, sources, declined = not_found_text, [], text
    exempt: tuple[str, ...] = NOT_FOUND_TEXTS
    if not context.retrieval:  # the answer says it is the model's own: no documents were consulted
        note = NO_DOCUMENTS_NOTES[language_of(question)]
        text, sources, exempt = f"{text.rstrip()}\n\n{note}", [], (*exempt, note)
    cited = resolve_citations(text, sources, non_claims=exempt)
    not_found = is_not_found_answer(cited.text)
    if not_found and not reason:
        reason = REASON_MODEL_DECLINED
    # Sentences whose name, number or date is missing from their evidence are unsupported too, however many
    # words they share with a passage (retrieval.grounding). The engine's own "not found" sentence states no
    # fact (its Chinese words would otherwise count as terms no passage holds).
    wrong = [] if not_found else ground_answer(cited.text, cited.sources, documents).wrong_facts
    flagged = cited.unsupported_sentences
    flagged += [
        check.sentence
        for check in wrong
        if check.sentence not in flagged and not matches_phrase(check.sentence, exempt)
    ]
    emit(
        "generation_complete",
        {
            "answer": cited.text,
            "citations": cited.citations,
            "sources": [source_summary(dict(doc)) for doc in cited.sources],
        },
    )
    return {
        "answer": cited.text,
        "short_answer": "" if not_found else short_answer_of(cited.text),
        "citations": cited.citations,
        "sources": cited.sources,
        "renderings": cited.renderings,
        "unsupported_sentences": cited.unsupported_sentences,
        "not_found": not_found,
        "not_found_reason": reason,
        "declined_answer": declined,
        "answer_confidence": confidence,
        "prompt_info": {**(state.get("prompt_info") or {}), "term_check_reason": term_reason},
        "retrieved": ranked_documents(documents),
        # `retrieved` now holds the turn's passages: the working copy is emptied so a checkpoint stores
        # each passage's text once, not twice (issue 7 §6: bytes per turn).
        "documents": reset([]),
        "messages": [AIMessage(cited.text)],
    }


def ranked_documents(documents: list[RetrievedDoc]) -> list[RetrievedDoc]:
    """Everything retrieved this turn, best first: by graded relevance, then retrieval score (ungraded
    passages, as in the baseline, keep their retrieval order)."""
    return sorted(
        documents, key=lambda doc: (doc.get("relevance", -1.0), doc.get("score", 0.0)), reverse=True
    )
