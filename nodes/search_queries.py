"""The search queries that rewrite and reformulate hand to retrieve: building, deduplicating, and checking
what a model wrote before it is searched (one set of rules for both nodes)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from core.keyword import analyze
from state.schemas import SearchQuery

#: Longest model-written search query kept, in characters (longer replies are paragraphs, not queries).
MAX_QUERY_CHARS = 300
#: A rewritten question may be this many times longer than the original (resolved references add words)...
STANDALONE_GROWTH = 4
#: ...and always at least this long.
STANDALONE_MIN_CHARS = 200
#: HyDE passages outside these bounds are dropped (too short to help) or cut (too long to embed well).
MIN_PASSAGE_CHARS = 20
MAX_PASSAGE_CHARS = 1500

#: Labels small models put before their answer ("Query: ...", "Standalone question: ...").
LABEL = re.compile(
    r"^\s*(?:[-*•\d.)\s]*)(?:standalone question|rewritten question|new query|search query|next query|query|"
    r"question|passage|answer|独立问题|问题|查询|改写)\s*[:：]\s*",
    re.IGNORECASE,
)
QUOTES = "\"'“”‘’「」`"


def search_query(text: str, purpose: str, dense_text: str = "") -> SearchQuery:
    """A SearchQuery; the dense text defaults to the keyword text."""
    return SearchQuery(text=text, dense_text=dense_text or text, purpose=purpose)


def normalized(text: str) -> str:
    """The comparison key of a query: case-folded, whitespace collapsed, end punctuation dropped."""
    return re.sub(r"\s+", " ", text).strip().rstrip("?？.。!！").strip().casefold()


def unique_queries(queries: Iterable[SearchQuery], *, exclude: Iterable[str] = ()) -> list[SearchQuery]:
    """Queries whose text is new (case-insensitively) to the list and to `exclude`, first copy kept."""
    seen = {normalized(text) for text in exclude}
    kept: list[SearchQuery] = []
    for query in queries:
        key = normalized(query["text"])
        if key and key not in seen:
            seen.add(key)
            kept.append(query)
    return kept


def first_line(reply: str) -> str:
    """The first non-empty line of a model reply, without list markers, labels or surrounding quotes."""
    for line in reply.splitlines():
        cleaned = LABEL.sub("", line).strip().strip(QUOTES).strip()
        if cleaned:
            return cleaned
    return ""


def on_topic(text: str, topic: str) -> bool:
    """Whether `text` shares an index term with `topic` (always true when the topic has no terms)."""
    wanted = set(analyze(topic))
    return not wanted or bool(wanted & set(analyze(text)))


def valid_query(reply: str, topic: str) -> str | None:
    """A model-written search query, or None when the reply is empty, too long, or off `topic`."""
    text = first_line(reply)
    if not text or len(text) > MAX_QUERY_CHARS or not on_topic(text, topic):
        return None
    return text


def valid_standalone(reply: str, question: str, history: str, max_chars: int) -> str | None:
    """A model-written standalone question, or None when empty, absurdly long, or off the conversation."""
    text = first_line(reply)
    limit = min(max_chars, max(STANDALONE_MIN_CHARS, STANDALONE_GROWTH * len(question)))
    if not text or len(text) > limit or not on_topic(text, f"{question}\n{history}"):
        return None
    return text


def valid_passage(reply: str, topic: str) -> str | None:
    """A HyDE passage (labels removed, cut to MAX_PASSAGE_CHARS), or None when too short or off `topic`."""
    text = LABEL.sub("", reply.strip()).strip().strip(QUOTES).strip()
    if len(text) < MIN_PASSAGE_CHARS or not on_topic(text, topic):
        return None
    return text[:MAX_PASSAGE_CHARS]


def valid_queries(replies: Sequence[str], topic: str, *, exclude: Iterable[str]) -> list[str]:
    """The usable, distinct, on-topic queries of a list a model returned (none equal to `exclude`)."""
    seen = {normalized(text) for text in exclude}
    kept: list[str] = []
    for reply in replies:
        text = valid_query(str(reply), topic)
        if text and normalized(text) not in seen:
            seen.add(normalized(text))
            kept.append(text)
    return kept
