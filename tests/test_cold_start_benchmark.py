"""`python -m benchmarks cold-start` refuses a folder that is not a checkout, or a missing corpus, before
starting anything (the measurement itself runs real models: run it by hand, results/cold_start.json)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from benchmarks.commands import app


def text_of(output: str) -> str:
    """The error box's words on one line (rich wraps them inside a frame)."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", output).split())


def test_a_folder_that_is_not_a_checkout_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["cold-start", "--repo", str(tmp_path)])
    assert result.exit_code == 2
    assert "--repo" in text_of(result.output) and "is not a checkout" in text_of(result.output)


def test_a_missing_corpus_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["cold-start", "--corpus", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "--corpus" in text_of(result.output) and "is not a folder" in text_of(result.output)
