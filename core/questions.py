"""A turn's question checked before any work: not empty, valid UTF-8 text, not longer than the limit.

Why here, apart from the graph's start_turn node that runs it on every turn: the CLI checks a question
before it opens a store or hands it to a running server, and importing the node would load LangGraph
(about half a second) into a command that may only forward the question.
"""

from __future__ import annotations

from core.text import invalid_utf8


class InvalidQuestionError(ValueError):
    """The turn has no usable question (empty, too long, not valid UTF-8, or filters that cannot be
    applied)."""


def check_question(question: str, max_chars: int) -> None:
    """Raise InvalidQuestionError when the (stripped) question is empty, not valid UTF-8 text or longer
    than `max_chars` (RAG_MAX_QUERY_CHARS). Every run passes here; the CLI calls it before opening any
    store too, so bad input is refused before a damaged store or a missing model is even looked at."""
    if not question:
        raise InvalidQuestionError("empty question: pass {'question': '...'} or a human message")
    problem = invalid_utf8(question)  # lone surrogates from argv, stdin or a JSON escape (see core.text)
    if problem:
        raise InvalidQuestionError(f"question is not valid UTF-8 text: {problem}")
    if len(question) > max_chars:
        raise InvalidQuestionError(
            f"question too long: {len(question)} characters > {max_chars} (RAG_MAX_QUERY_CHARS)"
        )
