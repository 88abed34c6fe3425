"""`python -m benchmarks followups-docs`: does the rewrite of a follow-up about real library documentation
name what the previous turn was about?

The set (benchmarks/fixtures/followups_docs.jsonl) is two-turn conversations over the README / long
descriptions shipped inside installed packages (FastAPI, Typer, Rich, Pydantic, HTTPX for the development
half; sse-starlette, python-dotenv, orjson, redis-py, tqdm, Chroma for the test half). Each has the turn-1
question, its answer as the engine writes it (short answer line, then a cited sentence from the
documentation), a follow-up that points back with "it", "they", "its", "that parameter", "that function",
and the phrases any of which names the referent ("background task", "lifespan"). The halves are fixed by a
field of each line, by source library, so the test half is documentation of other libraries: it was
written before the rules were changed and is reported as aggregates only.

Measured per half, for the engine's weak-model rewrite (`heuristic_standalone` with the previous answer,
what nodes/contextualize.py runs without a strong model): `named` (the share of rewrites that name a
referent phrase as whole words, a plural "s" allowed) and `added_words` (the mean words the rewrite adds
to the follow-up: a rewrite that appends the whole previous question would name the referent too, so the
report shows what naming it cost).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.followups import load_fixture
from query.follow_ups import heuristic_standalone
from query.text import words_of

DEFAULT_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "followups_docs.jsonl"
#: The halves, as each fixture line names its own.
HALVES = ("dev", "test")
#: Digits of the reported rates.
DIGITS = 3
#: Fields every fixture line must have.
REQUIRED_FIELDS = frozenset({"id", "split", "source", "turn1", "turn2"})

#: A way of writing the standalone question of a conversation's follow-up.
Rewriter = Callable[["DocConversation"], str]


@dataclass(frozen=True)
class DocConversation:
    """A two-turn conversation over a library's documentation, with the phrases that name the referent."""

    cid: str
    split: str
    source: str
    reference: str
    """What kind of phrase points back ("pronoun-it", "that-parameter", ...), for reading the cases."""
    question: str
    answer: str
    follow_up: str
    referents: tuple[str, ...]


def parse_doc_conversation(record: dict[str, Any]) -> DocConversation:
    """One fixture record as a DocConversation; ValueError naming what is missing or inconsistent (a
    follow-up that already names its referent measures nothing)."""
    missing = REQUIRED_FIELDS - set(record)
    if missing:
        raise ValueError(f"conversation {record.get('id')!r} lacks {', '.join(sorted(missing))}")
    if record["split"] not in HALVES:
        raise ValueError(f"conversation {record['id']!r}: split must be one of {', '.join(HALVES)}")
    turn1, turn2 = record["turn1"], record["turn2"]
    conversation = DocConversation(
        cid=record["id"],
        split=record["split"],
        source=record["source"],
        reference=record.get("reference", ""),
        question=turn1["question"],
        answer=turn1["answer"],
        follow_up=turn2["question"],
        referents=tuple(turn2["referents"]),
    )
    if not conversation.referents:
        raise ValueError(f"conversation {conversation.cid!r}: no referent phrase")
    if names_referent(conversation.follow_up, conversation.referents):
        raise ValueError(f"conversation {conversation.cid!r}: the follow-up already names its referent")
    return conversation


def load_doc_conversations(path: Path = DEFAULT_FIXTURE) -> list[DocConversation]:
    """The conversations of a JSONL fixture, in file order; ValueError on a bad line or a repeated id."""
    return load_fixture(path, parse_doc_conversation)


def names_referent(text: str, referents: Sequence[str]) -> bool:
    """Whether `text` names one of the referent phrases as whole words (case-insensitive; a plural "s" or
    "es" allowed, so "background task" counts in "background tasks")."""
    folded = text.casefold()
    return any(
        re.search(rf"(?<![\w.\-]){re.escape(phrase.casefold())}(?:e?s)?(?![\w\-])", folded)
        for phrase in referents
    )


def weak_model_rewrite(conversation: DocConversation) -> str:
    """The rewrite of the engine's weak-model path: the heuristic with the previous question and answer."""
    return heuristic_standalone(conversation.follow_up, [conversation.question], [conversation.answer])


def added_words(follow_up: str, standalone: str) -> int:
    """Words the standalone question has beyond the follow-up's."""
    return max(len(words_of(standalone)) - len(words_of(follow_up)), 0)


def run_followups_docs_eval(
    conversations: Sequence[DocConversation], rewrite: Rewriter = weak_model_rewrite
) -> dict[str, Any]:
    """Per half: how many conversations, the share whose rewrite names the referent, the mean words added;
    the development half's cases one by one (for reading while building), the test half's only as
    aggregates."""
    scored = [(conversation, rewrite(conversation)) for conversation in conversations]
    halves: dict[str, Any] = {}
    for half in HALVES:
        members = [(c, standalone) for c, standalone in scored if c.split == half]
        named = [names_referent(standalone, c.referents) for c, standalone in members]
        added = [added_words(c.follow_up, standalone) for c, standalone in members]
        halves[half] = {
            "n": len(members),
            "sources": sorted({c.source for c, _ in members}),
            "named": round(sum(named) / len(named), DIGITS) if named else None,
            "added_words": round(sum(added) / len(added), DIGITS) if added else None,
        }
    dev_cases = [
        {
            "id": c.cid,
            "follow_up": c.follow_up,
            "standalone": standalone,
            "named": names_referent(standalone, c.referents),
        }
        for c, standalone in scored
        if c.split == "dev"
    ]
    return {
        "conversations": len(conversations),
        "rewrite": "heuristic_standalone(follow-up, [question], [answer]) (the weak-model path)",
        "halves": halves,
        "dev_cases": dev_cases,
    }
