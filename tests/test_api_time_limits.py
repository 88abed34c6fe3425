"""The API's time limits follow the model: on auto, the embedded model's limits come from its
measured speed, the prompt window and the completion cap; an endpoint keeps its fixed 30 s / 60 s; a value
set is used as is; bad values fail with the variable's name. Speeds are given, never timed here, so every
expected number below is worked out by hand from the formula of service.api.limits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from config.settings import Settings, SettingsError
from models.local_llm import ModelSpeed
from nodes.resources import Resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.api import limits as limits_module
from service.api.app import create_app
from service.api.limits import (
    ENDPOINT_MODEL_TIMEOUT_S,
    ENDPOINT_RUN_TIMEOUT_S,
    LimitPolicy,
    RunShape,
    measured_policy,
    model_calls_per_run,
)
from state.context import Context
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app

#: The embedded model's speed in these tests: 100 prompt tokens/s read, 20 tokens/s written.
SPEED = ModelSpeed(prompt_tokens_per_s=100.0, completion_tokens_per_s=20.0)
#: Where the stub embedded server listens (the generation model below talks to it).
STUB_URL = "http://127.0.0.1:1/v1"
ENDPOINT = {"llm_provider": "openai", "llm_base_url": "http://127.0.0.1:9/v1", "llm_model": "gpt-test"}
QUESTION = "What is the largest planet in the Solar System?"
REPLY = "Jupiter is the largest planet in the Solar System [1]."
CORPUS = {"jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System."}
#: Seconds a test waits for the served app's warm-up to end (it runs in a thread once the server listens).
WARM_UP_WAIT_S = 60.0


def test_auto_limits_of_the_embedded_model_follow_its_measured_speed(
    make_settings: Callable[..., Settings],
) -> None:
    # defaults: window 8192, completion cap 512, max_iterations 3, retrieval limit 10 s, safety factor 3
    policy = LimitPolicy(make_settings(), embedded=True, speed=SPEED, model_n_ctx=8192)
    limits = policy.limits()
    # prompt 8192 - 512 = 7680 tokens: 7680 / 100 = 76.8 s; answer 512 / 20 = 25.6 s; x 3 = 307.2 s
    assert limits.model_s == pytest.approx(307.2)
    # 3 once-per-run calls + 3 rounds x (2 retrieval-round + 3 answer-attempt calls) = 18 calls
    assert model_calls_per_run(3) == 18
    # 307.2 x 18 + 3 rounds x 10 s = 5529.6 + 30
    assert limits.run_s == pytest.approx(5559.6)
    assert (limits.model_source, limits.run_source, limits.retrieval_s) == ("measured", "measured", 10.0)


def test_a_runs_own_shape_sizes_its_limits(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits_module, "API_TIMEOUT_SAFETY_FACTOR", 2.0)
    settings = make_settings(api_retrieval_timeout_s=5.0)
    policy = LimitPolicy(settings, embedded=True, speed=SPEED, model_n_ctx=4096)
    # the model's own 4096-token window caps the 8192 of the settings: prompt 4096 - 1024 = 3072 tokens
    limits = policy.limits(RunShape(model_context_tokens=8192, generation_reserve=1024, max_iterations=1))
    # 2 x (3072 / 100 + 1024 / 20) = 2 x (30.72 + 51.2) = 163.84 s
    assert limits.model_s == pytest.approx(163.84)
    # 3 + 1 x 5 = 8 calls: 163.84 x 8 + 1 x 5 s = 1310.72 + 5
    assert limits.run_s == pytest.approx(1315.72)


def test_derived_limits_stop_at_a_day(make_settings: Callable[..., Settings]) -> None:
    crawling = ModelSpeed(prompt_tokens_per_s=0.001, completion_tokens_per_s=0.001)
    limits = LimitPolicy(make_settings(), embedded=True, speed=crawling).limits()
    assert (limits.model_s, limits.run_s) == (86_400.0, 86_400.0)


def test_a_configured_endpoint_keeps_its_fixed_limits(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(**ENDPOINT)
    policy = measured_policy(settings, generation_model=object())
    limits = policy.limits()
    assert (
        (limits.model_s, limits.run_s) == (ENDPOINT_MODEL_TIMEOUT_S, ENDPOINT_RUN_TIMEOUT_S) == (30.0, 60.0)
    )
    assert (limits.model_source, limits.run_source) == ("endpoint_default", "endpoint_default")
    assert policy.speed is None and "measured_speed" not in policy.describe()
    # a speed, were one known, does not change an endpoint's limits
    assert LimitPolicy(settings, embedded=False, speed=SPEED).limits().model_s == 30.0


def test_values_set_are_used_as_is(make_settings: Callable[..., Settings]) -> None:
    both = LimitPolicy(
        make_settings(api_model_timeout_s=45.0, api_run_timeout_s=90.0), embedded=True, speed=SPEED
    )
    assert (both.limits().model_s, both.limits().run_s) == (45.0, 90.0)
    assert (both.limits().model_source, both.limits().run_source) == ("setting", "setting")
    # the embedded model's run limit on auto follows a model limit that is set: 45 x 18 + 3 x 10
    model_only = LimitPolicy(make_settings(api_model_timeout_s=45.0), embedded=True).limits()
    assert (model_only.run_s, model_only.run_source) == (840.0, "model_setting")
    endpoint = LimitPolicy(make_settings(api_run_timeout_s=120.0, **ENDPOINT), embedded=False).limits()
    assert (endpoint.model_s, endpoint.run_s) == (30.0, 120.0)


def test_an_unmeasured_embedded_model_keeps_the_fixed_limits_and_says_why(
    make_settings: Callable[..., Settings],
) -> None:
    policy = measured_policy(make_settings(), generation_model=TaskChatModel())
    limits = policy.limits()
    assert (limits.model_s, limits.run_s) == (30.0, 60.0)
    assert (limits.model_source, limits.run_source) == ("unmeasured_default", "unmeasured_default")
    assert "not this process's embedded llama.cpp server" in policy.describe()["unmeasured_reason"]


@pytest.mark.parametrize(
    ("field", "value", "variable"),
    [
        ("api_model_timeout_s", -1.0, "RAG_API_MODEL_TIMEOUT_S"),
        ("api_run_timeout_s", -5.0, "RAG_API_RUN_TIMEOUT_S"),
        ("api_model_timeout_s", 1e9, "RAG_API_MODEL_TIMEOUT_S"),
        ("api_run_timeout_s", 86_401.0, "RAG_API_RUN_TIMEOUT_S"),
    ],
)
def test_negative_or_absurd_limits_fail_naming_the_variable(
    make_settings: Callable[..., Settings], field: str, value: float, variable: str
) -> None:
    with pytest.raises(SettingsError, match=variable):
        make_settings(**{field: value})


def test_auto_is_the_default(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings()
    assert (settings.api_model_timeout_s, settings.api_run_timeout_s) == (0.0, 0.0)


# --- through the API --------------------------------------------------------------------------------------


class EmbeddedStandIn(TaskChatModel):
    """The fake model, addressed like the client of the embedded server (its endpoint is STUB_URL)."""

    openai_api_base: str = STUB_URL


#: The limits are in the health route's detailed view, which a key's caller gets (see service.api.routes_ops).
HEALTH_KEYS = "limits-key-9d4:default"
HEALTH_HEADERS = {"X-API-Key": "limits-key-9d4"}


@dataclass
class StubServer:
    """Stands in for the running embedded server: its endpoint, window and a given speed (no timing).
    `warmed` is set when the served app's warm-up has ended, so a test can look at what the warm-up did
    before sending any request (the warm-up runs in a thread while the server already listens)."""

    base_url: str = STUB_URL
    n_ctx: int = 8192
    probes: int = 0
    warmed: threading.Event = field(default_factory=threading.Event)

    def measure_speed(self) -> ModelSpeed:
        self.probes += 1
        return SPEED


@pytest.fixture
def api_with(
    tmp_path: Path,
    install: Callable[..., Resources],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., tuple[httpx.Client, FastAPI, StubServer]]]:
    """`api_with(**settings)`: a served app over a one-file corpus whose generation model is the stand-in
    of the stub embedded server; returns (client, app, server)."""
    server = StubServer()
    monkeypatch.setattr(limits_module, "running_local_server", lambda: server)
    with ExitStack() as servers:

        def start(**overrides: Any) -> tuple[httpx.Client, FastAPI, StubServer]:
            resources = install(EmbeddedStandIn(replies={"generate": REPLY}), strength="weak")
            resources.knowledge_base = make_kb(resources.settings)
            ingest_paths(resources.knowledge_base, list(write_corpus(tmp_path / "corpus", CORPUS).values()))
            app = create_app(resources.settings.model_copy(update=overrides))
            engine = app.state.api.engine
            warm_up = engine.warm_up

            def observed_warm_up() -> float:
                try:
                    return warm_up()
                finally:
                    server.warmed.set()

            engine.warm_up = observed_warm_up
            return servers.enter_context(serve_app(app)), app, server

        yield start


def test_the_api_measures_the_embedded_model_once_and_shows_its_limits(
    api_with: Callable[..., tuple[httpx.Client, FastAPI, StubServer]],
) -> None:
    client, app, server = api_with(api_keys=HEALTH_KEYS)
    assert server.warmed.wait(WARM_UP_WAIT_S)  # the warm-up runs in a thread once the server listens
    assert server.probes == 1  # at warm-up, before the first request
    health = client.get("/api/v1/rag/health", headers=HEALTH_HEADERS).json()["limits"]
    assert (health["model_s"], health["run_s"], health["model_source"]) == (307.2, 5559.6, "measured")
    assert health["measured_speed"]["prompt_tokens_per_s"] == 100.0
    derivation = health["derivation"]
    assert (derivation["max_prompt_tokens"], derivation["completion_cap_tokens"]) == (7680, 512)
    assert (derivation["safety_factor"], derivation["model_calls_per_run"]) == (3.0, 18)
    assert health["settings"]["RAG_API_MODEL_TIMEOUT_S"] == "auto"
    metrics = client.get("/metrics").text
    assert 'rag_api_time_limit_seconds{limit="model",source="measured"} 307.2' in metrics
    assert 'rag_api_time_limit_seconds{limit="run",source="measured"} 5559.6' in metrics
    # a request's max_tokens sizes its own run: 3 x ((8192 - 1024) / 100 + 1024 / 20) = 3 x 122.88
    assert app.state.api.engine.limits_for(Context(generation_reserve=1024)).model_s == pytest.approx(368.64)
    reply = client.post("/api/v1/rag/generate", json={"query": QUESTION}, headers=HEALTH_HEADERS)
    assert reply.status_code == 200, reply.text
    assert server.probes == 1


def test_the_api_keeps_an_endpoints_fixed_limits(
    api_with: Callable[..., tuple[httpx.Client, FastAPI, StubServer]],
) -> None:
    client, _app, server = api_with(**ENDPOINT, api_keys=HEALTH_KEYS)
    health = client.get("/api/v1/rag/health", headers=HEALTH_HEADERS).json()["limits"]
    assert (health["model_s"], health["run_s"], health["model_source"]) == (30.0, 60.0, "endpoint_default")
    assert health["model"] == "endpoint" and server.probes == 0
