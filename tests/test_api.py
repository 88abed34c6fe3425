"""The HTTP API on a real uvicorn server on a loopback port, with fake models installed in-process: every
route, the SSE event order, batch isolation, 422 / 401 / 403 / 404 / 504, and delete-then-search.

Why a real server rather than FastAPI's TestClient: streaming, the worker threads of the engine, the
process-wide resources and the time limits behave as deployed only over a socket.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGenerationChunk
from typer.testing import CliRunner

from evals.load import run_load
from graphs.runner import Session
from models.local_llm import LOCAL_MODEL_ALIAS
from nodes.resources import Resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from service.api import engine as engine_module
from service.api.app import create_app
from service.api.engine import RunSpec
from service.api.gate import ModelGate, ModelGates, RunAbandoned
from service.api.routes_rag import response_body
from service.api.schemas import GenerateRequest
from service.cli import app as cli_app
from state.context import Context
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app, sse_events

REPLY = "Jupiter is the largest planet in the Solar System [1]."
#: What the engine answers to REPLY: the short answer on its own line first, then the cited sentence.
ANSWER = "Jupiter\n\nJupiter is the largest planet in the Solar System [1]."
QUESTION = "What is the largest planet in the Solar System?"
CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. It has 95 known moons.",
    "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees for three minutes.",
}


class StreamingTaskModel(TaskChatModel):
    """TaskChatModel that streams its reply word by word (so `token` events exist)."""

    def _stream(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        result = self._generate(messages, *args, **kwargs)
        words = result.generations[0].message.content.split(" ")  # type: ignore[union-attr]
        for index, word in enumerate(words):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word if index == 0 else f" {word}"))


class Api:
    """A running server: its base URL, resources, model and a client."""

    def __init__(
        self, client: httpx.Client, resources: Resources, model: TaskChatModel, app: FastAPI
    ) -> None:
        self.client, self.resources, self.model, self.app = client, resources, model, app
        self.base = str(client.base_url).rstrip("/")

    def gates(self) -> dict[str, dict[str, int]]:
        """The engine's model gates now (size, busy, waiting per model)."""
        gates = self.app.state.api.engine.gates._gates.items()
        return {
            name: {"size": gate.size, "busy": gate.busy, "waiting": gate.waiting}
            for name, gate in gates
            if gate is not None
        }

    def post(self, path: str, payload: Any, **kwargs: Any) -> httpx.Response:
        return self.client.post(path, json=payload, **kwargs)

    def sse(self, payload: dict[str, Any], **kwargs: Any) -> list[tuple[str, Any]]:
        """The (event, data) pairs of a streamed answer."""
        return sse_events(self.client, payload, **kwargs)


@pytest.fixture
def start_api(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> Iterator[Callable[..., Api]]:
    """`start_api(model=None, **settings)`: a uvicorn server over the corpus with the fake models."""
    with ExitStack() as servers:

        def start(model: TaskChatModel | None = None, **overrides: Any) -> Api:
            model = model or StreamingTaskModel(replies={"generate": REPLY})
            resources = install(model, strength="weak")
            resources.knowledge_base = make_kb(resources.settings)
            files = write_corpus(tmp_path / "corpus", CORPUS)
            ingest_paths(resources.knowledge_base, list(files.values()))
            app = create_app(resources.settings.model_copy(update=overrides))
            return Api(servers.enter_context(serve_app(app)), resources, model, app)

        yield start


#: Seconds a held call waits for the test to release it before it fails (a test that forgot to release).
HOLD_LIMIT_S = 60


class Hold:
    """A call that blocks until the test releases it: a slow model (or search) without a sleep whose length
    races the time limit under test. `inside` counts the calls blocked now, `calls` all calls so far."""

    def __init__(self) -> None:
        self.inside = self.calls = 0
        self.entered = threading.Event()
        self.released = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, *_args: Any) -> str:
        with self._lock:
            self.inside += 1
            self.calls += 1
        self.entered.set()
        try:
            if not self.released.wait(HOLD_LIMIT_S):
                raise RuntimeError("the test never released the held call")
        finally:
            with self._lock:
                self.inside -= 1
        return REPLY

    def wait_entered(self) -> None:
        """Until a call is blocked here (fails after HOLD_LIMIT_S)."""
        assert self.entered.wait(HOLD_LIMIT_S), "no call reached the held model"

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def holds(start_api: Callable[..., Api]) -> Iterator[Callable[[], Hold]]:
    """`holds()`: a new Hold; all are released at the end (before the servers of `start_api` stop)."""
    made: list[Hold] = []

    def make() -> Hold:
        made.append(Hold())
        return made[-1]

    yield make
    for hold in made:
        hold.release()


def finish_runs(api: Api) -> None:
    """Wait until every run the server accepted has ended (its worker pool drained): after this, a run that
    was refused or abandoned can no longer reach the model. The server takes no new run afterwards."""
    api.app.state.api.engine.executor.shutdown(wait=True)


# --- generate ---------------------------------------------------------------------------------------------


def test_generate_answers_with_citations_sources_and_metadata(start_api: Callable[..., Api]) -> None:
    api = start_api()
    reply = api.post("/api/v1/rag/generate", {"query": QUESTION, "top_k": 3})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["answer"] == ANSWER
    assert [citation["marker"] for citation in body["citations"]] == [1]
    assert body["sources"][0]["source"].endswith("jupiter.md")
    assert body["strategy"] in {"DIRECT", "HYDE", "QUERY_DECOMPOSITION", "ITERATIVE", "HYBRID"}
    assert QUESTION in body["rewritten_queries"]
    metadata = body["metadata"]
    assert {"retrieve", "generate", "cite"} <= set(metadata["timings"])
    assert metadata["total_ms"] > 0 and metadata["chunks_found"] >= 1
    usage = metadata["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert metadata["cache_hit"] is False and metadata["model"] == api.resources.settings.llm_model
    assert body["thread_id"]
    assert_answered_judgement(body)


def assert_answered_judgement(body: dict[str, Any]) -> None:
    """An answered question's judgement: not "not found", no reason, a probability or none."""
    assert body["band"] in ("confident", "tentative") and body["not_found"] is False
    assert body["not_found_reason"] == ""
    assert body["confidence"] is None or 0.0 <= body["confidence"] <= 1.0


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (
            {
                "answer": "Not sure — the closest the documents come is: ...",
                "band": "tentative",
                "confidence": 0.41237,
            },  # fmt: skip
            {"band": "tentative", "confidence": 0.412, "not_found": False, "not_found_reason": ""},
        ),
        (
            {
                "answer": "Not found.",
                "band": "not_found",
                "not_found": True,
                "confidence": 0.03,
                "not_found_reason": "no passage mentions Atlantis",
            },  # fmt: skip
            {
                "band": "not_found",
                "confidence": 0.03,
                "not_found": True,
                "not_found_reason": "no passage mentions Atlantis",
            },  # fmt: skip
        ),
        (  # a cached answer of a state without a judgement: answered, no probability invented
            {"answer": ANSWER, "cache_hit": True},
            {"band": "confident", "confidence": None, "not_found": False, "not_found_reason": ""},
        ),
    ],
)
def test_the_generate_response_carries_the_judgement(state: dict[str, Any], expected: dict[str, Any]) -> None:
    body = response_body(
        GenerateRequest(query=QUESTION), RunSpec(QUESTION, "t1", Context()), state, [], total_ms=5.0
    )
    assert {key: body[key] for key in expected} == expected


def test_generate_fields_reach_the_model(start_api: Callable[..., Api]) -> None:
    api = start_api()
    payload = {"query": QUESTION, "system_prompt": "Answer in one line.", "include_citations": False}
    body = api.post("/api/v1/rag/generate", payload).json()
    assert body["answer"] == "Jupiter\n\nJupiter is the largest planet in the Solar System."
    assert body["citations"] == []
    (prompt,) = api.model.prompts("generate")
    system = next(message.content for message in prompt if isinstance(message, SystemMessage))
    assert str(system).endswith("Answer in one line.")


def test_follow_up_on_the_same_thread_sees_the_history(start_api: Callable[..., Api]) -> None:
    api = start_api()
    first = api.post("/api/v1/rag/generate", {"query": QUESTION, "thread_id": "t-1"}).json()
    second = api.post("/api/v1/rag/generate", {"query": "How many moons does it have?", "thread_id": "t-1"})
    assert second.status_code == 200 and first["thread_id"] == second.json()["thread_id"] == "t-1"
    messages = Session(api.resources.settings).history("t-1")["messages"]  # the API's checkpointer
    assert [message.type for message in messages] == ["human", "ai", "human", "ai"]
    assert messages[0].content == QUESTION


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 5001}, "query"),
        ({"query": QUESTION, "top_k": 0}, "top_k"),
        ({"query": QUESTION, "top_k": 51}, "top_k"),
        ({"query": QUESTION, "mode": "verbose"}, "mode"),
        ({"query": QUESTION, "rewrite_method": "magic"}, "rewrite_method"),
        ({"query": QUESTION, "filters": {"tenant": "x"}}, "filters"),
        ({"query": QUESTION, "temperature": 3}, "temperature"),
        ({"query": QUESTION, "tenant_id": "bad tenant!"}, "tenant_id"),
        ({"query": QUESTION, "unknown": 1}, "unknown"),
    ],
)
def test_bad_input_is_422_naming_the_field(
    start_api: Callable[..., Api], payload: dict[str, Any], field: str
) -> None:
    api = start_api()
    reply = api.post("/api/v1/rag/generate", payload)
    assert reply.status_code == 422, reply.text
    body = reply.json()
    assert body["field"] == field and body["message"].startswith(f"{field}:")
    assert api.model.calls == []  # refused before any model call


def test_the_query_limit_is_a_setting(start_api: Callable[..., Api]) -> None:
    api = start_api(max_query_chars=20)
    reply = api.post("/api/v1/rag/generate", {"query": "x" * 21})
    assert reply.status_code == 422 and "RAG_MAX_QUERY_CHARS" in reply.json()["message"]
    assert api.model.calls == []


# --- streaming --------------------------------------------------------------------------------------------


def test_stream_events_come_in_the_graph_order(start_api: Callable[..., Api]) -> None:
    api = start_api()
    events = api.sse({"query": QUESTION})
    names = [name for name, _ in events]
    assert names[0] == "query_rewritten"
    assert names[-2:] == ["generation_complete", "done"]
    order = [
        "query_rewritten",
        "documents_retrieved",
        "generation_start",
        "token",
        "generation_complete",
        "done",
    ]
    firsts = [names.index(name) for name in order]
    assert firsts == sorted(firsts), names
    tokens = "".join(data["text"] for name, data in events if name == "token")
    assert tokens == REPLY
    complete = dict(events)["generation_complete"]
    assert complete["answer"] == ANSWER and complete["citations"][0]["marker"] == 1
    assert complete["sources"][0]["source"].endswith("jupiter.md")
    done = events[-1][1]
    assert done["ok"] is True and done["answer"] == ANSWER and "timings" in done["metadata"]
    assert_answered_judgement(done)


def test_stream_reports_a_failure_as_an_error_event(
    start_api: Callable[..., Api], holds: Callable[[], Hold]
) -> None:
    held = holds()
    api = start_api(StreamingTaskModel(replies={"generate": held}), api_model_timeout_s=0.3)
    events = api.sse({"query": QUESTION})
    assert held.inside == 1  # the error came while the model call was still running
    names = [name for name, _ in events]
    assert names[-2:] == ["error", "done"] and "generation_complete" not in names
    error = events[-2][1]
    assert error["status"] == 504 and "RAG_API_MODEL_TIMEOUT_S" in error["message"]
    assert events[-1][1] == {"ok": False, "status": 504}


def test_stream_refuses_bad_input_before_opening(start_api: Callable[..., Api]) -> None:
    api = start_api()
    reply = api.post("/api/v1/rag/generate/stream", {"query": QUESTION, "top_k": 99})
    assert reply.status_code == 422 and reply.json()["field"] == "top_k"


# --- batch ------------------------------------------------------------------------------------------------


def test_batch_isolates_a_bad_item(start_api: Callable[..., Api]) -> None:
    api = start_api()
    requests = [
        {"query": QUESTION},
        {"query": ""},
        {"query": QUESTION, "top_k": 500},
        {"query": "Oolong tea?"},
    ]
    reply = api.post("/api/v1/rag/batch", {"requests": requests})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["succeeded"], body["failed"]) == (2, 2)
    results = body["results"]
    assert [item["index"] for item in results] == [0, 1, 2, 3]
    assert results[0]["ok"] and results[0]["answer"] == ANSWER
    assert_answered_judgement(results[0])
    assert "band" not in results[1]  # a refused item has no answer to judge
    assert (results[1]["status"], results[1]["field"]) == (422, "query")
    assert (results[2]["status"], results[2]["field"]) == (422, "top_k")
    assert results[3]["ok"]


def test_batch_size_is_bounded(start_api: Callable[..., Api]) -> None:
    api = start_api()
    assert api.post("/api/v1/rag/batch", {"requests": []}).status_code == 422
    reply = api.post("/api/v1/rag/batch", {"requests": [{"query": QUESTION}] * 51})
    assert reply.status_code == 422 and reply.json()["field"] == "requests"


# --- keys and tenants -------------------------------------------------------------------------------------


def test_api_keys_map_to_tenants(start_api: Callable[..., Api]) -> None:
    api = start_api(api_keys="key-a:default,key-b:globex")
    route = "/api/v1/rag/generate"
    assert api.post(route, {"query": QUESTION}).status_code == 401
    assert api.post(route, {"query": QUESTION}, headers={"X-API-Key": "nope"}).status_code == 401
    forbidden = api.post(route, {"query": QUESTION, "tenant_id": "globex"}, headers={"X-API-Key": "key-a"})
    assert forbidden.status_code == 403 and forbidden.json()["field"] == "tenant_id"
    own = api.post(route, {"query": QUESTION}, headers={"Authorization": "Bearer key-a"})
    assert own.status_code == 200 and own.json()["sources"]
    # globex has no documents: its key gets globex's (empty) index, never the default tenant's
    other = api.post(route, {"query": QUESTION}, headers={"X-API-Key": "key-b"}).json()
    assert (
        other["not_found"] is True and other["sources"] == [] and other["metadata"]["tenant_id"] == "globex"
    )
    assert other["band"] == "not_found" and other["not_found_reason"]  # why, in words
    batch = api.post(
        "/api/v1/rag/batch",
        {"requests": [{"query": QUESTION}, {"query": QUESTION, "tenant_id": "default"}]},
        headers={"X-API-Key": "key-b"},
    ).json()
    assert batch["results"][0]["ok"] and batch["results"][1]["status"] == 403
    assert api.client.get("/api/v1/documents").status_code == 401
    assert api.client.get("/health").status_code == 200  # liveness needs no key


# --- time limits ------------------------------------------------------------------------------------------


def test_model_and_run_time_limits_answer_504(
    start_api: Callable[..., Api], holds: Callable[[], Hold]
) -> None:
    held = holds()
    api = start_api(StreamingTaskModel(replies={"generate": held}), api_model_timeout_s=0.3)
    reply = api.post("/api/v1/rag/generate", {"query": QUESTION})
    assert reply.status_code == 504 and "RAG_API_MODEL_TIMEOUT_S" in reply.json()["message"]
    assert held.inside == 1  # answered before the model call ended
    held.release()

    held = holds()
    api = start_api(StreamingTaskModel(replies={"generate": held}), api_run_timeout_s=0.5)
    reply = api.post("/api/v1/rag/generate", {"query": QUESTION})
    assert reply.status_code == 504 and "RAG_API_RUN_TIMEOUT_S" in reply.json()["message"]
    assert held.inside == 1


def test_retrieval_time_limit_answers_504(
    start_api: Callable[..., Api], holds: Callable[[], Hold], monkeypatch: pytest.MonkeyPatch
) -> None:
    api = start_api(api_retrieval_timeout_s=0.3)
    original = Searcher.search
    held = holds()

    def slow_search(self: Searcher, *args: Any, **kwargs: Any) -> Any:
        held()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Searcher, "search", slow_search)
    reply = api.post("/api/v1/rag/generate", {"query": QUESTION})
    assert reply.status_code == 504 and "RAG_API_RETRIEVAL_TIMEOUT_S" in reply.json()["message"]
    assert held.inside == 1  # answered while the search was still running


class Concurrency:
    """A slow model reply that records how many calls were inside the model at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.inside, self.most = seconds, 0, 0
        self._lock = threading.Lock()

    def __call__(self, _messages: list[BaseMessage]) -> str:
        with self._lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        time.sleep(self.seconds)
        with self._lock:
            self.inside -= 1
        return REPLY


def concurrent_posts(api: Api, payloads: list[dict[str, Any]]) -> list[httpx.Response]:
    """POST the payloads to generate at once, each from its own client thread."""
    replies: list[httpx.Response | None] = [None] * len(payloads)

    def post(index: int) -> None:
        with httpx.Client(base_url=api.base, timeout=60) as client:
            replies[index] = client.post("/api/v1/rag/generate", json=payloads[index])

    threads = [threading.Thread(target=post, args=(index,)) for index in range(len(payloads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(reply is not None for reply in replies)
    return [reply for reply in replies if reply is not None]


def test_waiting_for_the_model_counts_against_neither_limit(start_api: Callable[..., Api]) -> None:
    # Six runs at once on a model that takes one call at a time: the last run waits ~5 x 0.4 s for the
    # model, longer than both limits, yet each call itself and each run's own work stay well inside them.
    slow = Concurrency(0.4)
    api = start_api(
        StreamingTaskModel(replies={"generate": slow}),
        api_model_concurrency=1,
        api_model_timeout_s=1.5,
        api_run_timeout_s=2.0,
    )
    replies = concurrent_posts(api, [{"query": QUESTION}] * 6)
    assert [reply.status_code for reply in replies] == [200] * 6, [reply.text for reply in replies]
    assert all(reply.json()["answer"] == ANSWER for reply in replies)
    assert slow.most == 1  # the gate let one call into the model at a time


def while_held(api: Api, held: Hold, payload: dict[str, Any]) -> tuple[httpx.Response, httpx.Response]:
    """(reply to a first POST of `payload` to generate, reply to a second one sent while the first run is
    blocked in `held`); the first is released once the second has its answer."""
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(api.post, "/api/v1/rag/generate", payload)
        held.wait_entered()
        second = api.post("/api/v1/rag/generate", payload)
        held.release()
        return first.result(timeout=HOLD_LIMIT_S), second


def test_a_full_queue_answers_503_with_retry_after(
    start_api: Callable[..., Api], holds: Callable[[], Hold], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "API_RETRY_AFTER_S", 7)
    held = holds()
    api = start_api(
        StreamingTaskModel(replies={"generate": held}),
        api_workers=1,
        api_queue_timeout_s=0.3,
    )
    first, busy = while_held(api, held, {"query": QUESTION})
    assert (first.status_code, busy.status_code) == (200, 503), busy.text
    assert busy.headers["retry-after"] == "7"
    body = busy.json()
    assert (
        body["error"] == "Busy" and "RAG_API_QUEUE_TIMEOUT_S" in body["message"] and "slot" in body["message"]
    )
    assert body["retry_after_s"] == 7


def test_waiting_too_long_for_the_model_answers_503(
    start_api: Callable[..., Api], holds: Callable[[], Hold]
) -> None:
    held = holds()
    api = start_api(
        StreamingTaskModel(replies={"generate": held}), api_model_concurrency=1, api_queue_timeout_s=0.3
    )
    first, busy = while_held(api, held, {"query": QUESTION})
    assert (first.status_code, busy.status_code) == (200, 503), busy.text
    assert "model was not free" in busy.json()["message"] and busy.headers["retry-after"]
    finish_runs(api)  # the refused run's remaining work skips the model instead of queueing for it
    assert len(api.model.prompts("generate")) == held.calls == 1


def test_the_model_gate_serves_the_oldest_run_first() -> None:
    gate = ModelGate(1)
    gate.acquire(0.0, lambda: False)
    order: list[float] = []

    def wait(priority: float) -> None:
        gate.acquire(priority, lambda: False)
        order.append(priority)
        gate.release()

    threads = [threading.Thread(target=wait, args=(priority,)) for priority in (3.0, 1.0, 2.0)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(gate._waiting) < 3:  # all three are queued before the model comes free
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gate.release()
    for thread in threads:
        thread.join(timeout=10)
    assert order == [1.0, 2.0, 3.0]
    assert gate.busy == 0


def test_an_abandoned_wait_holds_nothing() -> None:
    gate = ModelGate(1)
    gate.acquire(0.0, lambda: False)
    with pytest.raises(RunAbandoned):
        gate.acquire(1.0, lambda: True)
    gate.release()
    gate.acquire(2.0, lambda: False)  # free again: the abandoned waiter took no permit
    assert gate.busy == 1


def test_a_waiter_that_gave_up_does_not_take_the_model_when_it_comes_free() -> None:
    """The request gave up (its 503 sent), then the model came free before the waiter's next poll: the
    waiter, woken by the release, must skip the model (it took it, and a refused run called the model)."""
    gate = ModelGate(1)
    gate.acquire(0.0, lambda: False)
    gave_up = threading.Event()
    outcome: list[str] = []

    def wait() -> None:
        try:
            gate.acquire(1.0, gave_up.is_set)
            outcome.append("took the model")
        except RunAbandoned:
            outcome.append("abandoned")

    waiter = threading.Thread(target=wait)
    waiter.start()
    deadline = time.monotonic() + 10
    while gate.waiting == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gave_up.set()
    gate.release()
    waiter.join(timeout=10)
    assert outcome == ["abandoned"] and gate.busy == 0 and gate.waiting == 0


def test_the_embedded_model_is_gated_and_endpoints_are_not() -> None:
    automatic = ModelGates(0)
    assert automatic.size_for(LOCAL_MODEL_ALIAS) == 2 and automatic.gate("gpt-4o-mini") is None
    assert ModelGates(3).size_for("gpt-4o-mini") == 3


#: The question of a client that leaves while its run waits for the model.
LEAVING = "Which planet is the largest in the Solar System?"


def prompt_text(messages: list[BaseMessage]) -> str:
    """All of a prompt's messages as one text."""
    return "\n".join(str(message.content) for message in messages)


def wait_until_idle(api: Api, seconds: float = 20) -> dict[str, dict[str, int]]:
    """The gates once no call holds or waits for a model (fails after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        gates = api.gates()
        if all(gate["busy"] == 0 and gate["waiting"] == 0 for gate in gates.values()):
            return gates
        assert time.monotonic() < deadline, f"the model gate did not come free: {gates}"
        time.sleep(0.05)


def disconnects_counted(api: Api) -> float:
    """How many clients the server has counted as gone before their answer (its 499s), all routes."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in api.client.get("/metrics").text.splitlines()
        if line.startswith("rag_client_disconnects_total{")
    )


def wait_for_disconnects(api: Api, count: int, seconds: float = 20) -> None:
    """Until the server has counted `count` clients that left (fails after `seconds`)."""
    deadline = time.monotonic() + seconds
    while disconnects_counted(api) < count:
        assert time.monotonic() < deadline, "the server never noticed the client that left"
        time.sleep(0.05)


def test_errors_and_disconnects_leave_the_gate_at_full_capacity(
    start_api: Callable[..., Api], holds: Callable[[], Hold]
) -> None:
    # Each question below reaches the generate prompt when its run is not stopped (checked for the others).
    # The first run holds the model until the server has counted both clients that leave: no wall-clock
    # race decides whether an abandoned run is still waiting when the model comes free.
    hold = holds()

    def reply(messages: list[BaseMessage]) -> str:
        if "Explode" in prompt_text(messages):
            raise RuntimeError("the model broke")
        return hold(messages) if hold.calls == 0 else REPLY

    api = start_api(StreamingTaskModel(replies={"generate": reply}), api_model_concurrency=1)
    holder = threading.Thread(target=api.post, args=("/api/v1/rag/generate", {"query": QUESTION}))
    holder.start()
    hold.wait_entered()  # the first run holds the model
    # A client that gives up while its run waits for the model: the run is abandoned before the model.
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{api.base}/api/v1/rag/generate", json={"query": LEAVING}, timeout=0.3)
    # A stream closed by its client mid-run.
    with api.client.stream(
        "POST",
        "/api/v1/rag/generate/events",
        json={"query": "Is Jupiter the largest planet in the Solar System?"},
    ) as r:
        assert r.status_code == 200
        next(line for line in r.iter_lines() if line.startswith("event:"))
    wait_for_disconnects(api, 2)
    hold.release()
    # A model call that fails.
    failed = api.post(
        "/api/v1/rag/generate", {"query": "Explode: which is the largest planet in the Solar System?"}
    )
    holder.join(timeout=30)
    gates = wait_until_idle(api)
    assert gates and all(gate["size"] == 1 for gate in gates.values())
    # The failed model call falls back to the extractive answer (nodes/generate.py): a 200, never a hang.
    assert failed.status_code == 200, failed.text
    assert "Jupiter is the largest planet" in failed.json()["answer"]
    # Full capacity: a fresh request is answered, and the gate is free again afterwards.
    again = api.post("/api/v1/rag/generate", {"query": QUESTION})
    assert again.status_code == 200 and again.json()["answer"] == ANSWER
    assert all(gate["busy"] == 0 and gate["waiting"] == 0 for gate in wait_until_idle(api).values())
    finish_runs(api)  # every run has ended: the abandoned ones would have reached the model by now
    asked = [prompt_text(prompt) for prompt in api.model.prompts("generate")]
    assert any("Explode: which" in text for text in asked)  # the prompts do carry the question
    assert not any(LEAVING in text for text in asked)


def test_batch_items_wait_their_turn_at_the_model(start_api: Callable[..., Api]) -> None:
    slow = Concurrency(0.3)
    api = start_api(
        StreamingTaskModel(replies={"generate": slow}),
        api_model_concurrency=1,
        api_model_timeout_s=1.0,
        api_run_timeout_s=1.5,
    )
    reply = api.post("/api/v1/rag/batch", {"requests": [{"query": QUESTION}] * 6})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["succeeded"] == 6 and body["failed"] == 0, body
    assert slow.most == 1  # batch items go through the same gate, one model call at a time
    assert all(gate["busy"] == 0 for gate in wait_until_idle(api).values())


# --- threads: tenants and busy threads --------------------------------------------------------------------


def test_another_tenants_thread_id_is_a_thread_of_its_own(start_api: Callable[..., Api]) -> None:
    """Thread ids are scoped per tenant: B naming A's id gets a new thread of B's, exactly as for an id
    nobody uses (same status, no refusal that would tell B the id exists), and A's thread is untouched."""
    api = start_api(api_keys="key-a:default,key-b:globex")
    route = "/api/v1/rag/generate"
    own = api.post(route, {"query": QUESTION, "thread_id": "t-a"}, headers={"X-API-Key": "key-a"})
    assert own.status_code == 200, own.text
    for path in (route, "/api/v1/rag/generate/stream"):
        for thread_id in ("t-a", "t-unused"):
            body = {"query": "Tell me", "thread_id": thread_id}
            other = api.post(path, body, headers={"X-API-Key": "key-b"})
            assert other.status_code == 200 and "ThreadAccessError" not in other.text, other.text
            assert QUESTION not in other.text
    batch = api.post(
        "/api/v1/rag/batch",
        {"requests": [{"query": "Tell me", "thread_id": "t-a"}]},
        headers={"X-API-Key": "key-b"},
    ).json()
    assert batch["results"][0]["status"] == 200 and QUESTION not in json.dumps(batch)
    messages = Session(api.resources.settings).history("t-a", tenant="default")["messages"]
    assert [message.content for message in messages][0] == QUESTION and len(messages) == 2
    theirs = Session(api.resources.settings).history("t-a", tenant="globex")["messages"]
    assert QUESTION not in [message.content for message in theirs] and len(theirs) == 6  # B's 3 turns


def test_waiting_for_the_threads_turn_is_not_run_time(start_api: Callable[..., Api]) -> None:
    # Another turn holds the thread for longer than the run limit; the request waits for it, then does its
    # own (fast) work well inside the limit. Were the wait run time, it would be a 504.
    api = start_api(api_run_timeout_s=1.0, thread_lock_timeout_s=HOLD_LIMIT_S)
    taken, released = threading.Event(), threading.Event()

    def other_turn() -> None:
        with Session(api.resources.settings).turn("t-turns", Context(), {}):
            taken.set()
            time.sleep(1.5)  # longer than the run limit: a longer wait (a busy machine) only adds to it
            released.set()

    holder = threading.Thread(target=other_turn)
    holder.start()
    assert taken.wait(HOLD_LIMIT_S)
    reply = api.post("/api/v1/rag/generate", {"query": QUESTION, "thread_id": "t-turns"})
    assert released.is_set()  # the run waited for the other turn
    holder.join(timeout=HOLD_LIMIT_S)
    assert reply.status_code == 200, reply.text
    assert reply.json()["answer"] == ANSWER and len(api.model.prompts("generate")) == 1


def test_a_busy_thread_is_409(start_api: Callable[..., Api], holds: Callable[[], Hold]) -> None:
    held = holds()
    api = start_api(StreamingTaskModel(replies={"generate": held}), thread_lock_timeout_s=0.2)
    first, busy = while_held(api, held, {"query": QUESTION, "thread_id": "t-busy"})
    assert (first.status_code, busy.status_code) == (200, 409), busy.text
    assert busy.json()["error"] == "ThreadBusyError"
    finish_runs(api)
    assert len(api.model.prompts("generate")) == 1


# --- documents --------------------------------------------------------------------------------------------


def test_upload_list_delete_then_search_finds_nothing(start_api: Callable[..., Api]) -> None:
    api = start_api()
    text = b"# Kelp\n\nVantaport harbour is famous for purple kelp farms."
    reply = api.client.post(
        "/api/v1/documents", files={"files": ("kelp.md", text, "text/markdown")}, data={"collection": "notes"}
    )
    assert reply.status_code == 200, reply.text
    assert (reply.json()["indexed"], reply.json()["collection"]) == (1, "notes")
    listed = api.client.get("/api/v1/documents", params={"collection": "notes"}).json()
    (document,) = listed["documents"]
    assert document["source"].endswith("kelp.md") and "notes" in listed["collections"]

    searcher = Searcher(api.resources.kb())
    assert searcher.search("purple kelp Vantaport", k=5).hits
    deleted = api.client.delete("/api/v1/documents", params={"source": document["source"]})
    assert deleted.status_code == 200 and deleted.json()["documents"] == 1
    for mode in ("dense", "bm25", "hybrid"):
        hits = searcher.search("purple kelp Vantaport", k=5, mode=mode).hits  # type: ignore[arg-type]
        assert all("kelp" not in hit.text for hit in hits)
    assert api.client.delete("/api/v1/documents", params={"source": document["source"]}).status_code == 404
    assert api.client.delete("/api/v1/documents").status_code == 422


def test_upload_errors_are_the_cli_errors(start_api: Callable[..., Api]) -> None:
    api = start_api()
    corrupt = api.client.post(
        "/api/v1/documents", files={"files": ("broken.pdf", b"%PDF-1.4 garbage", "application/pdf")}
    )
    assert corrupt.status_code == 422 and "corrupt PDF" in corrupt.json()["message"]
    unsupported = api.client.post(
        "/api/v1/documents", files={"files": ("tool.exe", b"MZ", "application/octet-stream")}
    )
    assert unsupported.status_code == 422 and "unsupported file type" in unsupported.json()["message"]
    assert api.client.get("/api/v1/documents").json()["documents"][0]["source"].endswith("jupiter.md")


def test_a_tenant_name_from_a_form_or_query_is_checked_before_any_file_is_written(
    start_api: Callable[..., Api],
) -> None:
    api = start_api()
    data_dir = api.resources.settings.data_dir
    before = {path for path in data_dir.parent.rglob("*")}
    upload = api.client.post(
        "/api/v1/documents",
        files={"files": ("escape.md", b"# Escape\n\nOut of the data folder.", "text/markdown")},
        data={"tenant_id": "../../escaped"},
    )
    assert upload.status_code == 422 and upload.json()["field"] == "tenant_id", upload.text
    assert {path for path in data_dir.parent.rglob("*")} - before == set()  # no folder, no file anywhere
    listing = api.client.get("/api/v1/documents", params={"tenant_id": "a/b"})
    assert listing.status_code == 422 and listing.json()["field"] == "tenant_id"


def test_reuploading_a_broken_version_keeps_the_previous_one(start_api: Callable[..., Api]) -> None:
    api = start_api()
    good = b'[{"id": "a", "text": "Lanterns are lit at dusk in Vantaport."}]'
    assert api.client.post("/api/v1/documents", files={"files": ("events.json", good)}).status_code == 200
    broken = api.client.post("/api/v1/documents", files={"files": ("events.json", b"[{not json")})
    assert broken.status_code == 422
    hits = Searcher(api.resources.kb()).search("lanterns dusk Vantaport", k=3).hits
    assert hits and "Lanterns" in hits[0].text


def test_text_event_keeps_custom_metadata_and_deletes_by_conversation(start_api: Callable[..., Api]) -> None:
    api = start_api()
    event = {
        "text": "The captain hid the brass key under the lighthouse stairs.",
        "event": True,
        "metadata": {"conversation_id": "c-9", "category": "plot", "related_plot_id": 12},
    }
    reply = api.post("/api/v1/documents/text", event)
    assert reply.status_code == 200 and reply.json()["chunks"] == 1
    searcher = Searcher(api.resources.kb())
    hits = searcher.search("brass key lighthouse", k=3, filters={"category": "plot"}).hits
    assert hits and hits[0].metadata["related_plot_id"] == 12
    assert searcher.search("brass key lighthouse", k=3, filters={"category": "lore"}).hits == []
    bad = api.post("/api/v1/documents/text", {"text": "x", "metadata": {"tenant": "other"}})
    assert bad.status_code == 422 and bad.json()["field"] == "metadata.tenant"

    deleted = api.client.delete("/api/v1/documents", params={"conversation_id": "c-9"})
    assert deleted.status_code == 200 and deleted.json()["chunks"] == 1
    assert searcher.search("brass key lighthouse", k=3, filters={"category": "plot"}).hits == []


def test_text_document_is_chunked_and_answerable(start_api: Callable[..., Api]) -> None:
    api = start_api(StreamingTaskModel(replies={"generate": "Saturn has bright rings of ice [1]."}))
    reply = api.post(
        "/api/v1/documents/text", {"text": "Saturn has bright rings of ice.", "doc_id": "saturn"}
    )
    assert reply.status_code == 200 and reply.json()["source"] == "text:saturn"
    body = api.post("/api/v1/rag/generate", {"query": "Which planet has rings of ice?"}).json()
    assert any(source["source"] == "text:saturn" for source in body["sources"])


# --- health and metrics -----------------------------------------------------------------------------------


#: A key for the detailed health view (the tenant's own figures): without one the route says only up / down.
HEALTH_KEY = "health-key-5e1"


def test_health_checks_each_dependency(start_api: Callable[..., Api]) -> None:
    api = start_api(api_keys=f"{HEALTH_KEY}:default")
    assert api.client.get("/health").json()["status"] == "ok"
    public = api.client.get("/api/v1/rag/health")
    assert (public.status_code, public.json()) == (200, {"status": "up"})
    assert api.model.calls == []  # the anonymous view never calls the model
    reply = api.client.get("/api/v1/rag/health", headers={"X-API-Key": HEALTH_KEY})
    assert reply.status_code == 200, reply.text
    assert (reply.json()["status"], reply.json()["tenant"]) == ("ok", "default")
    checks = reply.json()["checks"]
    assert set(checks) == {"vector_store", "catalog", "keyword_index", "embeddings", "model"}
    assert all(check["status"] == "ok" and check["latency_ms"] >= 0 for check in checks.values())
    assert checks["catalog"]["detail"] == {"chunks": 2, "collections": ["default"]}
    assert checks["vector_store"]["detail"] == {"collections": {"default": 2}}
    assert len(api.model.calls) == 1  # the model probe, for the key's caller only


def test_health_reports_a_down_model(start_api: Callable[..., Api]) -> None:
    def broken(_messages: list[BaseMessage]) -> str:
        raise ConnectionError("endpoint unreachable")

    api = start_api(
        StreamingTaskModel(fallback="", replies={"unknown": broken}), api_keys=f"{HEALTH_KEY}:default"
    )
    assert api.client.get("/api/v1/rag/health").json() == {"status": "up"}  # the stores answer; no model call
    reply = api.client.get("/api/v1/rag/health", headers={"Authorization": f"Bearer {HEALTH_KEY}"})
    assert reply.status_code == 503
    assert reply.json()["status"] == "down"
    checks = reply.json()["checks"]
    assert checks["model"]["status"] == "down"
    # The kind of failure, never the dependency's own text: that is in the server's log only.
    assert checks["model"]["detail"].startswith("ConnectionError")
    assert "endpoint unreachable" not in reply.text
    assert checks["catalog"]["status"] == "ok"


def test_metrics_count_requests_stages_tokens_strategies_and_outcomes(start_api: Callable[..., Api]) -> None:
    api = start_api()
    api.post("/api/v1/rag/generate", {"query": QUESTION})
    api.post("/api/v1/rag/generate", {"query": ""})
    text = api.client.get("/metrics").text
    assert 'rag_requests_total{method="POST",route="/api/v1/rag/generate",status="200"} 1.0' in text
    assert 'rag_requests_total{method="POST",route="/api/v1/rag/generate",status="422"} 1.0' in text
    assert 'rag_stage_latency_seconds_count{stage="generate"} 1.0' in text
    assert 'rag_cache_lookups_total{result="miss"} 1.0' in text
    assert 'rag_answers_total{outcome="success"} 1.0' in text
    assert "rag_strategy_total{strategy=" in text and 'rag_tokens_total{kind="prompt"}' in text


# --- CLI: rag eval load, rag stats, rag delete ------------------------------------------------------------


def test_eval_load_and_stats_read_the_running_server(start_api: Callable[..., Api], tmp_path: Path) -> None:
    api = start_api()
    questions = tmp_path / "questions.jsonl"
    asked = (QUESTION, "Which planet is the largest in the Solar System?", "Unused?")
    questions.write_text("\n".join(json.dumps({"question": q}) for q in asked))
    report = run_load(
        api.base, clients=3, requests=7, questions=2, uncached_requests=2, questions_file=questions
    )
    assert (report["cold"]["requests"], report["load"]["requests"], report["uncached_load"]["requests"]) == (
        2,
        7,
        2,
    )
    assert report["cold"]["errors"] == report["load"]["errors"] == 0 and report["targets"]["zero_errors"]
    assert report["load"]["cache_hits"] + report["load"]["cache_misses"] == 7
    assert report["load"]["p50_ms"] <= report["load"]["p95_ms"]

    env = {"RAG_DATA_DIR": str(api.resources.settings.data_dir)}
    result = CliRunner().invoke(cli_app, ["stats", "--url", api.base, "--json"], env=env)
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    # 2 cold + 2 asked again (cache hits, one at a time) + 7 load + 2 uncached answers
    assert figures["answers"]["success"] == 13 and figures["requests"] >= 13
    assert figures["index"] == {"documents": 2, "chunks": 2}
    assert "generate" in figures["stage_mean_ms"]

    down = CliRunner().invoke(cli_app, ["stats", "--url", "http://127.0.0.1:9"], env=env)
    assert down.exit_code == 1 and "cannot read" in down.stderr


@pytest.mark.parametrize("route", ["stream", "batch"])
def test_eval_load_on_the_stream_and_batch_routes_of_the_real_server(
    start_api: Callable[..., Api], tmp_path: Path, route: str
) -> None:
    api = start_api()
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"question": QUESTION}))
    report = run_load(
        api.base,
        clients=2,
        requests=2,
        questions=1,
        uncached_requests=2,
        questions_file=questions,
        route=route,  # type: ignore[arg-type]
    )
    assert report["targets"]["zero_errors"], report["error_messages"]
    assert report["cold"]["requests"] == 1 and report["uncached_load"]["requests"] == 2
    assert report["cold"]["p50_ms"] is not None and report["route"] == route


def test_rag_delete_removes_a_document(
    start_api: Callable[..., Api], monkeypatch: pytest.MonkeyPatch
) -> None:
    api = start_api()
    kb = api.resources.kb()
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, settings=None: kb))
    source = next(record.source for record in kb.catalog.documents() if record.source.endswith("tea.md"))
    env = {"RAG_DATA_DIR": str(api.resources.settings.data_dir)}
    result = CliRunner().invoke(cli_app, ["delete", "--source", source], env=env)
    assert result.exit_code == 0 and "deleted 1 documents" in result.stdout
    assert all(hit.metadata["source"] != source for hit in Searcher(kb).search("oolong tea brewed", k=5).hits)
    again = CliRunner().invoke(cli_app, ["delete", "--source", source], env=env)
    assert again.exit_code == 2 and "nothing matched" in again.stderr
    assert CliRunner().invoke(cli_app, ["delete"], env=env).exit_code == 2
