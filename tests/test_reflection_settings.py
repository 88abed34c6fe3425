"""The notes assistant's reflection settings map onto one engine setting each (docs/configuration.md).

Why: its reflector is configured by enableReflection, maxReflectionRounds, enableQueryRewriting, enableHyDE
and retryStrategy. Each has one engine setting of the same meaning, read from one variable (a second name
would let the two disagree), and the run's context takes the setting's value. Its minimum score is no
setting: the answer's calibrator brings it (docs/configuration.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from config.settings import SettingsError, load_settings
from state.context import Context


@pytest.mark.parametrize(
    ("variable", "value", "setting", "expected"),
    [
        ("RAG_SELF_RAG", "false", "self_rag", False),
        ("RAG_HYDE", "false", "hyde", False),
        ("RAG_MAX_ITERATIONS", "2", "max_iterations", 2),
        ("RAG_REWRITE", "none", "rewrite", "none"),
        ("RAG_REWRITE", "multi", "rewrite", "multi"),
        ("RAG_RETRY_STRATEGY", "both", "retry_strategy", "both"),
    ],
)
def test_the_reflection_setting_reaches_the_run_context(
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
