"""The calibrator: a small committed model that maps an answer's signals to P(its short answer is right).

No single signal separates right short answers from wrong ones; a logistic regression over several cheap
signals, fit by `rag eval calibrate`, does better. Applying it needs no numpy. Artifacts live in
answering/calibrators/<name>.json, one per embedded reader with its band thresholds; other models get the
default artifact (`rag doctor` warns about it).
"""

from __future__ import annotations

import bisect
import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

#: Where the committed calibrators are.
CALIBRATOR_DIR = Path(__file__).parent / "calibrators"
#: The artifact a model without its own calibrator gets.
DEFAULT_CALIBRATOR = "default"
#: Version of the artifact format this module reads.
ARTIFACT_VERSION = 1


@dataclass(frozen=True)
class Thresholds:
    """Where the bands start: confident at `confident` and above, not found below `floor`."""

    confident: float
    floor: float


@dataclass(frozen=True)
class Calibrator:
    """A fitted logistic regression over named signals, with an isotonic map of its output."""

    name: str
    models: tuple[str, ...]
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    isotonic_x: tuple[float, ...]
    isotonic_y: tuple[float, ...]
    thresholds: Thresholds
    fit: dict[str, Any]  # how it was fit (records, command, out-of-fold figures), shown by `rag doctor`

    def raw_score(self, signals: dict[str, float]) -> float:
        """The logistic regression's probability before the isotonic map."""
        z = self.intercept + sum(
            (float(signals.get(name, 0.0)) - mean) / scale * coef
            for name, mean, scale, coef in zip(self.features, self.mean, self.scale, self.coef, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def probability(self, signals: dict[str, float]) -> float:
        """Calibrated P(the short answer holds a right answer), 0-1."""
        raw = self.raw_score(signals)
        if not self.isotonic_x:
            return raw
        return interpolate(raw, self.isotonic_x, self.isotonic_y)

    def to_json(self) -> dict[str, Any]:
        """The artifact's JSON form (what `load_calibrator` reads)."""
        return {
            "version": ARTIFACT_VERSION,
            "name": self.name,
            "models": list(self.models),
            "features": list(self.features),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "isotonic": {"x": list(self.isotonic_x), "y": list(self.isotonic_y)},
            "thresholds": {"confident": self.thresholds.confident, "floor": self.thresholds.floor},
            "fit": self.fit,
        }


def interpolate(x: float, xs: tuple[float, ...], ys: tuple[float, ...]) -> float:
    """Piecewise-linear interpolation through ascending (xs, ys), clipped at both ends (numpy.interp)."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    high = bisect.bisect_right(xs, x)
    low = high - 1
    span = xs[high] - xs[low]
    share = (x - xs[low]) / span if span > 0 else 0.0
    return ys[low] + share * (ys[high] - ys[low])


class CalibratorError(ValueError):
    """A calibrator artifact that cannot be read (wrong version, missing or mismatched fields)."""


def calibrator_from_json(data: dict[str, Any]) -> Calibrator:
    """A Calibrator from its artifact's JSON form; CalibratorError naming what is wrong."""
    if data.get("version") != ARTIFACT_VERSION:
        raise CalibratorError(f"calibrator version {data.get('version')!r}, expected {ARTIFACT_VERSION}")
    try:
        features = tuple(str(name) for name in data["features"])
        vectors = [tuple(float(value) for value in data[key]) for key in ("mean", "scale", "coef")]
        isotonic = data.get("isotonic") or {}
        calibrator = Calibrator(
            name=str(data["name"]),
            models=tuple(str(model) for model in data.get("models") or ()),
            features=features,
            mean=vectors[0],
            scale=tuple(value if value > 0 else 1.0 for value in vectors[1]),
            coef=vectors[2],
            intercept=float(data["intercept"]),
            isotonic_x=tuple(float(value) for value in isotonic.get("x") or ()),
            isotonic_y=tuple(float(value) for value in isotonic.get("y") or ()),
            thresholds=Thresholds(float(data["thresholds"]["confident"]), float(data["thresholds"]["floor"])),
            fit=dict(data.get("fit") or {}),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibratorError(f"calibrator {data.get('name')!r} is malformed: {exc}") from exc
    if not all(len(vector) == len(features) for vector in vectors):
        raise CalibratorError(f"calibrator {calibrator.name!r}: features and coefficients differ in length")
    if len(calibrator.isotonic_x) != len(calibrator.isotonic_y):
        raise CalibratorError(f"calibrator {calibrator.name!r}: isotonic x and y differ in length")
    return calibrator


def load_calibrator(path: Path) -> Calibrator:
    """Read one artifact file."""
    return calibrator_from_json(json.loads(path.read_text(encoding="utf-8")))


@cache
def committed_calibrators() -> tuple[Calibrator, ...]:
    """Every artifact in CALIBRATOR_DIR, the default last."""
    found = [load_calibrator(path) for path in sorted(CALIBRATOR_DIR.glob("*.json"))]
    return tuple(sorted(found, key=lambda calibrator: calibrator.name == DEFAULT_CALIBRATOR))


_installed: Calibrator | None = None
_installed_lock = threading.Lock()


@contextmanager
def use_calibrator(calibrator: Calibrator | None) -> Iterator[Calibrator | None]:
    """Judge every answer of the process with `calibrator` for a block (None: the committed artifacts);
    process-wide like nodes.resources.use_resources, so the graph's worker threads see it too."""
    global _installed
    with _installed_lock:
        previous, _installed = _installed, calibrator
    try:
        yield calibrator
    finally:
        with _installed_lock:
            _installed = previous


def calibrator_for(model_identity: str) -> tuple[Calibrator, bool]:
    """(calibrator, whether it names the model): the installed one, else the first naming it, else default."""
    lowered = model_identity.lower()

    def names_model(calibrator: Calibrator) -> bool:
        return any(model.lower() in lowered for model in calibrator.models)

    installed = _installed
    if installed is not None:
        return installed, names_model(installed)
    calibrators = committed_calibrators()
    for calibrator in calibrators:
        if names_model(calibrator):
            return calibrator, True
    default = next((c for c in calibrators if c.name == DEFAULT_CALIBRATOR), None)
    if default is None:
        raise CalibratorError(f"no default calibrator in {CALIBRATOR_DIR}")
    return default, False
