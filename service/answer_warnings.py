"""What a reader must know about a confident answer before trusting it, as warnings every interface can show.

Why so few: a warning must change what the user believes. A tentative or not-found answer already says
how little to trust it (its band, service.answer_judgement), so it gets none; a confident answer is
shown as right, so it warns only about a sentence stating a fact the sources do not contain: a name, a
number or date, or a quoted term of a sentence `cite` flagged as unsupported that no passage holds
(retrieval.grounding's anchors). Unsupported wording alone, and citations matched by shared words rather
than given by the model, change nothing a reader would do (the per-source "(inferred)" flag stays). The
warnings are computed from the output state only, so any interface can reuse them.
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
    """The warnings of an output state: none unless its band is confident; then one for the unsupported
    sentences that state a name, number, date or quoted term no passage contains."""
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
    """The sentences with a name, number, date or quoted term missing from every passage, and those facts
    (each once, in order). Chinese terms are not checked: a run of Chinese characters is wording as often
    as a name."""
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
    """The texts of every passage the answer could rest on (cited sources and retrieved ones), each with
    its title, as the grounding check reads them."""
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
