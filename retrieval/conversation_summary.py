"""Summaries of a conversation's turns: a thread's messages as numbered turns (`turns_from_messages`), the
conversation's ids, and a block's summary, extractive (the questions and each one's best answer sentence)
or by a strong model, falling back to extractive (`block_summary`). Imported with the graph, so it imports
no store library.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from core.metadata import int_problem
from core.types import MetadataValue
from models.structured import with_max_tokens
from prompts.summary import SUMMARY_PROMPT, SUMMARY_SYSTEM
from retrieval.answer_text import best_sentences, is_garbage
from retrieval.tokens import count_tokens, truncate_to_tokens

logger = logging.getLogger(__name__)

#: Tokens of one question in the extractive summary (a pasted document must not crowd out the others).
EXTRACT_QUESTION_TOKENS = 40
#: Tokens of the answer sentence taken per turn by the extractive summary.
EXTRACT_ANSWER_TOKENS = 50
#: Words asked of a model summary per summary token (a word is about 1.3 tokens in English).
WORDS_PER_TOKEN = 0.7
#: Ids a conversation (or a turn) may be given that its memory chunks keep.
CONVERSATION_METADATA_KEYS = ("character_id", "background_id", "related_plot_id")
#: Longest id value kept (an id, not a text).
MAX_METADATA_VALUE_CHARS = 128
#: Tokens of one summary chunk, at most: kept inside the embedding window (MiniLM: 256).
SUMMARY_MAX_TOKENS = 200

#: A model-written summary of a block of turns; None (or garbage) means "use the extractive one".
Summarizer = Callable[[list["ConversationTurn"]], str | None]


class InvalidConversationMetadataError(ValueError):
    """A conversation id (character_id, background_id, related_plot_id) that cannot be kept."""


def conversation_metadata(values: Mapping[str, Any] | None) -> dict[str, MetadataValue]:
    """The ids of CONVERSATION_METADATA_KEYS in `values`, checked (a printable string of at most
    MAX_METADATA_VALUE_CHARS, or an integer; None and '' are left out); any other key or value raises
    InvalidConversationMetadataError naming it."""
    kept: dict[str, MetadataValue] = {}
    for key, value in (values or {}).items():
        if key not in CONVERSATION_METADATA_KEYS:
            raise InvalidConversationMetadataError(
                f"conversation metadata key {key!r} is not one of {', '.join(CONVERSATION_METADATA_KEYS)}"
            )
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise InvalidConversationMetadataError(f"{key}: an id is a string or an integer, not {value!r}")
        if isinstance(value, str) and (len(value) > MAX_METADATA_VALUE_CHARS or not value.isprintable()):
            raise InvalidConversationMetadataError(
                f"{key}: at most {MAX_METADATA_VALUE_CHARS} printable characters"
            )
        if isinstance(value, int) and (problem := int_problem(value)) is not None:
            raise InvalidConversationMetadataError(f"{key}: {problem}")
        kept[key] = value
    return kept


@dataclass(frozen=True)
class ConversationTurn:
    """One exchange: the user's message and the assistant's reply (empty while unanswered)."""

    number: int
    question: str
    answer: str

    def text(self) -> str:
        """The detail event's text: numbered, so two identical exchanges are still two chunks."""
        reply = f"\nAssistant: {self.answer}" if self.answer else ""
        return f"Turn {self.number}\nUser: {self.question}{reply}"


def turns_from_messages(messages: Sequence[BaseMessage]) -> list[ConversationTurn]:
    """Exchanges of a thread's messages: a human message opens a turn, the AI messages after it answer it
    (tool and system messages are not part of the conversation)."""
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        text = message.text.strip()
        if isinstance(message, HumanMessage) and text:
            turns.append((text, []))
        elif isinstance(message, AIMessage) and text and turns:
            turns[-1][1].append(text)
    return [
        ConversationTurn(number, question, "\n".join(answers))
        for number, (question, answers) in enumerate(turns, start=1)
    ]


def _one_line(text: str, tokens: int) -> str:
    cut = truncate_to_tokens(" ".join(text.split()), tokens).rstrip("\ufffd").strip()
    return cut if count_tokens(cut) >= count_tokens(" ".join(text.split())) else f"{cut}..."


def summary_header(turns: Sequence[ConversationTurn]) -> str:
    """The first words of a summary chunk: which turns it covers."""
    return f"Summary of conversation turns {turns[0].number}-{turns[-1].number}:"


def extractive_summary(turns: Sequence[ConversationTurn], max_tokens: int) -> str:
    """The user's questions, each with the answer sentence that best matches it, within `max_tokens` (a small
    model's written summary invents facts)."""
    parts = [summary_header(turns)]
    for turn in turns:
        part = f"Asked: {_one_line(turn.question, EXTRACT_QUESTION_TOKENS)}"
        sentences = best_sentences(turn.question, turn.answer, 1) if turn.answer else []
        if sentences:
            part += f" Answer: {_one_line(sentences[0], EXTRACT_ANSWER_TOKENS)}"
        parts.append(part)
    return truncate_to_tokens("\n".join(parts), max_tokens).rstrip("\ufffd").strip()


def model_summarizer(model: BaseChatModel, max_tokens: int, transcript_tokens: int = 3000) -> Summarizer:
    """A Summarizer that asks `model` (strong models only); any failure returns None (extractive then)."""

    def summarize(turns: list[ConversationTurn]) -> str | None:
        transcript = truncate_to_tokens("\n\n".join(turn.text() for turn in turns), transcript_tokens)
        prompt = SUMMARY_PROMPT.format(
            first=turns[0].number,
            last=turns[-1].number,
            transcript=transcript,
            max_words=max(10, int(max_tokens * WORDS_PER_TOKEN)),
        )
        bound = with_max_tokens(model, max_tokens)
        try:
            reply = bound.invoke([SystemMessage(SUMMARY_SYSTEM), HumanMessage(prompt)])
        except Exception as error:  # noqa: BLE001 - a failed call falls back to the extractive summary
            logger.warning("summary model failed (%s); using the extractive summary", error)
            return None
        return reply.text.strip()

    return summarize


def block_summary(block: list[ConversationTurn], max_tokens: int, summarize: Summarizer | None) -> str:
    """The summary of one block of turns within `max_tokens`: `summarize`'s (after the header naming the
    turns) when it gives a usable one, else the extractive summary."""
    written = summarize(block) if summarize is not None else None
    if written is None or is_garbage(written):
        return extractive_summary(block, max_tokens)
    text = f"{summary_header(block)} {' '.join(written.split())}"
    return truncate_to_tokens(text, max_tokens).rstrip("\ufffd").strip()
