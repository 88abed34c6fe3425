"""The embedded default by rule (evals/model_choice.py): the most accurate model within the p50 budget, on
the same development questions; and the default in config/settings.py is the committed report's choice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evals.model_choice import (
    MODEL_CHOICE_P50_BUDGET_S,
    ModelChoiceError,
    choose_model,
    model_choice_report,
)
from models.local_catalog import CATALOG
from service.cli import app


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
        ]
    )
    assert report["chosen"] == "qwen2.5-coder-0.5b"
    faster = model_choice_report(
        [summary("qwen2.5-coder-0.5b", 0.50, 6.0), summary("qwen2.5-coder-1.5b", 0.60, 12.0)]
    )
    assert faster["chosen"] == "qwen2.5-coder-1.5b"


def test_ties_go_to_the_faster_and_runs_with_errors_or_base_models_are_not_eligible() -> None:
    rows = model_choice_report(
        [summary("qwen2.5-coder-0.5b", 0.5, 6.0), summary("qwen2.5-coder-1.5b", 0.5, 12.0)]
    )["models"]
    assert choose_model(rows) == "qwen2.5-coder-0.5b"
    broken = model_choice_report([summary("qwen2.5-coder-1.5b", 0.9, 3.0, errors=2)])
    assert broken["chosen"] is None
    base = model_choice_report([summary("gemma3-270m", 0.9, 3.0)])  # not instruction-tuned
    assert base["chosen"] is None


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
    result = CliRunner().invoke(app, ["eval", "choose-model", *files, "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text(encoding="utf-8"))["chosen"] == "qwen2.5-coder-1.5b"
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    bad = CliRunner().invoke(app, ["eval", "choose-model", str(tmp_path / "bad.json")])
    assert bad.exit_code == 2 and "cannot read the QA summary" in bad.stderr and "Traceback" not in bad.output
