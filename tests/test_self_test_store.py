"""Model self-test verdicts stored in the data directory: a new process reuses a verdict instead of calling
the model, a changed model (or test version) is tested again, and `rag doctor` lists and clears them.

A "new process" is the factory's process caches cleared (`clear_model_cache`) with a new store object over
the same directory: only the file can carry the verdict across.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from config.settings import Settings, load_settings
from models import factory, self_test_store
from models.self_test_store import STORE_FILE_NAME, SelfTestStore
from service.cli import app
from tests.fakes import TaskChatModel
from tests.helpers import model_caches

#: The right answer to the self-test's question, written out here (not taken from the code under test).
RIGHT = json.dumps({"passage_1": False, "passage_2": True, "passage_3": False, "year": 1931})
GARBAGE = "%%% ### %%%"


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    model_caches.clear_model_cache()
    yield
    model_caches.clear_model_cache()


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[TaskChatModel]:
    """Every model the factory builds is this fake (answering the self-test right); it records its calls."""
    model = TaskChatModel(fallback=RIGHT)
    monkeypatch.setattr(factory, "_build", lambda spec: model)
    monkeypatch.setattr(factory, "chat_model", lambda *_args, **_kwargs: model)
    return [model]


def endpoint_settings(data_dir: Path, **overrides: Any) -> Settings:
    overrides.setdefault("llm_model", "small-served-model")
    overrides.setdefault("llm_base_url", "http://models.invalid/v1")
    return load_settings(data_dir=data_dir, llm_provider="openai", **overrides)


def self_test_calls(model: TaskChatModel) -> int:
    return model.tasks().count("unknown")


def new_process() -> None:
    model_caches.clear_model_cache()


def test_a_second_process_reuses_the_stored_verdict(tmp_path: Path, served: list[TaskChatModel]) -> None:
    settings = endpoint_settings(tmp_path / "rag")
    assert factory.model_strength(settings, "generate") == "strong"
    assert self_test_calls(served[0]) == 1
    new_process()
    assert factory.model_strength(settings, "generate") == "strong"
    assert factory.model_strength(settings, "grade") == "strong"
    assert self_test_calls(served[0]) == 1  # no second self-test
    stored = SelfTestStore(tmp_path / "rag").verdicts()
    assert [(v.label, v.strength, v.reason) for v in stored] == [
        ("openai:small-served-model@http://models.invalid/v1", "strong", "passed")
    ]


def test_a_weak_verdict_is_stored_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = TaskChatModel(fallback=GARBAGE)
    monkeypatch.setattr(factory, "_build", lambda spec: model)
    settings = endpoint_settings(tmp_path / "rag")
    assert factory.model_strength(settings, "generate") == "weak"
    calls = len(model.calls)
    new_process()
    assert factory.model_strength(settings, "generate") == "weak"
    assert len(model.calls) == calls


def test_another_model_or_endpoint_is_tested_again(tmp_path: Path, served: list[TaskChatModel]) -> None:
    factory.model_strength(endpoint_settings(tmp_path / "rag"), "generate")
    new_process()
    factory.model_strength(endpoint_settings(tmp_path / "rag", llm_model="bigger-model"), "generate")
    new_process()
    factory.model_strength(
        endpoint_settings(tmp_path / "rag", llm_base_url="http://other.invalid/v1"), "generate"
    )
    assert self_test_calls(served[0]) == 3
    assert len(SelfTestStore(tmp_path / "rag").verdicts()) == 3


def test_a_new_test_version_runs_the_test_again(
    tmp_path: Path, served: list[TaskChatModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = endpoint_settings(tmp_path / "rag")
    factory.model_strength(settings, "generate")
    new_process()
    monkeypatch.setattr(self_test_store, "SELF_TEST_VERSION", self_test_store.SELF_TEST_VERSION + 1)
    factory.model_strength(settings, "generate")
    assert self_test_calls(served[0]) == 2


def test_another_data_directory_has_its_own_verdicts(tmp_path: Path, served: list[TaskChatModel]) -> None:
    factory.model_strength(endpoint_settings(tmp_path / "one"), "generate")
    new_process()
    factory.model_strength(endpoint_settings(tmp_path / "two"), "generate")
    assert self_test_calls(served[0]) == 2


def test_the_embedded_model_is_keyed_by_its_weights_file(
    tmp_path: Path, served: list[TaskChatModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"first weights")
    monkeypatch.setattr(factory, "find_model_file", lambda name: weights)
    settings = load_settings(data_dir=tmp_path / "rag", local_model="smollm2-135m")
    factory.model_strength(settings, "generate")
    new_process()
    factory.model_strength(settings, "generate")
    assert self_test_calls(served[0]) == 1
    assert [v.label for v in SelfTestStore(tmp_path / "rag").verdicts()] == ["local:smollm2-135m"]

    weights.write_bytes(b"replaced weights, another size")
    os.utime(weights, ns=(1_000_000_000, 1_000_000_000))
    new_process()
    factory.model_strength(settings, "generate")
    assert self_test_calls(served[0]) == 2


def test_a_damaged_file_means_testing_again(tmp_path: Path, served: list[TaskChatModel]) -> None:
    settings = endpoint_settings(tmp_path / "rag")
    (tmp_path / "rag").mkdir()
    (tmp_path / "rag" / STORE_FILE_NAME).write_text("{not json", encoding="utf-8")
    assert factory.model_strength(settings, "generate") == "strong"
    assert self_test_calls(served[0]) == 1
    assert len(SelfTestStore(tmp_path / "rag").verdicts()) == 1  # rewritten whole


def test_doctor_lists_and_clears_the_stored_verdicts(
    tmp_path: Path, served: list[TaskChatModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "rag"
    factory.model_strength(endpoint_settings(data_dir), "generate")
    monkeypatch.setenv("RAG_DATA_DIR", str(data_dir))

    listed = CliRunner().invoke(app, ["doctor", "--json"])
    assert listed.exit_code == 0, listed.output
    report = json.loads(listed.stdout)
    assert [(v["model"], v["strength"]) for v in report["self_tests"]] == [
        ("openai:small-served-model@http://models.invalid/v1", "strong")
    ]
    text = CliRunner().invoke(app, ["doctor"])
    assert "self-test openai:small-served-model@http://models.invalid/v1: strong" in text.stdout

    cleared = CliRunner().invoke(app, ["doctor", "--json", "--clear-self-tests"])
    assert cleared.exit_code == 0, cleared.output
    report = json.loads(cleared.stdout)
    assert report["cleared_self_tests"] == 1 and report["self_tests"] == []
    new_process()
    factory.model_strength(endpoint_settings(data_dir), "generate")
    assert self_test_calls(served[0]) == 2  # cleared: tested again
