"""The embedded default by rule (benchmarks/model_choice.py): the best mean accuracy over the required
development sets within the p50 budget, every model on the same questions; nothing chosen while a dataset is
missing; and the default in config/settings/ follows the committed report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchmarks.commands import app
from benchmarks.model_choice import (
    MODEL_CHOICE_P50_BUDGET_S,
    REQUIRED_DATASETS,
    ModelChoiceError,
    choose_model,
    model_choice_report,
)
from config.settings import DEFAULT_LOCAL_MODEL
from models.local_catalog import CATALOG
from tests.conftest import REPO_ROOT

COMMITTED_REPORT = REPO_ROOT / "results" / "model_choice.json"
ONE_SET = ("squad2_dev_mixed400",)


def summary(model: str, accuracy: float, p50: float, **changes: Any) -> dict[str, Any]:
    """A QA summary as `rag eval qa --json` writes it, for one catalog model."""
    base: dict[str, Any] = {
        "model": f"{CATALOG[model].file_name} (embedded)",  # type: ignore[index]
        "dataset": "squad2_dev_mixed400",
        "split": "dev",
        "pipeline": "naive",
        "n": 30,
        "limit": 30,
        "skip": 0,
        "errors": 0,
        "accuracy": accuracy,
        "latency_p50_s": p50,
        "latency_p95_s": p50 * 2,
        "machine": "test machine",
    }
    return {**base, **changes}


def test_the_most_accurate_model_within_the_budget_wins() -> None:
    report = model_choice_report(
        [
            summary("qwen2.5-coder-0.5b", 0.50, 6.0),
            summary("qwen2.5-coder-1.5b", 0.60, MODEL_CHOICE_P50_BUDGET_S + 0.1),  # better, too slow
            summary("smollm2-135m", 0.20, 2.0),
        ],
        required=ONE_SET,
    )
    assert report["chosen"] == "qwen2.5-coder-0.5b"
    faster = model_choice_report(
        [summary("qwen2.5-coder-0.5b", 0.50, 6.0), summary("qwen2.5-coder-1.5b", 0.60, 12.0)],
        required=ONE_SET,
    )
    assert faster["chosen"] == "qwen2.5-coder-1.5b"


def test_ties_go_to_the_faster_and_runs_with_errors_or_base_models_are_not_eligible() -> None:
    models = model_choice_report(
        [summary("qwen2.5-coder-0.5b", 0.5, 6.0), summary("qwen2.5-coder-1.5b", 0.5, 12.0)], required=ONE_SET
    )["models"]
    assert choose_model(models, required=ONE_SET) == "qwen2.5-coder-0.5b"
    broken = model_choice_report([summary("qwen2.5-coder-1.5b", 0.9, 3.0, errors=2)], required=ONE_SET)
    assert broken["chosen"] is None
    base = model_choice_report([summary("gemma3-270m", 0.9, 3.0)], required=ONE_SET)  # not instruction-tuned
    assert base["chosen"] is None


def test_accuracy_is_the_mean_over_datasets_and_a_missing_dataset_chooses_nothing() -> None:
    def runs(model: str, squad: float, cmrc: float, p50: float = 6.0) -> list[dict[str, Any]]:
        return [
            summary(model, squad, p50),
            summary(model, cmrc, p50, dataset="cmrc2018_dev"),
        ]

    both = ("squad2_dev_mixed400", "cmrc2018_dev")
    # smollm2 wins SQuAD but cannot read Chinese: the 0.5B's mean is higher
    report = model_choice_report(
        runs("smollm2-135m", 0.60, 0.05) + runs("qwen2.5-coder-0.5b", 0.50, 0.45), required=both
    )
    assert report["chosen"] == "qwen2.5-coder-0.5b" and report["missing"] == {}
    partial = model_choice_report(
        runs("qwen2.5-coder-0.5b", 0.50, 0.45) + [summary("smollm2-135m", 0.60, 3.0)], required=both
    )
    assert partial["chosen"] is None and partial["missing"] == {"smollm2-135m": ["cmrc2018_dev"]}


def test_the_default_model_follows_the_committed_report() -> None:
    """config.settings.DEFAULT_LOCAL_MODEL is the rule's choice in results/model_choice.json; while
    the report misses a required dataset it chooses nothing, and the default stays what it was."""
    report = json.loads(COMMITTED_REPORT.read_text(encoding="utf-8"))
    assert report["required_datasets"] == list(REQUIRED_DATASETS)
    if report["chosen"] is None:
        assert report["missing"], "no choice although nothing is missing"
        assert DEFAULT_LOCAL_MODEL == "qwen2.5-coder-0.5b"
    else:
        assert DEFAULT_LOCAL_MODEL == report["chosen"]


@pytest.mark.parametrize(
    ("change", "message"),
    [({"split": "test"}, "development questions only"), ({"n": 20}, "differ in n"), ({}, "measured twice")],
)
def test_runs_that_cannot_be_compared_are_refused(change: dict[str, Any], message: str) -> None:
    other = "qwen2.5-coder-1.5b" if change else "qwen2.5-coder-0.5b"
    with pytest.raises(ModelChoiceError, match=message):
        model_choice_report([summary("qwen2.5-coder-0.5b", 0.5, 6.0), summary(other, 0.6, 9.0, **change)])


def test_the_command_writes_the_report_and_refuses_bad_input(tmp_path: Path) -> None:
    files = []
    for model, accuracy, p50 in (("qwen2.5-coder-0.5b", 0.5, 6.0), ("qwen2.5-coder-1.5b", 0.6, 12.0)):
        path = tmp_path / f"{model}.json"
        path.write_text(json.dumps(summary(model, accuracy, p50)), encoding="utf-8")
        files.append(str(path))
    out = tmp_path / "choice.json"
    result = CliRunner().invoke(app, ["choose-model", *files, "--json", str(out)])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["chosen"] is None and set(written["missing"]) == {
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-1.5b",
    }
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    bad = CliRunner().invoke(app, ["choose-model", str(tmp_path / "bad.json")])
    assert bad.exit_code == 2 and "cannot read the QA summary" in bad.stderr and "Traceback" not in bad.output
