"""The answer's judgement as every interface shows it: its band, calibrated confidence and not-found reason,
read once here so `rag ask`, `--json`, the REST routes and the seed contract agree (also on a state whose
`band` was never set).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from state.answer_record import Band

#: Decimals of the confidence an interface returns (a calibrated probability needs no more).
CONFIDENCE_DIGITS = 3
#: How `rag ask` names each band in words under the answer.
BAND_WORDS: dict[Band, str] = {"confident": "confident", "tentative": "not sure", "not_found": "not found"}


class Judgement(TypedDict):
    """What every interface returns about an answer's trustworthiness."""

    confidence: float | None
    """Calibrated probability that the short answer is right, 0-1 (None when the run wrote no answer)."""
    band: Band
    """confident (the short answer is shown), tentative (only the closest supported sentence) or
    not_found."""
    not_found_reason: str
    """Why nothing was found, in plain words ("" unless band is not_found)."""


def judgement(result: Mapping[str, Any]) -> Judgement:
    """The band, confidence and not-found reason of an output state (or of a response holding them)."""
    not_found = bool(result.get("not_found"))
    band: Band = "not_found" if not_found else "confident"
    if not not_found and result.get("band") == "tentative":
        band = "tentative"
    raw = result.get("confidence")
    confidence = None if raw is None else round(min(1.0, max(0.0, float(raw))), CONFIDENCE_DIGITS)
    reason = ""
    if band == "not_found":
        record = result.get("answer_record") or {}
        reason = str(result.get("not_found_reason") or record.get("decline_reason") or "").strip()
    return Judgement(confidence=confidence, band=band, not_found_reason=reason)


def judgement_line(result: Mapping[str, Any]) -> str:
    """The judgement in words: "confident, 0.86", "not sure, 0.41" or "not found: <reason>"."""
    judged = judgement(result)
    words = BAND_WORDS[judged["band"]]
    if judged["band"] == "not_found":
        return f"{words}: {judged['not_found_reason']}" if judged["not_found_reason"] else words
    confidence = judged["confidence"]
    return words if confidence is None else f"{words}, {confidence:.2f}"
