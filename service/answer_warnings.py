"""What a reader must know about an answer before trusting it, as warnings every interface can show.

Why: `cite` flags sentences that no passage supports and marks citations it had to infer (the model cited
nothing, so sources were matched to the answer by term overlap). Both were in the output state, yet
`rag ask` printed such an answer exactly like a well-grounded one. `rag ask`, `rag chat` and `--json` now
show them; the warnings are computed from the output state only, so any other interface can reuse them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

WarningKind = Literal["unsupported_sentences", "inferred_citations"]

#: How much of each unsupported sentence the one-line warning quotes.
QUOTED_CHARS = 80
#: How many unsupported sentences the one-line warning quotes (all are in `sentences`).
QUOTED_SENTENCES = 2


class AnswerWarning(TypedDict, total=False):
    """One warning: its kind, the line shown to people, and (for sentences) the sentences themselves."""

    kind: WarningKind
    message: str
    sentences: list[str]


def answer_warnings(result: Mapping[str, Any]) -> list[AnswerWarning]:
    """The warnings of an output state: unsupported sentences, and citations that are all inferred."""
    warnings: list[AnswerWarning] = []
    unsupported = [str(s) for s in result.get("unsupported_sentences") or [] if str(s).strip()]
    if unsupported:
        verb = "is" if len(unsupported) == 1 else "are"
        warnings.append(
            AnswerWarning(
                kind="unsupported_sentences",
                message=f"{_count(len(unsupported), 'sentence')} of this answer {verb} not supported by the "
                f"sources: {_quote(unsupported)}",
                sentences=unsupported,
            )
        )
    citations: Sequence[Mapping[str, Any]] = result.get("citations") or []
    if citations and all(citation.get("inferred") for citation in citations):
        warnings.append(
            AnswerWarning(
                kind="inferred_citations",
                message="the model cited no source: the sources below were matched to the answer by shared "
                "words, not cited by the model",
            )
        )
    return warnings


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _quote(sentences: list[str]) -> str:
    quoted = []
    for sentence in sentences[:QUOTED_SENTENCES]:
        flat = " ".join(sentence.split())
        quoted.append('"' + (flat if len(flat) <= QUOTED_CHARS else flat[: QUOTED_CHARS - 1] + "…") + '"')
    more = len(sentences) - QUOTED_SENTENCES
    return ", ".join(quoted) + (f" and {more} more" if more > 0 else "")
