"""The model's draft: how the answer call is made (stop sequences, or a JSON schema where that helps) and how
its reply becomes a draft ("Answer: X / Explanation: Y" -> short answer line, then the cleaned explanation).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from nodes.draft_text import clean_model_answer, is_none_answer
from nodes.instrumentation import structured_call
from nodes.resources import get_resources
from prompts.answer import NOT_FOUND_EN, NOT_FOUND_ZH
from retrieval.answer_text import (
    compose_answer,
    is_garbage,
    is_not_found_answer,
    split_short_answer,
    strip_preamble,
)
from retrieval.injection import is_instruction_like
from retrieval.source_blocks import strip_source_headers
from state.context import Context
from state.schemas import AnswerReply, RetrievedDoc

#: The tag that keeps a model call out of LangGraph's "messages" stream (langgraph.constants.TAG_NOSTREAM).
NO_STREAM_TAG = "nostream"
#: What a JSON-schema answer call that gave no usable object returns (never used as an answer).
EMPTY_REPLY = AnswerReply(answer="", explanation="")


def uses_json_schema(context: Context) -> bool:
    """Whether the answer is asked as a JSON object (`json_schema`, or `auto` for a weak model).
    Not the default: the grammar gets the asked form more often, but end to end it answered no better
    (README)."""
    if context.answer_decoding != "auto":
        return context.answer_decoding == "json_schema"
    resources = get_resources()
    return resources.supports_json_schema("generate") and resources.strength("generate", context) == "weak"


def unstreamed(model: BaseChatModel) -> BaseChatModel:
    """A copy of the model whose calls stay out of LangGraph's "messages" stream (NO_STREAM_TAG)."""
    return model.model_copy(update={"tags": [*(model.tags or []), NO_STREAM_TAG]})


def json_schema_draft(
    model: BaseChatModel, messages: list[BaseMessage], max_tokens: int
) -> tuple[str, str | None, dict[str, Any]]:
    """(reply as "Answer: X\nExplanation: Y", error or None, accounting) of an unstreamed JSON-schema call."""
    result, usage = structured_call(
        unstreamed(model), AnswerReply, messages, EMPTY_REPLY, json_schema=True, max_tokens=max_tokens
    )
    if not result.ok:
        return "", result.error or "no usable JSON answer", usage
    reply = result.value
    return f"Answer: {reply.answer.strip()}\nExplanation: {reply.explanation.strip()}", None, usage


def with_stop(model: BaseChatModel, stops: tuple[str, ...]) -> BaseChatModel:
    """A copy of the model that stops at `stops` (a model without a `stop` field is returned as is)."""
    if "stop" not in type(model).model_fields:
        return model
    return model.model_copy(update={"stop": list(stops)})


def model_draft(
    raw: str, system: str, question: str, language: str, sources: list[RetrievedDoc]
) -> tuple[str, str]:
    """(draft, short answer) of a model reply; an honest "not found" is kept whole."""
    headless = strip_source_headers(raw)
    if is_not_found_answer(strip_preamble(headless)):
        return clean_model_answer(raw, system, question, language, sources), ""
    short, explanation = split_short_answer(headless, allow_bare=bool(sources))
    if is_none_answer(short):  # the model's own "the sources do not answer" (simple templates)
        return (NOT_FOUND_ZH if language == "zh" else NOT_FOUND_EN), ""
    if short and (is_garbage(short) or is_instruction_like(short)):
        short = ""
    cleaned = clean_model_answer(explanation, system, question, language, sources) if explanation else ""
    if not short:
        return cleaned, ""
    return compose_answer(short, cleaned), short
