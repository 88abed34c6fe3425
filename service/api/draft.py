"""Telling a stream's client when the answer it was shown is withdrawn: the `draft_replaced` SSE event.

Why: the stream forwards the model's tokens as they are written, but the answer the run ends with can be
another text: a later generation round writes a new draft (the answer grader sent the run back), cite turns
the draft into the honest "not found" answer, or the engine keeps another round's draft or the extractive
fallback. Without a signal a client shows the withdrawn draft, or the next round's tokens glued onto it.

The watcher sees the stream's tokens and events in order and answers, before an event goes out, whether a
`draft_replaced` must precede it:
- `generation_start` of a round after tokens were shown: reason "regenerated"; `answer` is null, since
  the replacement is not written yet (its tokens follow; a later `draft_replaced` comes if the final
  answer then differs from them);
- `generation_complete` whose answer does not contain what the client was shown: reason "not_found" when
  the run's judgement is "not found" (the event's `band`, or its `not_found` flag), else "revised";
  `answer` is the final answer.
`round` is the generation round whose draft is withdrawn.

"Contains what was shown" compares words, not characters: the engine reformats every draft (the "Answer:" /
"Explanation:" labels dropped, the short answer on its own line, citation markers renumbered or added), so
a literal prefix test would flag every answer. The shown text, read as the engine reads a draft (labels and
echoed source headers removed), must appear in the final answer once both are lowercased and stripped of
citation markers, spaces and punctuation (retrieval.answer_text.normalized).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from core.text import strip_references
from retrieval.answer_text import (
    compose_answer,
    normalized,
    split_short_answer,
    strip_preamble,
)
from retrieval.source_blocks import strip_source_headers

#: The SSE event that tells a client to clear the draft it shows.
DRAFT_REPLACED = "draft_replaced"
#: Why a shown draft was withdrawn.
ReplaceReason = Literal["regenerated", "not_found", "revised"]


def comparable(text: str) -> str:
    """A draft or answer as the words it says: labels, source headers, preamble and markers removed,
    lowercased, without spaces or punctuation."""
    short, explanation = split_short_answer(strip_source_headers(text), allow_bare=True)
    body = compose_answer(short, explanation) if short or explanation else text
    return normalized(strip_references(strip_preamble(body)))


def keeps_draft(shown: str, answer: str) -> bool:
    """Whether the final `answer` still says everything the client was shown (see the module docstring);
    a shown text with no word at all (model garbage) is kept only when nothing was shown."""
    words = comparable(shown)
    if not words:
        return not shown.strip()
    return words in comparable(answer)


class DraftWatch:
    """What one stream's client has been shown of the answer, and when it must be told to clear it."""

    def __init__(self) -> None:
        self.round = 0
        self.shown = ""

    def token(self, text: str) -> None:
        """A token the client was sent."""
        self.shown += text

    def before(self, name: str, data: dict[str, Any]) -> dict[str, Any] | None:
        """The `draft_replaced` payload to send before event `name` (None when the draft stands)."""
        if name == "generation_start":
            replaced = self._replaced("regenerated", None) if self.shown.strip() else None
            self.round = int(data.get("round") or self.round + 1)
            self.shown = ""
            return replaced
        if name == "generation_complete" and self.shown:
            answer = str(data.get("answer") or "")
            if keeps_draft(self.shown, answer):
                return None
            not_found = data.get("band") == "not_found" or bool(data.get("not_found"))
            return self._replaced("not_found" if not_found else "revised", answer)
        return None

    def _replaced(self, reason: ReplaceReason, answer: str | None) -> dict[str, Any]:
        payload = {"round": self.round or 1, "reason": reason, "answer": answer}
        self.shown = ""
        return payload


def sse_event(name: str, data: Any) -> dict[str, str]:
    """One Server-Sent Event of the API's streams: its name and its JSON data (non-ASCII kept as is)."""
    return {"event": name, "data": json.dumps(data, ensure_ascii=False, default=str)}
