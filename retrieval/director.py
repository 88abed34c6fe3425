"""The director (seed 5): when a conversation stalls, the answer gets the events of this conversation and a
few of the tenant's other conversations, as their own prompt section.

"Without progress", as defined here (and counted from the thread's messages, so every checkpointer and
every interface sees the same count): a finished turn made no progress when its answer was the engine's
honest "not found" (or empty), or when its question repeats an earlier question of the thread (the user
asks again: the answer did not help). The count is the run of such turns ending with the latest finished
one; this turn's own question adds one when it repeats an earlier question. The director steps in once the
count reaches RAG_DIRECTOR_STALL_TURNS (seed value 3).

What it recalls: chunks with `doc_type=event` (a summarized conversation's summaries and turns,
retrieval.conversation_summary, and the events a caller indexed with a conversation id), nearest the turn's
question: RAG_DIRECTOR_CONVERSATION_K of this conversation, RAG_DIRECTOR_OTHER_K of the tenant's other
conversations (events that belong to no conversation are not "another conversation"). Both searches run in
the turn's tenant only (the searcher scopes every search to it, whatever the filters say), and the caller's
metadata filters narrow them as they narrow the turn's retrieval.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import BaseMessage

from config.settings import SearchMode
from core.types import SearchHit
from retrieval.answer_text import is_not_found_answer
from retrieval.conversation_summary import turns_from_messages
from retrieval.search import SearchResult

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


@dataclass(frozen=True)
class DirectorHits:
    """What the director found: this conversation's events, then the other conversations' (best first)."""

    conversation: list[SearchHit]
    others: list[SearchHit]


class EventSearcher(Protocol):
    """What the director needs of a searcher (retrieval.search.Searcher, or any that scopes by tenant)."""

    def embed_query(self, query: str) -> list[float]:
        """The query's vector (embedded once for both searches)."""
        ...

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        mode: SearchMode | None = None,
        filters: dict[str, Any] | None = None,
        tenant: str | None = None,
        query_vector: Sequence[float] | None = None,
    ) -> SearchResult:
        """Top `k` chunks of `tenant` for `query`."""
        ...


def _all(*filters: dict[str, Any] | None) -> dict[str, Any]:
    present = [item for item in filters if item]
    return present[0] if len(present) == 1 else {"$and": present}


def director_search(
    searcher: EventSearcher,
    question: str,
    *,
    tenant: str,
    conversation_id: str,
    conversation_k: int,
    other_k: int,
    filters: dict[str, Any] | None = None,
    mode: SearchMode | None = None,
) -> DirectorHits:
    """The events nearest `question`: `conversation_k` of `conversation_id`, `other_k` of the tenant's other
    conversations; every search is the tenant's alone. Nothing without a conversation id (there is no "this
    conversation" then)."""
    if not conversation_id or not question.strip():
        return DirectorHits([], [])
    events = {"doc_type": "event"}
    vector = searcher.embed_query(question) if mode != "bm25" else None

    def search(k: int, scope: dict[str, Any]) -> list[SearchHit]:
        if k <= 0:
            return []
        found = searcher.search(
            question, k=k, filters=_all(filters, events, scope), tenant=tenant, mode=mode, query_vector=vector
        )
        return list(found.hits)

    inside = search(conversation_k, {"conversation_id": conversation_id})
    outside = search(
        other_k, {"$and": [{"conversation_id": {"$ne": conversation_id}}, {"conversation_id": {"$ne": ""}}]}
    )
    return DirectorHits(inside, outside)
