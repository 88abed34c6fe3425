"""The draft's text: a model reply cleaned of what is not an answer, source sentences cut and cited, and the
check that a short answer can be read in the passages (pure functions over text and passages)."""

from __future__ import annotations

from core.text import contains_cjk, split_sentences
from prompts.answer import (
    ANSWER_USER_TEMPLATES,
    NONE_ANSWERS,
    NOT_FOUND_TEXTS,
    NOT_FOUND_VARIANTS,
    REVISION_NOTES,
)
from retrieval.answer_span import answer_type, choice_options
from retrieval.answer_text import (
    EchoDetector,
    answer_body,
    compose_answer,
    content_terms,
    normalized,
    remove_sentences,
    strip_preamble,
    supporting_sentence,
)
from retrieval.injection import carries_planted_token, is_instruction_like, planted_tokens
from retrieval.source_blocks import strip_source_headers
from retrieval.tokens import truncate_to_tokens
from state.schemas import RetrievedDoc


def truncated_sentence(sentence: str, max_tokens: int) -> str:
    """A source sentence cut to `max_tokens` tokens (no broken character left at the cut)."""
    return truncate_to_tokens(sentence.strip(), max_tokens).rstrip("\ufffd").strip()


def cited(sentence: str, number: int) -> str:
    """`sentence` ending with the citation marker of source `number` (no space before it in Chinese)."""
    joiner = "" if contains_cjk(sentence) else " "
    return f"{sentence}{joiner}[{number}]"


def explained_short_answer(short: str, question: str, sources: list[RetrievedDoc], max_tokens: int) -> str:
    """A bare short answer followed by the source sentence that states it, cited; alone when none does."""
    found = supporting_sentence(short, question, [doc["text"] for doc in sources])
    if found is None:
        return short
    index, sentence = found
    return compose_answer(short, cited(truncated_sentence(sentence, max_tokens), index + 1))


def is_grounded_short_answer(short: str, question: str, documents: list[RetrievedDoc]) -> bool:
    """Whether a short answer can be read in the passages (yes/no, a named option, or a span)."""
    if not short.strip():
        return False
    kind = answer_type(question)
    if kind == "yes_no":
        return normalized(short) in YES_NO_ANSWERS
    if kind == "choice":
        return any(normalized(option) == normalized(short) for option in choice_options(question) or ())
    terms = content_terms(short)
    if not terms:
        return any(normalized(short) in normalized(doc["text"]) for doc in documents)
    if terms <= content_terms(question):
        return False
    return any(terms <= content_terms(doc["text"]) for doc in documents)


#: Normalised short answers that answer a yes/no question.
YES_NO_ANSWERS = frozenset({"yes", "no", "是", "不是", "否", "对", "不对"})


def is_none_answer(short: str) -> bool:
    """Whether a short answer says the sources do not answer ("none", prompts.answer.NONE_ANSWERS)."""
    return short.strip().rstrip(".。!！").strip().lower() in NONE_ANSWERS


def clean_model_answer(
    text: str, system: str, question: str, language: str, sources: list[RetrievedDoc]
) -> str:
    """The model's reply without echoes, preambles, instructions and planted tokens (or "")."""
    text = strip_preamble(strip_source_headers(text))
    scaffolding = [
        system,
        *REVISION_NOTES.values(),
        ANSWER_USER_TEMPLATES[language].format(sources="", question=""),
    ]
    text = EchoDetector(scaffolding, question, exempt=(*NOT_FOUND_TEXTS, *NOT_FOUND_VARIANTS)).remove(text)
    planted = planted_tokens(split_sentences(doc["text"]) for doc in sources)
    text = remove_sentences(
        text, lambda sentence: is_instruction_like(sentence) or carries_planted_token(sentence, planted)
    )
    return strip_preamble(text) if answer_body(text) else ""
