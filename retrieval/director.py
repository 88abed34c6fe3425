"""The director (part of the conversational memory): when a conversation stalls, the answer gets the events of
this conversation and a few of the tenant's other conversations, as their own prompt section.

A finished turn made no progress when its answer was "not found" (or empty), or when its question repeats
an earlier one of the thread (counted from the thread's messages, so every interface sees the same count).
The director steps in once the run of such turns reaches RAG_DIRECTOR_STALL_TURNS. It recalls, nearest the
question, DIRECTOR_CONVERSATION_K items of this conversation and DIRECTOR_OTHER_K of the tenant's others
(retrieval.summary_search), within the turn's tenant and filters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from retrieval.answer_text import is_not_found_answer
from retrieval.conversation_summary import turns_from_messages
from retrieval.summary_search import DirectorHits, director_search

__all__ = ["DirectorHits", "director_search", "question_key", "stalled_turns"]

#: Characters a question is compared without (case, spacing and end punctuation do not make a new question).
_NOT_WORDS = re.compile(r"[\s\W_]+", re.UNICODE)


def question_key(question: str) -> str:
    """A question as compared for "asked again": lower case, without spaces and punctuation."""
    return _NOT_WORDS.sub(" ", question.casefold()).strip()


def stalled_turns(messages: Sequence[BaseMessage], question: str) -> int:
    """Turns without progress in a row, up to this one (see the module's definition). `messages` is the
    thread's conversation, possibly ending with this turn's question; `question` is this turn's."""
    turns = turns_from_messages(messages)
    current = question_key(question)
    if turns and not turns[-1].answer and question_key(turns[-1].question) == current:
        turns = turns[:-1]  # this turn's own question, not answered yet
    seen: list[set[str]] = []
    asked: set[str] = set()
    for turn in turns:
        seen.append(set(asked))
        asked.add(question_key(turn.question))
    count = 0
    for turn, earlier in zip(reversed(turns), reversed(seen), strict=True):
        repeated = question_key(turn.question) in earlier
        if not (repeated or not turn.answer.strip() or is_not_found_answer(turn.answer)):
            break
        count += 1
    return count + (1 if current and current in asked else 0)
