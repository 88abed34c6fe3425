"""What a reader must know about a confident answer before trusting it: a sentence stating a name, number,
date or quoted term no source contains. A tentative or not-found answer already says how little to trust it
(its band), so it gets no warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict, cast

from service.answer_judgement import judgement

WarningKind = Literal["unsupported_facts"]

#: How much of each sentence the one-line warning quotes.
QUOTED_CHARS = 80
#: How many sentences the one-line warning quotes (all are in `sentences`).
QUOTED_SENTENCES = 2


class AnswerWarning(TypedDict, total=False):
    """One warning: its kind, the line shown to people, the sentences and the facts the sources lack."""

    kind: WarningKind
    message: str
    sentences: list[str]
    facts: list[str]


def answer_warnings(result: Mapping[str, Any]) -> list[AnswerWarning]:
    """The warnings of an output state (only a confident answer gets any)."""
    if judgement(result)["band"] != "confident":
        return []
    unsupported = [str(s) for s in result.get("unsupported_sentences") or [] if str(s).strip()]
    if not unsupported:
        return []
    sentences, facts = unsupported_facts(unsupported, _passage_texts(result))
    if not sentences:
        return []
    verb = "states" if len(sentences) == 1 else "state"
    return [
        AnswerWarning(
            kind="unsupported_facts",
            message=f"{_count(len(sentences), 'sentence')} of this answer {verb} what no source says "
            f"({', '.join(facts)}): {_quote(sentences)}",
            sentences=sentences,
            facts=facts,
        )
    ]


def unsupported_facts(sentences: Sequence[str], passages: Sequence[str]) -> tuple[list[str], list[str]]:
    """The sentences with a name, number, date or quoted term no passage holds, and those facts (Chinese
    terms unchecked: a run of Chinese characters is wording as often as a name)."""
    from dataclasses import replace

    from retrieval.grounding import Evidence, anchors_of

    evidence = Evidence.of(list(passages))
    flagged: list[str] = []
    facts: dict[str, None] = {}
    for sentence in sentences:
        missing = evidence.missing(replace(anchors_of(sentence), cjk=()))
        if missing:
            flagged.append(sentence)
            facts.update(dict.fromkeys(missing))
    return flagged, list(facts)


def _passage_texts(result: Mapping[str, Any]) -> list[str]:
    """The titled texts of every passage the answer could rest on (cited and retrieved)."""
    from retrieval.grounding import titled_text
    from state.schemas import RetrievedDoc

    docs = [*(result.get("sources") or []), *(result.get("retrieved") or [])]
    texts = [titled_text(cast(RetrievedDoc, {**doc, "text": str(doc.get("text") or "")})) for doc in docs]
    return list(dict.fromkeys(text for text in texts if text.strip()))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _quote(sentences: list[str]) -> str:
    quoted = []
    for sentence in sentences[:QUOTED_SENTENCES]:
        flat = " ".join(sentence.split())
        quoted.append('"' + (flat if len(flat) <= QUOTED_CHARS else flat[: QUOTED_CHARS - 1] + "…") + '"')
    more = len(sentences) - QUOTED_SENTENCES
    return ", ".join(quoted) + (f" and {more} more" if more > 0 else "")
