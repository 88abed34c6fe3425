"""cite: turn the chosen answer into the final cited answer (markers resolved, sources renumbered, rendered).

The chosen answer is the turn's best graded one (`best_answer`, with the sources it was written from), not
necessarily the latest draft. It is shown as its band renders it (answering.decision); in graphs without a
grader the draft is judged here, unless generate's read gate already judged it; an answer written without
sources is shown as written, unjudged. With retrieval off the answer ends with a note that no documents were
consulted.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from answering.decision import REASON_NO_ANSWER, REASON_READER_DECLINED, rendered_answer
from nodes.events import emit, source_summary
from nodes.instrumentation import timed
from nodes.turn import current_question, judge_draft, language_of
from prompts.answer import NO_DOCUMENTS_NOTES, NOT_FOUND_EN, NOT_FOUND_TEXTS, NOT_FOUND_ZH, TENTATIVE_PREFIXES
from retrieval.answer_text import is_not_found_answer, matches_phrase
from retrieval.citations import CitedAnswer, resolve_citations
from retrieval.grounding import ground_answer
from state.answer_record import AnswerRecord
from state.context import Context, run_context
from state.graph_state import State, reset
from state.schemas import AnswerCandidate, RetrievedDoc

logger = logging.getLogger(__name__)


def chosen_answer(state: State) -> tuple[str, list[RetrievedDoc], AnswerRecord | None]:
    """The best answer so far with its sources and judged record; else the latest draft and sources, with
    the record generate judged it by (`answer_record`, None when it judged none; a draft without sources
    stays unjudged)."""
    best: AnswerCandidate | None = state.get("best_answer")
    latest_sources = state.get("sources") or []
    # None in graphs without grade_answer; a checkpointed thread may still hold the "__reset__" string.
    if not isinstance(best, dict) or not best.get("text", "").strip():
        record = state.get("answer_record") if latest_sources else None
        return state.get("draft") or "", latest_sources, record
    pool = {doc["chunk_id"]: doc for doc in [*(state.get("documents") or []), *latest_sources]}
    ids = best.get("doc_ids") or []
    record = best.get("record")
    if all(chunk_id in pool for chunk_id in ids):
        return best["text"], [pool[chunk_id] for chunk_id in ids], record
    return best["text"], latest_sources, record


@timed("cite")
def cite(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Resolve the chosen answer's citations and emit it as the turn's AI message."""
    context = run_context(runtime)
    text, sources, record = chosen_answer(state)
    question = current_question(state)
    language = language_of(question)
    documents = state.get("documents") or []
    if record is None and sources:
        record = judge_draft(state, context, text, sources)
    text, sources, unjudged_reason = shown_answer(record, text, sources, language)
    exempt: tuple[str, ...] = (*NOT_FOUND_TEXTS, *TENTATIVE_PREFIXES.values())
    if not context.retrieval:  # the answer says it is the model's own: no documents were consulted
        note = NO_DOCUMENTS_NOTES[language]
        text, sources, exempt = f"{text.rstrip()}\n\n{note}", [], (*exempt, note)
    cited = resolve_citations(text, sources, non_claims=exempt)
    band = record["band"] if record is not None else ("not_found" if unjudged_reason else "confident")
    not_found = band == "not_found"
    reason = record["decline_reason"] if record is not None else unjudged_reason
    confidence = record["probability"] if record is not None else None
    flagged = flagged_sentences(cited, documents, exempt) if band == "confident" else []
    emit(
        "generation_complete",
        {
            "answer": cited.text,
            "citations": cited.citations,
            "sources": [source_summary(dict(doc)) for doc in cited.sources],
            "band": band,
            "confidence": confidence,
        },
    )
    return {
        "answer": cited.text,
        "short_answer": record["short_answer"] if record is not None and band == "confident" else "",
        "citations": cited.citations,
        "sources": cited.sources,
        "renderings": cited.renderings,
        "unsupported_sentences": flagged,
        "not_found": not_found,
        "not_found_reason": reason,
        "confidence": confidence,
        "band": band,
        "answer_record": record,
        "retrieved": ranked_documents(documents),
        # `retrieved` holds the passages now: emptied so a checkpoint stores each text once.
        "documents": reset([]),
        "messages": [AIMessage(cited.text)],
    }


def shown_answer(
    record: AnswerRecord | None, text: str, sources: list[RetrievedDoc], language: str
) -> tuple[str, list[RetrievedDoc], str]:
    """(text, sources, reason) the user is shown: the band's text, or an unjudged answer as written."""
    if record is None:
        if not text.strip():
            return (NOT_FOUND_ZH if language == "zh" else NOT_FOUND_EN), sources, REASON_NO_ANSWER
        return text, sources, REASON_READER_DECLINED if is_not_found_answer(text) else ""
    if record["band"] == "not_found":
        logger.info("cite: answering not found (%s)", record["decline_reason"])
        return rendered_answer(record, language, draft=text), [], ""
    return rendered_answer(record, language, draft=text), sources, ""


def flagged_sentences(
    cited: CitedAnswer, documents: list[RetrievedDoc], exempt: tuple[str, ...]
) -> list[str]:
    """The sentences to flag: unsupported by their source, or stating a fact missing from their evidence."""
    flagged = list(cited.unsupported_sentences)
    wrong = ground_answer(cited.text, cited.sources, documents).wrong_facts
    flagged += [
        check.sentence
        for check in wrong
        if check.sentence not in flagged and not matches_phrase(check.sentence, exempt)
    ]
    return flagged


def ranked_documents(documents: list[RetrievedDoc]) -> list[RetrievedDoc]:
    """Everything retrieved this turn, best first: by graded relevance, then retrieval score."""
    return sorted(
        documents, key=lambda doc: (doc.get("relevance", -1.0), doc.get("score", 0.0)), reverse=True
    )
