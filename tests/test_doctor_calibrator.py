"""`rag doctor`'s calibrator line (service.doctor.calibrator_status): which calibrator judges the configured
model's answers, and a warning naming `rag eval calibrate` when it is the default one rather than the
model's own.

The conftest installs a test calibrator for every test (answering.calibrator.use_calibrator); these tests
take it away and read artifacts of their own from a temporary folder, as a deployment reads the committed
ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from answering import calibrator as calibrator_module
from answering.calibrator import Calibrator, committed_calibrators, use_calibrator
from config.settings import Settings
from service.cli import app
from service.doctor import calibrator_status
from tests.helpers.calibrators import constant

#: The model the default settings answer with (the embedded default reader).
EMBEDDED_MODEL = "qwen2.5-coder-0.5b"
#: An endpoint model no artifact names.
ENDPOINT = {"llm_provider": "openai", "llm_model": "gpt-4o-mini", "llm_base_url": "http://models.invalid/v1"}


@pytest.fixture
def artifacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An artifact folder of this test's own: a default calibrator and one fit for EMBEDDED_MODEL."""
    folder = tmp_path / "calibrators"
    folder.mkdir()
    own: Calibrator = replace(constant(0.6), name="embedded-reader", models=(EMBEDDED_MODEL,))
    default: Calibrator = replace(constant(0.5), name="default")
    for calibrator in (own, default):
        (folder / f"{calibrator.name}.json").write_text(json.dumps(calibrator.to_json()), encoding="utf-8")
    monkeypatch.setattr(calibrator_module, "CALIBRATOR_DIR", folder)
    committed_calibrators.cache_clear()
    with use_calibrator(None):
        yield folder
    committed_calibrators.cache_clear()


@pytest.mark.usefixtures("artifacts")
def test_a_model_with_its_own_calibrator_gets_no_warning(make_settings: Callable[..., Settings]) -> None:
    status = calibrator_status(make_settings())
    assert status == {
        "model": f"local:{EMBEDDED_MODEL}@",
        "calibrator": "embedded-reader",
        "own": True,
        "warning": "",
    }


@pytest.mark.usefixtures("artifacts")
def test_a_model_without_its_own_calibrator_is_warned_to_fit_one(
    make_settings: Callable[..., Settings],
) -> None:
    status = calibrator_status(make_settings(**ENDPOINT))
    assert status["model"] == "openai:gpt-4o-mini@http://models.invalid/v1"
    assert status["calibrator"] == "default" and status["own"] is False
    assert "rag eval calibrate" in str(status["warning"])


@pytest.mark.usefixtures("artifacts")
def test_the_doctor_command_prints_the_calibrator_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    own = CliRunner().invoke(app, ["doctor"])
    assert own.exit_code == 0, own.output
    line = next(text for text in own.stdout.splitlines() if text.startswith("calibrator"))
    assert line == f"calibrator embedded-reader for local:{EMBEDDED_MODEL}@"

    for name, value in ENDPOINT.items():
        monkeypatch.setenv(f"RAG_{name.upper()}", value)
    endpoint = CliRunner().invoke(app, ["doctor", "--json"])
    assert endpoint.exit_code == 0, endpoint.output
    report = json.loads(endpoint.stdout)["calibrator"]
    assert report["calibrator"] == "default" and "rag eval calibrate" in report["warning"]
    warned = CliRunner().invoke(app, ["doctor"])
    assert "warning" in warned.stdout and "rag eval calibrate" in " ".join(warned.stdout.split())
