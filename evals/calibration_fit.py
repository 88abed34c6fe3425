"""The fit behind `rag eval calibrate`: a reader's calibrator from development QA records, and its artifact.

Standardised signals -> logistic regression (L2 strength by cross-validated log-loss) -> isotonic map of the
out-of-fold raw scores to P(candidate right); the bands' thresholds minimise a stated cost rule (CostRule).
Everything is scored out-of-fold: a probability scored on the records it was fit on looks better than it is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from answering.calibrator import Calibrator, Thresholds
from answering.signals import SIGNAL_NAMES
from evals.calibration_records import (
    CalibrationInputError,
    FloatArray,
    Record,
    excluded_groups,
    feature_matrix,
    label_array,
    set_of,
)
from evals.metrics import auroc, expected_calibration_error, rounded
from state.answer_record import Band

#: Folds of every cross-validation here; each class of the development records needs at least this many.
FOLDS = 5
#: Seed of the folds and of the solver, so a refit on the same records writes the same artifact.
RANDOM_STATE = 0
#: Inverse L2 strengths tried; the lowest cross-validated log-loss wins (a tie goes to the smaller C).
C_GRID: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
#: Solver iterations (lbfgs's default 100 can stop short when a few signals nearly separate the classes).
MAX_ITERATIONS = 1000
#: Most isotonic breakpoints an artifact keeps: a readable file and a cheap interpolation.
MAX_ISOTONIC_POINTS = 60
#: Step of the threshold grid the cost rule is minimised over.
THRESHOLD_STEP = 0.01
#: Digits of the artifact's numbers; the fitted Calibrator holds them rounded, so file and fit agree.
ARTIFACT_DIGITS = 6
#: FitReport.to_json keys the artifact's `fit` metadata leaves out (the artifact has them at its top level).
FIT_REPORT_ONLY = frozenset({"name", "features", "thresholds"})
#: Two costs closer than this are a tie (the threshold rule then prefers the higher confident threshold).
COST_TIE = 1e-9


@dataclass(frozen=True)
class CostRule:
    """What each outcome costs the user, per question; the thresholds minimise the total.

    A wrong confident answer misleads most; withholding a right answer costs half as much; a tentative answer
    (a cited verbatim sentence marked "not sure") costs little either way (docs/answer-quality.md)."""

    confident_wrong: float = 2.0
    confident_right: float = 0.0
    tentative_wrong: float = 0.1
    tentative_right: float = 0.1
    not_found_right: float = 1.0
    """A right candidate withheld."""
    not_found_wrong: float = 0.0

    def cost(self, band: Band, right: bool) -> float:
        """The cost of one answer in `band` whose candidate was (not) right."""
        if band == "confident":
            return self.confident_right if right else self.confident_wrong
        if band == "tentative":
            return self.tentative_right if right else self.tentative_wrong
        return self.not_found_right if right else self.not_found_wrong


def _check_classes(labels: FloatArray) -> None:
    positives = int(labels.sum())
    negatives = len(labels) - positives
    if min(positives, negatives) < FOLDS:
        raise CalibrationInputError(
            f"{len(labels)} records, {positives} with a right candidate and {negatives} with a wrong one: "
            f"fitting needs at least {FOLDS} of each (one per cross-validation fold)"
        )


@dataclass(frozen=True)
class OutOfFold:
    """Out-of-fold figures of one feature set: every record scored by models that never saw it."""

    c: float
    raw: FloatArray
    probability: FloatArray
    """Raw scores mapped by an isotonic regression fit on the other folds' raw scores."""
    labels: FloatArray
    thresholds: Thresholds
    cost: float
    """Mean cost per record at `thresholds` (CostRule)."""

    @property
    def auroc(self) -> float | None:
        """AUROC of the out-of-fold probabilities."""
        return auroc(self.probability.tolist(), self.labels.tolist())

    @property
    def ece(self) -> float | None:
        """Expected calibration error of the out-of-fold probabilities."""
        return expected_calibration_error(self.probability.tolist(), self.labels.tolist())


@dataclass(frozen=True)
class FitReport:
    """How a fit went: the records and features, the out-of-fold figures, each set's out-of-fold AUROC."""

    name: str
    records: int
    positives: int
    features: tuple[str, ...]
    per_set_oof_auroc: dict[str, float | None]
    oof: OutOfFold

    def to_json(self) -> dict[str, Any]:
        """The report's figures as JSON (the out-of-fold arrays left out)."""
        return {
            "name": self.name,
            "records": self.records,
            "positives": self.positives,
            "features": list(self.features),
            "C": self.oof.c,
            "thresholds": asdict(self.oof.thresholds),
            "oof_auroc": rounded(self.oof.auroc),
            "oof_ece": rounded(self.oof.ece),
            "oof_cost_per_question": rounded(self.oof.cost),
            "per_set_oof_auroc": {name: rounded(value) for name, value in self.per_set_oof_auroc.items()},
        }


def _folds(labels: FloatArray) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    from sklearn.model_selection import StratifiedKFold

    splitter = StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=RANDOM_STATE)
    return list(splitter.split(np.zeros((len(labels), 1)), labels))


def standardisation(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(mean, scale) per column: the population standard deviation, 1 for a constant column."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale > 0, scale, 1.0)


def _fit_logistic(x: FloatArray, y: FloatArray, c: float) -> tuple[FloatArray, FloatArray, Any]:
    """(mean, scale, fitted model) of the logistic regression on standardised `x`."""
    from sklearn.linear_model import LogisticRegression

    mean, scale = standardisation(x)
    model = LogisticRegression(C=c, class_weight=None, random_state=RANDOM_STATE, max_iter=MAX_ITERATIONS)
    model.fit((x - mean) / scale, y)
    return mean, scale, model


def _raw(model: Any, mean: FloatArray, scale: FloatArray, x: FloatArray) -> FloatArray:
    return np.asarray(model.predict_proba((x - mean) / scale)[:, 1], dtype=np.float64)


def choose_c(x: FloatArray, y: FloatArray) -> float:
    """The C of C_GRID with the lowest mean log-loss over FOLDS stratified folds."""
    from sklearn.metrics import log_loss

    folds = _folds(y)
    losses = []
    for c in C_GRID:
        fold_losses = []
        for train, held in folds:
            mean, scale, model = _fit_logistic(x[train], y[train], c)
            fold_losses.append(log_loss(y[held], _raw(model, mean, scale, x[held]), labels=[0.0, 1.0]))
        losses.append(float(np.mean(fold_losses)))
    best = min(losses)
    return next(c for c, loss in zip(C_GRID, losses, strict=True) if loss <= best + COST_TIE)


def isotonic_points(raw: FloatArray, labels: FloatArray) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Rounded monotone breakpoints of the isotonic fit of labels on raw scores (MAX_ISOTONIC_POINTS)."""
    from sklearn.isotonic import IsotonicRegression

    fitted = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0, increasing=True).fit(raw, labels)
    merged: dict[float, list[float]] = {}
    for x, y in zip(fitted.X_thresholds_, fitted.y_thresholds_, strict=True):
        merged.setdefault(round(float(x), ARTIFACT_DIGITS), []).append(float(y))
    xs = sorted(merged)
    ys = [round(sum(merged[x]) / len(merged[x]), ARTIFACT_DIGITS) for x in xs]
    if len(xs) > MAX_ISOTONIC_POINTS:
        keep = sorted({round(index) for index in np.linspace(0, len(xs) - 1, MAX_ISOTONIC_POINTS)})
        xs, ys = [xs[index] for index in keep], [ys[index] for index in keep]
    for index in range(1, len(ys)):  # averaging rounded values must not break monotony
        ys[index] = max(ys[index], ys[index - 1])
    return tuple(xs), tuple(ys)


def _apply_isotonic(points: tuple[tuple[float, ...], tuple[float, ...]], raw: FloatArray) -> FloatArray:
    xs, ys = points
    return np.interp(raw, xs, ys) if xs else raw


def choose_thresholds(
    probabilities: Sequence[float], labels: Sequence[float], cost: CostRule
) -> tuple[Thresholds, float]:
    """(thresholds, mean cost per record): the pair floor < confident on the THRESHOLD_STEP grid of 0-1
    with the lowest total cost of the bands they give these records; a tie goes to the higher confident
    threshold, then to the lower floor."""
    if len(probabilities) != len(labels) or not probabilities:
        raise CalibrationInputError("thresholds need as many labels as probabilities, and at least one")
    steps = round(1 / THRESHOLD_STEP)
    grid = [round(index * THRESHOLD_STEP, 2) for index in range(steps + 1)]
    p = np.asarray(probabilities, dtype=np.float64)
    right = np.asarray(labels, dtype=np.float64) > 0.5
    above = np.array([p >= threshold for threshold in grid], dtype=np.float64)  # grid x records
    confident_cost = above @ np.where(right, cost.confident_right, cost.confident_wrong)
    tentative_cost = above @ np.where(right, cost.tentative_right, cost.tentative_wrong)
    not_found_cost = (1 - above) @ np.where(right, cost.not_found_right, cost.not_found_wrong)
    best: tuple[float, int, int] | None = None
    for high in range(len(grid) - 1, 0, -1):
        for low in range(high):
            total = float(
                confident_cost[high] + tentative_cost[low] - tentative_cost[high] + not_found_cost[low]
            )
            if best is None or total < best[0] - COST_TIE:
                best = (total, high, low)
    assert best is not None  # the grid has at least one pair
    total, high, low = best
    return Thresholds(confident=grid[high], floor=grid[low]), total / len(p)


def cross_validate(records: Sequence[Record], features: Sequence[str], cost: CostRule) -> OutOfFold:
    """Out-of-fold raw scores and calibrated probabilities of `features`, and the thresholds they give."""
    x, y = feature_matrix(records, features), label_array(records)
    _check_classes(y)
    c = choose_c(x, y)
    folds = _folds(y)
    raw = np.zeros(len(y), dtype=np.float64)
    for train, held in folds:
        mean, scale, model = _fit_logistic(x[train], y[train], c)
        raw[held] = _raw(model, mean, scale, x[held])
    probability = np.zeros(len(y), dtype=np.float64)
    for train, held in folds:  # each fold's isotonic map is fit on the other folds' out-of-fold scores
        probability[held] = _apply_isotonic(isotonic_points(raw[train], y[train]), raw[held])
    thresholds, mean_cost = choose_thresholds(probability.tolist(), y.tolist(), cost)
    return OutOfFold(c=c, raw=raw, probability=probability, labels=y, thresholds=thresholds, cost=mean_cost)


def fit_calibrator(
    records: Sequence[Record],
    *,
    name: str,
    models: Sequence[str],
    features: Sequence[str] = SIGNAL_NAMES,
    cost: CostRule | None = None,
    files: Sequence[str] = (),
    command: str = "",
) -> tuple[Calibrator, FitReport]:
    """The calibrator of `records` and the report of the fit; `files` and `command` go into the artifact's
    `fit` metadata, so the committed file says how to reproduce it."""
    cost = cost or CostRule()
    if not features:
        raise CalibrationInputError("no feature left to fit on")
    oof = cross_validate(records, features, cost)
    mean, scale, model = _fit_logistic(feature_matrix(records, features), oof.labels, oof.c)
    sets = [set_of(record) for record in records]
    report = FitReport(
        name=name,
        records=len(records),
        positives=int(oof.labels.sum()),
        features=tuple(features),
        per_set_oof_auroc={
            name_of_set: auroc(
                [float(p) for p, s in zip(oof.probability, sets, strict=True) if s == name_of_set],
                [float(y) for y, s in zip(oof.labels, sets, strict=True) if s == name_of_set],
            )
            for name_of_set in sorted(set(sets))
        },
        oof=oof,
    )
    isotonic_x, isotonic_y = isotonic_points(oof.raw, oof.labels)
    calibrator = Calibrator(
        name=name,
        models=tuple(models),
        features=tuple(features),
        mean=tuple(_significant(value) for value in mean),
        scale=tuple(_significant(value) for value in scale),
        coef=tuple(_significant(value) for value in model.coef_[0]),
        intercept=_significant(model.intercept_[0]),
        isotonic_x=isotonic_x,
        isotonic_y=isotonic_y,
        thresholds=oof.thresholds,
        fit=_fit_metadata(report, cost=cost, files=files, command=command),
    )
    return calibrator, report


def _fit_metadata(report: FitReport, *, cost: CostRule, files: Sequence[str], command: str) -> dict[str, Any]:
    """The artifact's `fit` metadata: what it was fit on, how to reproduce it, and its out-of-fold figures."""
    figures = {key: value for key, value in report.to_json().items() if key not in FIT_REPORT_ONLY}
    return {
        **figures,
        "files": list(files),
        "command": command,
        "date": datetime.now(UTC).date().isoformat(),
        "folds": FOLDS,
        "excluded_groups": excluded_groups(report.features),
        "cost_rule": asdict(cost),
    }


def _significant(value: float) -> float:
    """`value` to ARTIFACT_DIGITS significant digits (a scale of 1e-5 keeps its precision)."""
    return float(f"{float(value):.{ARTIFACT_DIGITS}g}")


def write_artifact(calibrator: Calibrator, path: Path) -> Path:
    """Write the calibrator's artifact (what answering.calibrator.load_calibrator reads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(calibrator.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
