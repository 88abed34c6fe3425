"""Seed 003's reflection settings reach the engine's one knob of each meaning (issue 21 §5).

Why: the notes assistant configures its reflector with RAG_ENABLE_REFLECTION, RAG_MAX_REFLECTION_ROUNDS,
RAG_ENABLE_QUERY_REWRITING, RAG_ENABLE_HYDE and RAG_RETRY_STRATEGY. The engine already had the first four
under other names; a second setting of the same meaning would let the two disagree, so the seed's names are
read into the existing settings (and the Context fields behind them). Its minimum score is no setting: the
answer's calibrator brings it (docs/configuration.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from config.settings import SettingsError, load_settings
from state.context import Context


@pytest.mark.parametrize(
    ("variable", "value", "setting", "expected"),
    [
        ("RAG_ENABLE_REFLECTION", "false", "self_rag", False),
        ("RAG_ENABLE_HYDE", "false", "hyde", False),
        ("RAG_MAX_REFLECTION_ROUNDS", "2", "max_iterations", 2),
        ("RAG_ENABLE_QUERY_REWRITING", "false", "rewrite", "none"),
        ("RAG_ENABLE_QUERY_REWRITING", "true", "rewrite", "auto"),
        ("RAG_RETRY_STRATEGY", "both", "retry_strategy", "both"),
    ],
)
def test_a_seed_003_name_reaches_the_setting_and_the_run_context(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, setting: str, expected: Any
) -> None:
    monkeypatch.setenv(variable, value)
    assert getattr(load_settings(), setting) == expected
    assert getattr(Context(), setting) == expected


def test_the_engine_names_still_work_and_the_defaults_are_the_seeds() -> None:
    settings = load_settings()
    assert (settings.self_rag, settings.hyde, settings.rewrite) == (True, True, "auto")
    assert settings.retry_strategy == "rewrite"  # what a retry did before the setting existed
    assert load_settings(self_rag=False, max_iterations=4).max_iterations == 4


def test_an_unknown_retry_strategy_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="retry_strategy='deeper': choose one of expand, rewrite, both"):
        Context(retry_strategy="deeper")
    monkeypatch.setenv("RAG_RETRY_STRATEGY", "deeper")
    with pytest.raises(SettingsError, match="RAG_RETRY_STRATEGY"):
        load_settings()
