"""The director's section of an answer prompt: recalled events within their token limit, this conversation's
first, one neutralised `- <text>` line each, unnumbered (background, not citable sources). An event that
does not fit is cut when MIN_USEFUL_EVENT_TOKENS of it fit, else skipped.
"""

from __future__ import annotations

from prompts.director import DIRECTOR_EN, DirectorTexts
from retrieval.injection import neutralize
from retrieval.tokens import count_tokens, truncate_to_tokens
from state.schemas import RetrievedDoc

#: A later event is cut into the remaining room only when at least this many of its tokens fit.
MIN_USEFUL_EVENT_TOKENS = 16
#: `metadata.director` of the events of another conversation (nodes.director_recall's OTHER_CONVERSATION).
OTHER_SCOPE = "other"


def event_line(text: str) -> str:
    """One event as its prompt line (line breaks flattened, neutralised)."""
    return "- " + neutralize(" ".join(text.split()))


def _section(texts: DirectorTexts, inside: list[str], outside: list[str]) -> str:
    if not inside and not outside:
        return ""
    parts = [texts.intro]
    if inside:
        parts.append(texts.conversation + "\n".join(inside))
    if outside:
        parts.append(texts.others + "\n".join(outside))
    return "".join(parts)


def _cut_line(text: str, room: int) -> str | None:
    """The event's line cut to `room` tokens of its own text; None when too little of it would fit."""
    if room < MIN_USEFUL_EVENT_TOKENS:
        return None
    flat = neutralize(" ".join(text.split()))
    cut = truncate_to_tokens(flat, room).rstrip("\ufffd").rstrip()
    return f"- {cut}..." if cut else None


def pack_director(
    events: list[RetrievedDoc], limit: int, texts: DirectorTexts = DIRECTOR_EN
) -> tuple[str, list[RetrievedDoc]]:
    """The section and the events in it, within `limit` tokens ("", [] when none fits)."""
    if not events or limit <= 0:
        return "", []
    inside: list[str] = []
    outside: list[str] = []
    used: list[RetrievedDoc] = []
    for doc in events:
        group = outside if doc["metadata"].get("director") == OTHER_SCOPE else inside
        group.append(event_line(doc["text"]))
        if count_tokens(_section(texts, inside, outside)) <= limit:
            used.append(doc)
            continue
        group.pop()
        group.append("")  # the room left for this event's text, with its heading and line break counted
        room = limit - count_tokens(_section(texts, inside, outside)) - 2
        group.pop()
        line = _cut_line(doc["text"], room)
        if line is None:
            continue
        group.append(line)
        if count_tokens(_section(texts, inside, outside)) <= limit:
            used.append(doc)
        else:  # tokens merged where the texts join: leave this one out
            group.pop()
    return _section(texts, inside, outside), used
