"""Seed 003's reflection settings reach the engine's one knob of each meaning (issue 21 §5).

Why: the notes assistant configures its reflector with RAG_ENABLE_REFLECTION, RAG_MAX_REFLECTION_ROUNDS,
RAG_ENABLE_QUERY_REWRITING, RAG_ENABLE_HYDE, RAG_REFLECTION_MIN_SCORE (1-10) and RAG_RETRY_STRATEGY. The
engine already had the first five under other names; a second setting of the same meaning would let the two
disagree, so the seed's names are read into the existing settings (and the Context fields behind them).
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
        ("RAG_REFLECTION_MIN_SCORE", "8", "quality_threshold", 0.8),
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
    assert settings.quality_threshold == 0.7  # the seed's "under 7 needs improvement"
    assert settings.retry_strategy == "rewrite"  # what a retry did before the setting existed
    assert load_settings(self_rag=False, max_iterations=4).max_iterations == 4


def test_a_min_score_that_disagrees_with_the_threshold_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_REFLECTION_MIN_SCORE", "8")
    monkeypatch.setenv("RAG_QUALITY_THRESHOLD", "0.5")
    disagree = "RAG_REFLECTION_MIN_SCORE=8 .*RAG_QUALITY_THRESHOLD=0.5"
    with pytest.raises(SettingsError, match=disagree) as error:
        load_settings()
    assert "\n" not in str(error.value)
    monkeypatch.setenv("RAG_QUALITY_THRESHOLD", "0.8")  # the same threshold under both names is fine
    assert load_settings().quality_threshold == 0.8


@pytest.mark.parametrize("score", ["0", "11", "seven"])
def test_a_min_score_off_the_1_to_10_scale_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, score: str
) -> None:
    monkeypatch.setenv("RAG_REFLECTION_MIN_SCORE", score)
    with pytest.raises(SettingsError, match="RAG_REFLECTION_MIN_SCORE"):
        load_settings()


def test_an_unknown_retry_strategy_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="retry_strategy='deeper': choose one of expand, rewrite, both"):
        Context(retry_strategy="deeper")
    monkeypatch.setenv("RAG_RETRY_STRATEGY", "deeper")
    with pytest.raises(SettingsError, match="RAG_RETRY_STRATEGY"):
        load_settings()
