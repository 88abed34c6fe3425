"""The focused read's gate: whether reading the answer's passage again can change the answer's band.

Why: the focused read (nodes/focused_read.py) is one more model call per answer, and what the user sees is
the band the calibrator gives (answering.decision). The calibrator was fit on records where the read always
ran, so the gate asks the calibrator itself: before the read, the draft is judged as it stands (the read's
candidate empty), each outcome the read can have is written as a change of that judgement's signals, and
each is scored. When every outcome lands in the draft's band, the read cannot change what is shown and is
skipped; otherwise it runs.

The outcomes (answering.signals names the signals):
- no answer ("none", a failed call, a reply its passage does not hold): the signals as they are;
- an answer that agrees with the draft's short answer (the draft stays): one more reader proposing, and the
  read's agreement with the other readers is the short answer's own;
- another answer, which replaces the short answer: one more reader proposing, the short answer from the read
  (not the extractive answerer), and the signals the read's words decide take both of their ends: its
  agreement with the draft's and the extractive answerer's candidates (0 when that reader proposed nothing),
  and whether it is in the top passage, the evidence and the explanation (the read's answer need only be
  readable in the passage it read, which need not be the top one nor survive the evidence's compression).

Both ends suffice: the calibrator is monotone in each signal (a logistic regression, then a non-decreasing
isotonic map), so an outcome between the ends (a partial agreement) has a band between theirs. Not foreseen,
because they need the read's words: their count (`answer_words`) and the question-evidence similarity of the
sentence that holds them, held at the draft's; and decide's text checks (an explanation that contradicts the
short answer, nothing to show). A draft whose band those checks already moved is always read.
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
    """One outcome of the read as a change of the pre-read signals: `fixed` values, and for each signal
    in `ranges` the ends of the values it can take (every combination of ends is scored)."""

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
    """Whether the focused read can change the band of `record`, the draft judged before the read by
    `calibrator`: some outcome scores into another band, or decide's text checks moved the band already."""
    before = band_of(calibrator.probability(record["signals"]), calibrator.thresholds)
    if record["band"] != before:
        return True
    return any(bands != {before} for bands in outcome_bands(record, calibrator).values())
