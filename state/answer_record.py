"""The typed answer record of one judged draft, kept in state and in QA records (answering judges it).

Why a record rather than the draft's text: a decline used to travel from node to node as a sentence inside
the draft and was detected again by matching that sentence. The record says it in fields: which short answer
each reader proposed, the signals read from them, the calibrated probability, the band, and (for a decline)
the reason in plain words.
"""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict  # pydantic builds JSON schemas of state from it on Python < 3.12

Band = Literal["confident", "tentative", "not_found"]
"""The three outcomes a user sees: a bold short answer with its cited explanation; "not sure" with the
closest supported sentence; or "not found" with its reason."""

BANDS: tuple[Band, ...] = ("confident", "tentative", "not_found")


class Candidates(TypedDict):
    """The short answer each reader proposed ("" when it proposed none)."""

    draft: str
    """The answer call's own short answer (its "Answer:" line, or the span its explanation states)."""
    focused_read: str
    """The focused read's reply over the one passage that holds the draft's answer."""
    extractive: str
    """The extractive answerer's typed span over the passages the reader saw."""


class ClosestSentence(TypedDict):
    """The best-supported sentence of the sources: what a tentative answer shows."""

    text: str
    source: int
    """1-based number of the cited source the sentence is in."""
    start: int
    """Character offsets of the sentence in that source's text."""
    end: int


class AnswerRecord(TypedDict):
    """One judged answer: the short answer and explanation, each reader's candidate, the signals, the
    calibrated probability and the outcome."""

    short_answer: str
    """The short answer the engine had (shown in bold only when `band` is confident)."""
    explanation: str
    """The draft's cited explanation (markers refer to the draft's sources)."""
    candidates: Candidates
    signals: dict[str, float]
    """Named signal values (answering.signals.SIGNAL_NAMES), the calibrator's input."""
    probability: float
    """Calibrated P(the short answer holds a right answer), 0-1."""
    band: Band
    decline_reason: str
    """Why the answer is "not found", in plain words ("" unless `band` is not_found)."""
    closest: ClosestSentence | None
    """The best-supported sentence of the sources (None when no source has one)."""
    calibrator: str
    """Name of the calibrator that gave the probability (its artifact's `name`)."""
