"""The typed answer record of one judged draft, kept in state and in QA records (answering judges it): no
decision travels as text."""

from __future__ import annotations

from typing import Literal

from typing_extensions import TypedDict  # pydantic builds JSON schemas of state from it on Python < 3.12

Band = Literal["confident", "tentative", "not_found"]
"""The three outcomes a user sees: a bold short answer with its cited explanation; "not sure" with the
closest supported sentence; or "not found" with its reason."""

BANDS: tuple[Band, ...] = ("confident", "tentative", "not_found")


class Candidates(TypedDict):
    """The short answer each reader proposed ("" when it proposed none)."""

    draft: str  # the answer call's own ("Answer:" line, or the span its explanation states)
    focused_read: str
    extractive: str  # the extractive answerer's typed span over the passages the reader saw


class ClosestSentence(TypedDict):
    """The best-supported sentence of the sources: what a tentative answer shows."""

    text: str
    source: int  # 1-based number of the cited source the sentence is in
    start: int  # character offsets of the sentence in that source's text
    end: int


class AnswerRecord(TypedDict):
    """One judged answer: its parts, each reader's candidate, the signals, probability and outcome."""

    short_answer: str  # shown in bold only when `band` is confident
    explanation: str  # markers refer to the draft's sources
    candidates: Candidates
    signals: dict[str, float]  # answering.signals.SIGNAL_NAMES, the calibrator's input
    probability: float  # calibrated P(the short answer holds a right answer)
    band: Band
    decline_reason: str  # "" unless `band` is not_found
    closest: ClosestSentence | None
    calibrator: str  # the artifact's `name`
