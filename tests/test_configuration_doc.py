"""docs/configuration.md's settings reference is the settings model's (config/docs.py).

Why: the reference is generated (`python -m config.docs`) so that it lists exactly the settings `Settings`
reads; a field added, removed or re-described without regenerating must fail here, naming the command.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config import docs
from config.settings import ENV_PREFIX, Settings


def test_the_generated_reference_is_current() -> None:
    page = docs.CONFIGURATION_PAGE.read_text(encoding="utf-8")
    assert docs.render(page) == page, f"docs/configuration.md is stale: run {docs.COMMAND}"


def test_the_reference_lists_every_setting_once_under_its_module() -> None:
    page = docs.CONFIGURATION_PAGE.read_text(encoding="utf-8")
    generated = page[page.index(docs.BEGIN_MARKER) : page.index(docs.END_MARKER)]
    listed = re.findall(r"^\| `(RAG_[A-Z0-9_]+)` \|", generated, flags=re.M)
    assert sorted(listed) == sorted(f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields)
    section = generated[generated.index("### `config/settings/search.py`") :]
    assert "| `RAG_TOP_K` | `5` |" in section.split("### ", 2)[1]  # top_k lives in search.py, default 5


def test_the_seed_table_and_the_introduction_stay_outside_the_markers() -> None:
    page = docs.CONFIGURATION_PAGE.read_text(encoding="utf-8")
    assert page.index("# Configuration") < page.index(docs.BEGIN_MARKER)
    assert page.index(docs.END_MARKER) < page.index("## The design documents' settings")


def test_a_stale_page_is_reported_naming_the_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text(f"intro\n{docs.BEGIN_MARKER}\n| `RAG_GONE` | 1 | x |\n{docs.END_MARKER}\nseeds\n")
    monkeypatch.setattr(docs, "CONFIGURATION_PAGE", stale)
    assert docs.main(["--check"]) == 1
    assert docs.COMMAND in capsys.readouterr().err
    assert docs.main([]) == 0
    fresh = stale.read_text()
    assert fresh.startswith("intro\n") and fresh.endswith("seeds\n") and "RAG_GONE" not in fresh
    assert docs.main(["--check"]) == 0


def test_a_page_without_markers_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    page.write_text("no markers here\n")
    monkeypatch.setattr(docs, "CONFIGURATION_PAGE", page)
    assert docs.main(["--check"]) == 1
