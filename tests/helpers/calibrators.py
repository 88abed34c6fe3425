"""Calibrators with known numbers, for tests that drive the answer's band (answering.decision).

Tests must not depend on the committed artifacts (answering/calibrators/*.json): they are refit whenever
the readers or the signals change. conftest installs `ALWAYS_CONFIDENT` for every test (answering.calibrator.
use_calibrator), so an answer is shown as written unless a test installs another calibrator with the
`calibrator` fixture: `calibrator(following("reader_declined", inverted=True))`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from answering.calibrator import Calibrator, Thresholds

#: The test bands' thresholds: confident from 0.7, not found below 0.3.
TEST_THRESHOLDS = Thresholds(confident=0.7, floor=0.3)
#: Steepness of `following`'s logistic: a 0/1 signal maps to a probability within 1e-8 of 0/1.
STEEP = 40.0


def constant(probability: float, thresholds: Thresholds = TEST_THRESHOLDS) -> Calibrator:
    """A calibrator that gives every answer `probability` (0 < probability < 1), whatever its signals."""
    return Calibrator(
        name=f"test-constant-{probability:g}",
        models=(),
        features=(),
        mean=(),
        scale=(),
        coef=(),
        intercept=math.log(probability / (1.0 - probability)),
        isotonic_x=(),
        isotonic_y=(),
        thresholds=thresholds,
        fit={"note": "tests"},
    )


def following(signal: str, *, inverted: bool = False, thresholds: Thresholds = TEST_THRESHOLDS) -> Calibrator:
    """A calibrator whose probability follows one signal: about 1 when the signal is 1 and about 0 when it
    is 0 (the reverse when `inverted`), 0.5 at 0.5: a 0/1 signal picks the confident or the not-found band."""
    return Calibrator(
        name=f"test-{'not-' if inverted else ''}{signal}",
        models=(),
        features=(signal,),
        mean=(0.5,),
        scale=(1.0,),
        coef=(-STEEP if inverted else STEEP,),
        intercept=0.0,
        isotonic_x=(),
        isotonic_y=(),
        thresholds=thresholds,
        fit={"note": "tests"},
    )


@dataclass(frozen=True)
class ScriptedCalibrator(Calibrator):
    """Gives its `script` of probabilities in order, one per judged draft (the last then repeats): a Self-RAG
    loop whose first draft is tentative and whose revision is confident, whatever their signals."""

    script: tuple[float, ...] = ()
    judged: list[dict[str, float]] = field(default_factory=list)
    """The signals of each draft judged so far."""

    def probability(self, signals: dict[str, float]) -> float:
        self.judged.append(dict(signals))
        return self.script[min(len(self.judged), len(self.script)) - 1]


def scripted(*probabilities: float, thresholds: Thresholds = TEST_THRESHOLDS) -> ScriptedCalibrator:
    """A calibrator that gives `probabilities` in order (tests/helpers/calibrators.ScriptedCalibrator)."""
    return ScriptedCalibrator(
        name="test-scripted",
        models=(),
        features=(),
        mean=(),
        scale=(),
        coef=(),
        intercept=0.0,
        isotonic_x=(),
        isotonic_y=(),
        thresholds=thresholds,
        fit={"note": "tests"},
        script=probabilities,
    )


#: What every test gets unless it installs another: each judged answer is confident (probability 0.9).
ALWAYS_CONFIDENT = constant(0.9)
#: A calibrator under which the focused read can always change the band (answering.read_gate): a short
#: answer the read replaced is not found, any other confident. For tests of the read itself, which must see
#: it run; a draft the read leaves as it was stays confident.
READ_CAN_CHANGE = following("short_from_focused_read", inverted=True)
