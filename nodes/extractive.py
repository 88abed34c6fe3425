"""The draft without the model: the extractive answerer's typed span and the sentence it was read from,
cited, else the source sentences that best overlap the question (retrieval.answer_span, .answer_text).
"""

from __future__ import annotations

from typing import Any

from core.text import contains_cjk, strip_references
from nodes.draft_text import cited, is_grounded_short_answer, truncated_sentence
from prompts.answer import MODEL_FAILED_EN, MODEL_FAILED_ZH, NOT_FOUND_EN, NOT_FOUND_ZH
from retrieval.answer_span import SpanAnswer, extract_answer
from retrieval.answer_text import answer_body, best_sentences, compose_answer, normalized, split_short_answer
from retrieval.tokens import truncate_to_tokens
from state.schemas import RetrievedDoc

#: Sentences of the top source used by the extractive fallback.
FALLBACK_SENTENCES = 2
#: `short_answer_source` of a short answer read from the model's own explanation (`explanation_short`).
SOURCE_MODEL_EXPLANATION = "model_explanation"


def explanation_short(question: str, explanation: str, used: list[RetrievedDoc]) -> str:
    """The grounded short answer the model's explanation gives, or ""."""
    if not explanation.strip():
        return ""
    own = extract_answer(question, [strip_references(explanation)])  # a span, not its citation marker
    if own is None or not own.text.strip():
        return ""
    return own.text if is_grounded_short_answer(own.text, question, used) else ""


def extractive_answer(
    question: str, documents: list[RetrievedDoc], language: str, max_tokens: int
) -> tuple[str, list[RetrievedDoc]]:
    """The draft without the model: the typed span and its sentence, else the best sentences, cited."""
    if not documents:
        return (MODEL_FAILED_ZH if language == "zh" else MODEL_FAILED_EN), []
    span = extract_answer(question, [doc["text"] for doc in documents])
    if span is not None and span.text.strip():
        return span_draft(span, documents, max_tokens)
    for doc in documents:
        sentences = best_sentences(question, doc["text"], FALLBACK_SENTENCES)
        joiner = "" if contains_cjk(doc["text"]) else " "  # the source's script, not the question's
        body = truncate_to_tokens(joiner.join(sentences).strip(), max_tokens).rstrip("\ufffd").strip()
        if answer_body(body):
            return f"{body}{joiner}[1]", [doc]
    return (NOT_FOUND_ZH if language == "zh" else NOT_FOUND_EN), []


def span_draft(
    span: SpanAnswer, documents: list[RetrievedDoc], max_tokens: int
) -> tuple[str, list[RetrievedDoc]]:
    """The extractive draft and its source: the short answer, then its sentence cited [1]."""
    source = documents[span.passage]
    sentence = truncated_sentence(span.sentence, max_tokens)
    if not answer_body(sentence):
        return span.text, [source]
    return compose_answer(span.text, cited(sentence, 1)), [source]


def extractive_short(
    question: str,
    text: str,
    sources: list[RetrievedDoc],
    used: list[RetrievedDoc],
    info: dict[str, Any],
    max_tokens: int,
) -> tuple[str, list[RetrievedDoc]]:
    """The draft when the model's short answer is missing or not in the passages."""
    span = extract_answer(question, [doc["text"] for doc in used])
    if span is not None and not span.text.strip():
        span = None
    short, explanation = split_short_answer(text)
    if span is not None and not short and normalized(span.text) in normalized(text):
        info["short_answer_source"] = "extractive"
        return compose_answer(span.text, text), sources
    own = "" if short else explanation_short(question, explanation or text, used)
    if own:
        info["short_answer_source"] = SOURCE_MODEL_EXPLANATION
        return compose_answer(own, text), sources
    if span is None:
        return text, sources
    info["short_answer_source"] = "extractive"
    info["model_short_answer"] = short
    return span_draft(span, used, max_tokens)
