"""The calibrator's fit and report (`rag eval calibrate`: evals/calibration_records.py, calibration_fit.py,
calibration_report.py) and the confidence metrics it reports (evals/metrics.py: AUROC, expected calibration
error, risk-coverage).

Records are synthetic: one signal decides whether the candidate is right, the others are noise, so what a
fit must find is known. Every expected figure of the metrics and of the thresholds is worked out by hand in
the comments beside it, never taken from the code.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from answering.calibrator import Calibrator, Thresholds, calibrator_from_json, load_calibrator
from answering.signals import SIGNAL_NAMES
from evals.calibration_fit import (
    MAX_ISOTONIC_POINTS,
    CostRule,
    choose_thresholds,
    fit_calibrator,
    write_artifact,
)
from evals.calibration_records import CalibrationInputError, features_without, set_name_of
from evals.calibration_report import ablation, evaluate, render_ablation
from evals.metrics import auroc, expected_calibration_error, risk_coverage
from service.cli import app

INFORMATIVE = "agree_draft_focused"
CONSTANT = "planted_instruction"


def _records(count: int, *, informative: bool, seed: int = 7, language: str = "en") -> list[dict[str, Any]]:
    """Records of `rag eval qa`'s shape: every signal noise except INFORMATIVE, which decides the label
    (through a logistic link) when `informative`; CONSTANT is 1 on every record."""
    rng = np.random.default_rng(seed)
    records = []
    for index in range(count):
        signals = {name: float(rng.normal()) for name in SIGNAL_NAMES}
        signals[CONSTANT] = 1.0
        chance = 1 / (1 + math.exp(-3 * signals[INFORMATIVE])) if informative else 0.5
        right = float(rng.random() < chance)
        records.append(
            {
                "qid": f"{language}{index}",
                "question": f"question {index}?",
                "language": language,
                "answers": ["gold"],
                "answerable": True,
                "signals": signals,
                "candidate_short_answer": "gold" if right else "other",
                "candidate_right": right,
            }
        )
    return records


# --------------------------------------------------------------------------------------------------------
# Metrics


def test_auroc_counts_pairs_and_averages_ties() -> None:
    # Positives 0.9, 0.8, 0.4; negatives 0.7, 0.4, 0.1: 9 pairs. 0.9 beats all three (3); 0.8 beats all
    # three (3); 0.4 loses to 0.7, ties 0.4 (0.5), beats 0.1 (1): (3 + 3 + 1.5) / 9.
    assert auroc([0.9, 0.7, 0.8, 0.4, 0.4, 0.1], [1, 0, 1, 0, 1, 0]) == pytest.approx(7.5 / 9)
    assert auroc([0.1, 0.2, 0.3], [1, 1, 0]) == 0.0  # every positive below the negative
    assert auroc([0.5, 0.5], [1, 0]) == 0.5
    assert auroc([0.1, 0.9], [1, 1]) is None  # one class: undefined
    with pytest.raises(ValueError):
        auroc([0.1], [1, 0])


def test_expected_calibration_error_by_hand() -> None:
    # Bin [0, 0.1): p 0.05, right 0 -> |0.05 - 0| = 0.05, weight 1/4. Bin [0.1, 0.2): mean p 0.15, share
    # right 0.5 -> 0.35, weight 2/4. Bin [0.9, 1]: 1.0 (the last bin holds 1.0), right 1 -> 0, weight 1/4.
    # 0.05 / 4 + 0.35 / 2 + 0 = 0.1875.
    assert expected_calibration_error([0.05, 0.15, 0.15, 1.0], [0, 1, 0, 1]) == pytest.approx(0.1875)
    assert expected_calibration_error([0.5, 0.5], [1, 0]) == 0.0  # says 0.5, right half the time
    assert expected_calibration_error([0.95], [0]) == pytest.approx(0.95)
    assert expected_calibration_error([], []) is None


def test_risk_coverage_enters_ties_together() -> None:
    # 0.9 (right) alone: coverage 1/4, accuracy 1; the two 0.8 (one right) enter together: 3/4 shown,
    # 2 right -> 2/3; then 0.1 (wrong): 4/4 shown, 2 right -> 1/2.
    points = risk_coverage([0.8, 0.9, 0.1, 0.8], [0, 1, 0, 1])
    assert points == [(0.25, 1.0), (0.75, pytest.approx(2 / 3)), (1.0, 0.5)]
    assert risk_coverage([], []) == []


# --------------------------------------------------------------------------------------------------------
# Thresholds


def test_thresholds_minimise_the_stated_cost() -> None:
    # a 0.9 right, b 0.7 wrong, c 0.5 right, d 0.2 wrong; bands follow the probability order.
    # The rule with tentative 0.5 wrong / 0.25 right: a confident (0); b confident costs 2, tentative 0.5,
    # not found 0 but then c (right) is not found too (1): b and c tentative (0.5 + 0.25) and d not found
    # (0) is cheapest, 0.75 in all
    # (all tentative 1.5; b confident 2; b, c, d not found 1). Confident must hold a and not b:
    # (0.70, 0.90]; the floor must keep c and drop d: (0.20, 0.50]. Ties: the highest confident, 0.90,
    # then the lowest floor, 0.21. Mean cost 0.75 / 4.
    probabilities, labels = [0.9, 0.7, 0.5, 0.2], [1, 0, 1, 0]
    dear_tentative = CostRule(tentative_wrong=0.5, tentative_right=0.25)
    thresholds, cost = choose_thresholds(probabilities, labels, dear_tentative)
    assert thresholds == Thresholds(confident=0.9, floor=0.21)
    assert cost == pytest.approx(0.75 / 4)
    # The default rule (a tentative answer costs 0.1 either way): a confident (0); b, c and d tentative
    # (0.3) beats d not found (b, c tentative 0.2, d not found 0: cheaper still, 0.2). Confident in
    # (0.7, 0.9] -> 0.90, the floor keeps c and drops d: (0.2, 0.5] -> 0.21; mean cost 0.2 / 4.
    thresholds, cost = choose_thresholds(probabilities, labels, CostRule())
    assert thresholds == Thresholds(confident=0.9, floor=0.21)
    assert cost == pytest.approx(0.2 / 4)
    # A wrong confident answer costing 0.1: a, b, c confident (0.1) and d not found (0) beats any tentative
    # band (b tentative alone costs 0.5). Confident in (0.2, 0.5] -> 0.50; the floor below it, above d: 0.21.
    cheap = CostRule(confident_wrong=0.1, tentative_wrong=0.5, tentative_right=0.25)
    thresholds, cost = choose_thresholds(probabilities, labels, cheap)
    assert thresholds == Thresholds(confident=0.5, floor=0.21)
    assert cost == pytest.approx(0.1 / 4)


def test_thresholds_keep_the_floor_below_the_confident_threshold() -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        probabilities = rng.random(40).tolist()
        labels = (rng.random(40) < np.array(probabilities)).astype(float).tolist()
        thresholds, _cost = choose_thresholds(probabilities, labels, CostRule())
        assert 0.0 <= thresholds.floor < thresholds.confident <= 1.0


# --------------------------------------------------------------------------------------------------------
# Fit


def test_fit_finds_the_informative_signal_and_is_monotone_in_it() -> None:
    records = _records(300, informative=True)
    calibrator, report = fit_calibrator(records, name="synthetic", models=["tiny-reader"])
    assert report.oof.auroc is not None and report.oof.auroc > 0.8
    base = {name: 0.0 for name in SIGNAL_NAMES} | {CONSTANT: 1.0}
    probabilities = [calibrator.probability(base | {INFORMATIVE: value}) for value in np.linspace(-3, 3, 25)]
    assert all(later >= earlier for earlier, later in zip(probabilities, probabilities[1:], strict=False))
    assert probabilities[-1] - probabilities[0] > 0.5
    # the constant signal is standardised by its mean with scale 1, not divided by 0
    index = calibrator.features.index(CONSTANT)
    assert calibrator.mean[index] == 1.0 and calibrator.scale[index] == 1.0
    xs, ys = calibrator.isotonic_x, calibrator.isotonic_y
    assert 2 <= len(xs) <= MAX_ISOTONIC_POINTS and len(xs) == len(ys)
    assert all(b > a for a, b in zip(xs, xs[1:], strict=False))
    assert all(b >= a for a, b in zip(ys, ys[1:], strict=False)) and 0 <= ys[0] and ys[-1] <= 1
    assert 0 <= calibrator.thresholds.floor < calibrator.thresholds.confident <= 1
    fit = calibrator.fit
    assert fit["records"] == 300 and fit["positives"] == sum(r["candidate_right"] for r in records)
    assert fit["oof_auroc"] == pytest.approx(report.oof.auroc, abs=1e-4)
    assert fit["cost_rule"]["confident_wrong"] == 2.0 and set(fit["per_set_oof_auroc"]) == {"en"}
    assert calibrator.models == ("tiny-reader",)


def test_fit_on_noise_ranks_at_chance() -> None:
    _calibrator, report = fit_calibrator(_records(300, informative=False), name="noise", models=[])
    assert report.oof.auroc is not None and abs(report.oof.auroc - 0.5) < 0.1


def test_artifact_round_trips_with_the_same_probabilities(tmp_path: Path) -> None:
    records = _records(200, informative=True)
    calibrator, _report = fit_calibrator(records, name="trip", models=["tiny"])
    loaded = calibrator_from_json(json.loads(json.dumps(calibrator.to_json())))
    from_file = load_calibrator(write_artifact(calibrator, tmp_path / "trip.json"))
    for record in records[:50]:
        expected = calibrator.probability(record["signals"])
        assert loaded.probability(record["signals"]) == expected
        assert from_file.probability(record["signals"]) == expected
    assert from_file.thresholds == calibrator.thresholds and from_file.fit == calibrator.fit


def test_excluded_group_leaves_its_signals_out() -> None:
    features = features_without(["log_probability"])
    assert "logprob_mean" not in features and INFORMATIVE in features
    calibrator, _report = fit_calibrator(
        _records(150, informative=True), name="default", models=[], features=features
    )
    assert calibrator.features == features and calibrator.fit["excluded_groups"] == ["log_probability"]
    with pytest.raises(CalibrationInputError, match="unknown signal group"):
        features_without(["no_such_group"])


def test_fit_refuses_one_class_and_records_without_signals() -> None:
    records = _records(50, informative=True)
    with pytest.raises(CalibrationInputError, match="at least 5 of each"):
        fit_calibrator([{**record, "candidate_right": 1.0} for record in records], name="x", models=[])
    broken = [*records[:-1], {key: value for key, value in records[-1].items() if key != "signals"}]
    with pytest.raises(CalibrationInputError, match="no `signals`"):
        fit_calibrator(broken, name="x", models=[])


def test_ablation_ranks_the_group_that_holds_the_informative_signal() -> None:
    groups = {"agreement": (INFORMATIVE, "agree_draft_extractive"), "retrieval": ("top_relevance",)}
    rows = {row["features"]: row for row in ablation(_records(200, informative=True), groups)}
    assert set(rows) == {
        "all signals",
        "without agreement",
        "without retrieval",
        "only agreement",
        "only retrieval",
    }
    assert rows["only agreement"]["oof_auroc"] > 0.8 > rows["without agreement"]["oof_auroc"]
    assert rows["only retrieval"]["oof_auroc"] < 0.65
    table = render_ablation(list(rows.values()))
    assert table.startswith("| signals |") and "| only agreement | 2 |" in table


# --------------------------------------------------------------------------------------------------------
# Evaluation


def _one_signal_calibrator() -> Calibrator:
    """P = sigmoid(INFORMATIVE), no isotonic map; confident from 0.7, not found below 0.3."""
    return Calibrator(
        name="hand",
        models=(),
        features=(INFORMATIVE,),
        mean=(0.0,),
        scale=(1.0,),
        coef=(1.0,),
        intercept=0.0,
        isotonic_x=(),
        isotonic_y=(),
        thresholds=Thresholds(confident=0.7, floor=0.3),
        fit={},
    )


def _hand_record(z: float, right: bool, answerable: bool = True, language: str = "en") -> dict[str, Any]:
    return {
        "qid": f"{z}{right}{answerable}",
        "language": language,
        "answerable": answerable,
        "signals": {INFORMATIVE: z},
        "candidate_right": float(right),
        "band": "not_found",
        "confidence": 0.1,
    }


def test_evaluate_counts_bands_and_shares_by_hand() -> None:
    # sigmoid(2) = 0.88 confident, sigmoid(0) = 0.5 tentative, sigmoid(-2) = 0.12 not found.
    records = [
        _hand_record(2, True),  # confident, right: cost 0
        _hand_record(2, False, answerable=False),  # confident, unanswerable: cost 2
        _hand_record(0, True, language="zh"),  # tentative, right: 0.1
        _hand_record(-2, True),  # not found, candidate right: 1
        _hand_record(-2, False, language="zh"),  # not found, wrong: 0
    ]
    figures = evaluate(_one_signal_calibrator(), records)
    every = figures["all"]
    assert every["n"] == 5
    assert every["bands"] == {
        "confident": {"n": 2, "right": 1, "unanswerable": 1},
        "tentative": {"n": 1, "right": 1, "unanswerable": 0},
        "not_found": {"n": 2, "right": 1, "unanswerable": 0},
    }
    assert every["cost_per_question"] == pytest.approx(3.1 / 5)
    assert every["confident_right_share"] == 0.5
    assert every["not_found_candidate_right_share"] == 0.5
    assert every["unanswerable_confident_share"] == 1.0  # the one unanswerable question
    assert every["right_reaches_user_share"] == 0.5  # answerables 4; right and shown: 2
    # right ones 0.88, 0.5, 0.12 against wrong ones 0.88, 0.12: 0.5 + 1 + 1 + 0 + 0.5 + 0 = 3 of 6 pairs
    assert every["auroc"] == pytest.approx(0.5)
    # the engine's stored bands are reported beside: every record was stored as not found
    assert every["engine"]["bands"]["not_found"]["n"] == 5 and every["engine"]["bands"]["confident"]["n"] == 0
    assert set(figures["by_set"]) == {"en", "zh"} and figures["by_set"]["zh"]["n"] == 2


def test_set_names_come_from_file_names() -> None:
    assert set_name_of(Path("runs/calib-squad-dev-naive.jsonl")) == "squad"
    assert set_name_of(Path("CMRC2018_dev-agentic.jsonl")) == "cmrc2018"
    assert set_name_of(Path("mine.jsonl")) == "mine"


# --------------------------------------------------------------------------------------------------------
# Command line


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def test_cli_fits_writes_the_artifact_and_reports_test(tmp_path: Path) -> None:
    dev = _write(tmp_path / "squad-dev.jsonl", _records(200, informative=True, seed=1))
    test = _write(tmp_path / "squad-test.jsonl", _records(100, informative=True, seed=2))
    out, report_path, plots = tmp_path / "tiny.json", tmp_path / "report.json", tmp_path / "plots"
    arguments = ["eval", "calibrate", "--model", "tiny", "--dev", str(dev), "--test", str(test)]
    arguments += ["--out", str(out), "--json", str(report_path), "--plot", str(plots)]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    calibrator = load_calibrator(out)
    assert calibrator.name == "tiny" and calibrator.models == ("tiny",)
    assert calibrator.fit["files"] == [str(dev)] and calibrator.fit["command"].startswith(("rag", "RAG_"))
    report = json.loads(report_path.read_text())
    assert report["test"]["pooled"]["all"]["n"] == 100 and report["test"]["pooled"]["all"]["auroc"] > 0.8
    assert {path.name for path in plots.iterdir()} == {"risk_coverage_squad.png", "reliability_squad.png"}
    again = CliRunner().invoke(
        app, ["eval", "calibrate", "--model", "tiny", "--report-only", "--test", str(test), "--out", str(out)]
    )
    assert again.exit_code == 0, again.output
    assert "not refit" in again.output and load_calibrator(out).fit == calibrator.fit


@pytest.mark.parametrize(
    ("records", "extra", "message"),
    [
        (None, [], "results file not found"),
        ([{"qid": "q1", "candidate_right": 1.0}], [], "no `signals`"),
        ([{**record, "candidate_right": 0.0} for record in _records(30, informative=True)], [], "at least 5"),
        (_records(30, informative=True), ["--exclude-features", "nonsense"], "unknown signal group"),
        (_records(30, informative=True), ["--model", "../evil"], "calibrator name"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    tmp_path: Path, records: list[dict[str, Any]] | None, extra: list[str], message: str
) -> None:
    dev = tmp_path / "dev.jsonl" if records is None else _write(tmp_path / "dev.jsonl", records)
    arguments = ["eval", "calibrate", "--model", "tiny", "--dev", str(dev), "--out", str(tmp_path / "o.json")]
    result = CliRunner().invoke(app, [*arguments, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o.json").exists()


def test_cli_report_only_needs_results_and_an_artifact(tmp_path: Path) -> None:
    nothing = CliRunner().invoke(app, ["eval", "calibrate", "--model", "tiny", "--report-only"])
    assert nothing.exit_code == 2 and "--test" in nothing.output
    test = _write(tmp_path / "t.jsonl", _records(20, informative=True))
    missing = CliRunner().invoke(
        app,
        [
            "eval",
            "calibrate",
            "--model",
            "tiny",
            "--report-only",
            "--test",
            str(test),
            "--out",
            str(tmp_path / "x.json"),
        ],
    )
    assert missing.exit_code == 2 and "does not exist" in missing.output
