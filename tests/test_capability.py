"""Model strength by measurement: `RAG_LLM_STRENGTH=auto` runs a one-call JSON self-test per model.

Why: an OpenAI-compatible endpoint used to count as strong because it is remote, so a small served model got
the LLM analyser (which may skip retrieval) and LLM graders it cannot do. Fakes stand in for served models:
one answers the self-test right, the others return garbage, a wrong verdict or are down.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from config.settings import Settings, load_settings
from models import capability, factory
from models.capability import run_self_test
from models.errors import ModelUnavailableError
from nodes.analyze import analyze
from nodes.resources import Resources, use_resources
from tests.conftest import runtime
from tests.fakes import TaskChatModel
from tests.helpers import model_caches
from tests.helpers.api_server import free_port as closed_port

logger = logging.getLogger(__name__)

#: The right answer to the self-test's question, written out here (not taken from the code under test).
RIGHT = json.dumps({"passage_1": False, "passage_2": True, "passage_3": False, "year": 1931})
#: What a small model says: every passage answers (relevance judged by shared words).
ALL_TRUE = json.dumps({"passage_1": True, "passage_2": True, "passage_3": True, "year": 1931})
GARBAGE = "%%% ### %%%"
#: A question the heuristic analyser sends to retrieval and a strong model's analysis would not.
QUESTION = "What is the Vellmar Bridge?"
SKIP_RETRIEVAL = json.dumps(
    {"query_type": "SIMPLE_FACT", "complexity": 1, "needs_retrieval": False, "wants_details": False}
)


def served(reply: str) -> TaskChatModel:
    """A served model that answers the self-test (an "unknown" task for the fake) with `reply`, and the
    analysis prompt with an analysis that skips retrieval."""
    return TaskChatModel(fallback=reply, replies={"analyze": SKIP_RETRIEVAL})


def openai_settings(tmp_path: Path, **overrides: Any) -> Settings:
    return load_settings(
        data_dir=tmp_path / "rag",
        llm_provider="openai",
        llm_base_url="http://models.invalid/v1",
        llm_model="small-served-model",
        **overrides,
    )


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    model_caches.clear_model_cache()
    yield
    model_caches.clear_model_cache()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> dict[str, TaskChatModel]:
    """Route the factory's OpenAI clients to a fake: set `endpoint["model"]` to the model it serves."""
    serving: dict[str, TaskChatModel] = {}
    monkeypatch.setattr(factory, "_build", lambda spec: serving["model"])
    return serving


@pytest.mark.parametrize(
    ("reply", "strength", "reason"),
    [
        (RIGHT, "strong", "passed"),
        ("Sure! ```json\n" + RIGHT + "\n```", "strong", "passed"),
        (ALL_TRUE, "weak", "wrong answer"),
        ('{"passage_2": true, "year": 1931}', "weak", "incomplete JSON"),
        (GARBAGE, "weak", "no usable JSON"),
    ],
)
def test_self_test_verdicts(reply: str, strength: str, reason: str) -> None:
    test = run_self_test(served(reply), supports_json_schema=False)
    assert test.strength == strength and test.reason.startswith(reason)


def test_a_remote_endpoint_is_not_strong_because_it_is_remote(
    tmp_path: Path, endpoint: dict[str, TaskChatModel]
) -> None:
    endpoint["model"] = served(GARBAGE)
    assert factory.model_strength(openai_settings(tmp_path), "generate") == "weak"
    assert factory.model_strength(openai_settings(tmp_path), "grade") == "weak"
    assert (
        len(endpoint["model"].calls) == 2
    )  # one self-test (a first try and one retry), shared by both roles


def test_a_capable_endpoint_is_strong_and_tested_once_per_process(
    tmp_path: Path, endpoint: dict[str, TaskChatModel]
) -> None:
    endpoint["model"] = served(RIGHT)
    s = openai_settings(tmp_path)
    assert [factory.model_strength(s, role) for role in ("generate", "grade", "generate")] == ["strong"] * 3
    assert endpoint["model"].tasks() == ["unknown"]


def test_explicit_strength_settings_win_without_a_call(
    tmp_path: Path, endpoint: dict[str, TaskChatModel]
) -> None:
    endpoint["model"] = served(RIGHT)
    s = openai_settings(tmp_path, llm_strength="weak", grader_strength="strong")
    assert factory.model_strength(s, "generate") == "weak"
    assert factory.model_strength(s, "grade") == "strong"
    assert factory.model_strength(openai_settings(tmp_path, llm_strength="weak"), "grade") == "weak"
    assert endpoint["model"].calls == []


def test_the_embedded_model_is_self_tested_under_auto_keyed_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like any endpoint, the embedded model (RAG_LOCAL_MODEL) is measured, not assumed weak."""
    monkeypatch.setattr(factory, "chat_model", lambda *_args, **_kwargs: served(RIGHT))
    s = load_settings(data_dir=tmp_path / "rag", local_model="smollm2-135m")
    assert [factory.model_strength(s, role) for role in ("generate", "grade")] == ["strong", "strong"]
    assert ("local", "smollm2-135m") in capability._results


def test_a_down_endpoint_raises_and_is_tested_again_later(
    tmp_path: Path, endpoint: dict[str, TaskChatModel]
) -> None:
    down = [True]

    def reply(_messages: list[BaseMessage]) -> str:
        if down[0]:
            raise ConnectionRefusedError("connection refused")
        return RIGHT

    endpoint["model"] = TaskChatModel(replies={"unknown": reply})
    with pytest.raises(ModelUnavailableError, match="http://models.invalid/v1|TaskChatModel"):
        factory.model_strength(openai_settings(tmp_path), "generate")
    down[0] = False  # the server is back: the failure was not cached as "weak"
    assert factory.model_strength(openai_settings(tmp_path), "generate") == "strong"


@pytest.mark.parametrize(("reply", "source"), [(GARBAGE, "heuristic"), (RIGHT, "llm")])
def test_a_small_served_model_does_not_skip_retrieval(tmp_path: Path, reply: str, source: str) -> None:
    """An injected model under `auto` is self-tested too; a weak one gets the heuristic analysis instead of
    the model's own. Either way the question is retrieved for: a strong model's "skip retrieval" counts only
    where the heuristic's does too (nodes/analyze.py)."""
    model = served(reply)
    resources = Resources(load_settings(data_dir=tmp_path / "rag"), generator=model, grader=model)
    with use_resources(resources):
        update = analyze({"standalone_question": QUESTION}, runtime(analyzer="auto"))
        analyze({"standalone_question": QUESTION}, runtime(analyzer="auto"))
    assert update["analysis"]["source"] == source
    assert update["analysis"]["needs_retrieval"] is True
    assert model.tasks().count("unknown") == (2 if reply == GARBAGE else 1)  # the self-test ran once


def test_a_real_client_on_a_closed_port_names_the_endpoint(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    s = load_settings(
        data_dir=tmp_path / "rag",
        llm_provider="openai",
        llm_base_url=url,
        llm_model="m",
        llm_timeout_s=2,
    )
    with pytest.raises(ModelUnavailableError, match=f"model endpoint {url} is unavailable"):
        factory.model_strength(s, "generate")


# --- the real embedded model ----------------------------------------------------------------------------


@pytest.mark.slow
def test_embedded_smollm2_fails_the_self_test(tmp_path: Path) -> None:
    """SmolLM2-135M (RAG_LOCAL_MODEL=smollm2-135m) fails the self-test that `auto` runs."""
    s = load_settings(data_dir=tmp_path / "rag", local_n_ctx=2048, local_model="smollm2-135m")
    model = factory.chat_model(s)
    try:
        started = time.perf_counter()
        tests = [run_self_test(model, supports_json_schema=True) for _ in range(2)]
        logger.info(
            "SmolLM2 self-test: %s in %.2fs / %.2fs (%.2fs for both), raw %r",
            tests[0].reason,
            tests[0].seconds,
            tests[1].seconds,
            time.perf_counter() - started,
            tests[0].raw,
        )
        assert [test.strength for test in tests] == ["weak", "weak"]
    finally:
        model_caches.shutdown_local_server()
