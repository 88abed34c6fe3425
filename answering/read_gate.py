"""The focused read's gate: whether reading the answer's passage again can change the answer's band.

The calibrator was fit on records where the read always ran, so the gate asks the calibrator itself.
The draft is judged as it stands, each outcome the read can have (no answer, an agreeing answer, a
replacing one) is written as a change of its signals and scored by the calibrator; when every outcome lands
in the draft's band the read is skipped. The signals the read's words decide take both of their ends, which
suffices because the calibrator is monotone in each signal; signals that need the read's words
(`answer_words`, its sentence's similarity) are held at the draft's. A draft whose band decide's text checks
already moved is always read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from answering.calibrator import Calibrator
from answering.decision import band_of
from answering.signals import token_f1
from state.answer_record import AnswerRecord, Band

#: The values a 0/1 signal the read's words decide can take.
EITHER = (0.0, 1.0)
#: Names of the read's outcomes (keys of `outcome_bands`).
NO_ANSWER = "no_answer"
AGREES = "agrees"
REPLACES = "replaces"


@dataclass(frozen=True)
class ReadOutcome:
    """One outcome of the read: `fixed` signal values, and the ends each signal in `ranges` can take."""

    name: str
    fixed: Mapping[str, float] = field(default_factory=dict)
    ranges: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def signal_sets(self, signals: Mapping[str, float]) -> Iterator[dict[str, float]]:
        """The pre-read `signals` changed by this outcome, once per combination of its ranges' ends."""
        names = tuple(self.ranges)
        for values in itertools.product(*(self.ranges[name] for name in names)):
            yield {**signals, **self.fixed, **dict(zip(names, values, strict=True))}


def read_outcomes(record: AnswerRecord) -> tuple[ReadOutcome, ...]:
    """The read's possible outcomes for a draft judged before the read (its focused-read candidate empty)."""
    signals = record["signals"]
    candidates = record["candidates"]
    short = record["short_answer"]
    proposing = {"readers_proposing": float(signals.get("readers_proposing", 0.0)) + 1.0}
    outcomes = [ReadOutcome(NO_ANSWER)]
    if short.strip():  # without a short answer, any answer the read gives replaces it
        agreeing = {
            "agree_draft_focused": token_f1(candidates["draft"], short),
            "agree_focused_extractive": token_f1(short, candidates["extractive"]),
        }
        outcomes.append(ReadOutcome(AGREES, fixed={**proposing, **agreeing}))
    replacing = {
        **proposing,
        "short_from_focused_read": 1.0,
        "short_from_extractive": 0.0,
        "has_short_answer": 1.0,
    }
    ranges = {
        "agree_draft_focused": EITHER if candidates["draft"].strip() else (0.0,),
        "agree_focused_extractive": EITHER if candidates["extractive"].strip() else (0.0,),
        "short_in_top_passage": EITHER,
        "short_in_evidence": EITHER,
        "short_in_explanation": EITHER,
    }
    outcomes.append(ReadOutcome(REPLACES, fixed=replacing, ranges=ranges))
    return tuple(outcomes)


def outcome_bands(record: AnswerRecord, calibrator: Calibrator) -> dict[str, frozenset[Band]]:
    """The bands each outcome of the read can give (by the calibrator's probability and thresholds)."""
    return {
        outcome.name: frozenset(
            band_of(calibrator.probability(signals), calibrator.thresholds)
            for signals in outcome.signal_sets(record["signals"])
        )
        for outcome in read_outcomes(record)
    }


def read_can_change_band(record: AnswerRecord, calibrator: Calibrator) -> bool:
    """Whether the focused read can change the band of `record` (the draft judged before the read)."""
    before = band_of(calibrator.probability(record["signals"]), calibrator.thresholds)
    if record["band"] != before:
        return True
    return any(bands != {before} for bands in outcome_bands(record, calibrator).values())
