"""The `draft_replaced` SSE event: the answer tokens a stream's client was shown are withdrawn.

A later round may regenerate, `cite` may turn the draft into "not found", or the engine may keep another
draft; without the event a client shows the withdrawn text. "Still says what was shown" compares normalised
words (retrieval.answer_text.normalized): the engine reformats every draft (labels, citation markers).
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
    """A draft or answer as the words it says (labels, headers, markers, spaces and punctuation removed)."""
    short, explanation = split_short_answer(strip_source_headers(text), allow_bare=True)
    body = compose_answer(short, explanation) if short or explanation else text
    return normalized(strip_references(strip_preamble(body)))


def keeps_draft(shown: str, answer: str) -> bool:
    """Whether the final `answer` still says everything the client was shown."""
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
