"""A turn's question checked before any work: not empty, valid UTF-8 text, not longer than the limit
(here, not in the start_turn node, so the CLI can check without loading LangGraph).
"""

from __future__ import annotations

from core.text import invalid_utf8


class InvalidQuestionError(ValueError):
    """The turn has no usable question (empty, too long, not valid UTF-8, or bad filters)."""


def check_question(question: str, max_chars: int) -> None:
    """Raise InvalidQuestionError when the question is empty, not UTF-8 or longer than `max_chars`."""
    if not question:
        raise InvalidQuestionError("empty question: pass {'question': '...'} or a human message")
    problem = invalid_utf8(question)  # lone surrogates from argv, stdin or a JSON escape (see core.text)
    if problem:
        raise InvalidQuestionError(f"question is not valid UTF-8 text: {problem}")
    if len(question) > max_chars:
        raise InvalidQuestionError(
            f"question too long: {len(question)} characters > {max_chars} (RAG_MAX_QUERY_CHARS)"
        )
