"""Fairness between tenants under load: one tenant floods the API while another asks its questions.

What it measures: bravo asks QUESTIONS questions one after another, first alone, then while alpha keeps
FLOOD_CLIENTS clients asking at once; the figure is bravo's median latency flooded / alone (the target is
at most TARGET_RATIO) and whether alpha still got every answer. The API is the product's own: `rag serve`
in a subprocess on 127.0.0.1 (of this checkout, or of another with --checkout, to measure the code before
a change), reaching its model through the OpenAI-compatible endpoint path (RAG_LLM_PROVIDER=openai). The
model is a stand-in served here on loopback: every chat call holds HOLD_S seconds without using a CPU
(asyncio sleep) and answers one fixed cited sentence; embeddings are hashed bags of words, at once. So the
figure is about scheduling (worker slots, model places), not about the machine's speed.

Three configurations: "endpoint" (no model gate: the endpoint serves calls in parallel; only the run slots
are shared), "one_model_place" (RAG_API_MODEL_CONCURRENCY=1, the embedded model's gate: one call at a time)
and "two_model_places". With one place and a tenant that never stops asking, a fair gate that never leaves
the model idle still makes each of bravo's calls wait for the alpha call that took the place as bravo's
previous call ended: about 2x is the fair share there, not a scheduling fault. Every loop is bounded
(questions per client, request timeouts, an overall deadline); the servers stop at the end.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

#: Seconds every stand-in chat call holds before it answers.
HOLD_S = 0.5
#: bravo's questions, asked one after another in each phase.
QUESTIONS = 8
#: alpha's concurrent clients in the flooded phase, and the questions each asks at most.
FLOOD_CLIENTS = 20
FLOOD_QUESTIONS_PER_CLIENT = 40
#: bravo's flooded median latency over its median alone, at most (the fairness target).
TARGET_RATIO = 1.5
#: Seconds alpha floods before bravo starts asking (its clients all queued by then).
FLOOD_WARMUP_S = 2.0
#: Seconds one request may take, the API may take to start, and the whole benchmark may take.
REQUEST_TIMEOUT_S = 300.0
SERVER_START_S = 120.0
DEADLINE_S = 1800.0
#: Dimensions of the stand-in's hashed embeddings.
EMBEDDING_DIMS = 64
STANDIN_REPLY = "Jupiter is the largest planet in the Solar System [1]."
TENANT_KEYS = {"alpha": "alpha-key", "bravo": "bravo-key"}
DOCUMENT = (
    "# Planets\n\nJupiter is the largest planet in the Solar System. Saturn has the most visible rings.\n\n"
    "Mars is called the red planet. Venus is the hottest planet. Mercury is closest to the Sun."
)
BRAVO_QUESTIONS = (
    "Which planet is the largest in the Solar System?",
    "Which planet has the most visible rings?",
    "Which planet is called the red planet?",
    "Which planet is the hottest?",
    "Which planet is closest to the Sun?",
    "What is the largest planet?",
    "Which planet has rings?",
    "Which planet is red?",
)
ALPHA_QUESTION = "Which planet is the largest in the Solar System? (alpha {client}-{index})"
#: The configurations: name -> RAG_API_MODEL_CONCURRENCY (0: the endpoint is not gated).
CONFIGURATIONS = {"endpoint": 0, "one_model_place": 1, "two_model_places": 2}
REPO_ROOT = Path(__file__).resolve().parents[1]


def hashed_embedding(text: str) -> list[float]:
    """A bag of words hashed into EMBEDDING_DIMS buckets, unit length (retrieval still ranks by words)."""
    vector = [0.0] * EMBEDDING_DIMS
    for word in text.lower().split():
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % EMBEDDING_DIMS] += 1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


def standin_app(hold_s: float) -> FastAPI:
    """The stand-in endpoint: chat completions that hold `hold_s` seconds, embeddings at once."""
    app = FastAPI()
    app.state.calls = 0

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        app.state.calls += 1
        await asyncio.sleep(hold_s)
        model = body.get("model", "standin")
        if body.get("stream"):
            return StreamingResponse(_chunks(model), media_type="text/event-stream")
        message = {"role": "assistant", "content": STANDIN_REPLY}
        return {
            "id": "standin",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for index, text in enumerate(texts):
            encoded: Any = hashed_embedding(str(text))
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(np.asarray(encoded, dtype=np.float32).tobytes()).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        return {
            "object": "list",
            "data": data,
            "model": "standin",
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    return app


async def _chunks(model: str) -> AsyncIterator[str]:
    for index, word in enumerate(STANDIN_REPLY.split(" ")):
        delta = {"content": word if index == 0 else f" {word}"}
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}  # fmt: skip
        yield f"data: {json.dumps(chunk)}\n\n"
    last = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}  # fmt: skip
    yield f"data: {json.dumps(last)}\n\n"
    yield "data: [DONE]\n\n"


def free_port() -> int:
    """A loopback port nobody listens on now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def standin_endpoint(hold_s: float) -> Iterator[str]:
    """Serve the stand-in with uvicorn in a thread; yield its base URL (…/v1)."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(standin_app(hold_s), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the stand-in endpoint did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def api_environment(endpoint: str, data_dir: Path, model_places: int, checkout: Path) -> dict[str, str]:
    """The API's environment: no RAG_* of the caller, the stand-in as model and embeddings, two tenants."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAG_")}
    return env | {
        "PYTHONPATH": str(checkout),
        "RAG_DATA_DIR": str(data_dir),
        "RAG_LLM_PROVIDER": "openai",
        "RAG_LLM_BASE_URL": endpoint,
        "RAG_LLM_API_KEY": "standin",
        "RAG_LLM_MODEL": "standin",
        "RAG_EMBEDDING_PROVIDER": "openai",
        "RAG_EMBEDDING_BASE_URL": endpoint,
        "RAG_EMBEDDING_API_KEY": "standin",
        "RAG_CACHE_ENABLED": "false",  # every question runs its graph
        "RAG_API_KEYS": ",".join(f"{key}:{tenant}" for tenant, key in TENANT_KEYS.items()),
        "RAG_API_MODEL_CONCURRENCY": str(model_places),
        "RAG_API_HEALTH_MODEL_PROBE": "false",
    }


@contextmanager
def api_server(env: dict[str, str], checkout: Path, log: Path) -> Iterator[str]:
    """`rag serve` of `checkout` in a subprocess on a loopback port; yield its base URL; stopped after."""
    port = free_port()
    command = [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("w") as output:
        process = subprocess.Popen(command, cwd=checkout, env=env, stdout=output, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"rag serve exited ({process.returncode}): {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base}/metrics", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"rag serve did not start within {SERVER_START_S:g} s")
            time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def ask(client: httpx.Client, tenant: str, question: str) -> tuple[int, float]:
    """(status, seconds) of one /generate for `tenant` (status 0: no answer within REQUEST_TIMEOUT_S)."""
    started = time.perf_counter()
    try:
        reply = client.post(
            "/api/v1/rag/generate", json={"query": question}, headers={"X-API-Key": TENANT_KEYS[tenant]}
        )
        status = reply.status_code
    except httpx.HTTPError:
        status = 0
    return status, time.perf_counter() - started


@dataclass
class Flood:
    """alpha's clients: each asks until told to stop (or FLOOD_QUESTIONS_PER_CLIENT); statuses kept."""

    base: str
    clients: int
    statuses: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, number: int) -> None:
        with httpx.Client(base_url=self.base, timeout=REQUEST_TIMEOUT_S) as http:
            for index in range(FLOOD_QUESTIONS_PER_CLIENT):
                if self.stop.is_set():
                    return
                status, _ = ask(http, "alpha", ALPHA_QUESTION.format(client=number, index=index))
                with self._lock:
                    self.statuses.append(status)

    @contextmanager
    def running(self) -> Iterator[None]:
        threads = [threading.Thread(target=self.client, args=(n,), daemon=True) for n in range(self.clients)]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            self.stop.set()
            for thread in threads:
                thread.join(REQUEST_TIMEOUT_S)


def bravo_latencies(base: str, questions: int) -> tuple[list[float], list[int]]:
    """bravo's questions one after another: (seconds, statuses)."""
    seconds, statuses = [], []
    with httpx.Client(base_url=base, timeout=REQUEST_TIMEOUT_S) as http:
        for index in range(questions):
            status, took = ask(http, "bravo", BRAVO_QUESTIONS[index % len(BRAVO_QUESTIONS)])
            seconds.append(took)
            statuses.append(status)
    return seconds, statuses


def upload_corpus(base: str) -> None:
    """The same small document into each tenant (through the upload route)."""
    for tenant, key in TENANT_KEYS.items():
        reply = httpx.post(
            f"{base}/api/v1/documents",
            files={"files": ("planets.md", DOCUMENT.encode(), "text/markdown")},
            headers={"X-API-Key": key},
            timeout=REQUEST_TIMEOUT_S,
        )
        if reply.status_code != 200:
            raise RuntimeError(f"upload for {tenant} failed: {reply.status_code} {reply.text[:300]}")


def measure(
    name: str, model_places: int, checkout: Path, hold_s: float, questions: int, clients: int
) -> dict[str, Any]:
    """One configuration: bravo alone, then bravo while alpha floods (after one unmeasured question of each
    tenant)."""
    with tempfile.TemporaryDirectory(prefix="rag-fairness-") as scratch, standin_endpoint(hold_s) as endpoint:
        env = api_environment(endpoint, Path(scratch) / "data", model_places, checkout)
        with api_server(env, checkout, Path(scratch) / "serve.log") as base:
            upload_corpus(base)
            for tenant in TENANT_KEYS:  # the first run of a process opens its stores: not measured
                with httpx.Client(base_url=base, timeout=REQUEST_TIMEOUT_S) as http:
                    ask(http, tenant, BRAVO_QUESTIONS[0])
            alone, alone_statuses = bravo_latencies(base, questions)
            flood = Flood(base, clients)
            started = time.perf_counter()
            with flood.running():
                time.sleep(FLOOD_WARMUP_S)
                flooded, flooded_statuses = bravo_latencies(base, questions)
            flood_s = time.perf_counter() - started
    alone_p50, flooded_p50 = statistics.median(alone), statistics.median(flooded)
    ratio = flooded_p50 / alone_p50 if alone_p50 else float("inf")
    return {
        "configuration": name,
        "RAG_API_MODEL_CONCURRENCY": model_places,
        "bravo_alone_s": [round(s, 3) for s in alone],
        "bravo_flooded_s": [round(s, 3) for s in flooded],
        "bravo_alone_p50_s": round(alone_p50, 3),
        "bravo_flooded_p50_s": round(flooded_p50, 3),
        "ratio_p50": round(ratio, 3),
        "meets_target": ratio <= TARGET_RATIO,
        "bravo_all_answered": all(s == 200 for s in alone_statuses + flooded_statuses),
        "alpha_asked": len(flood.statuses),
        "alpha_answered": sum(1 for s in flood.statuses if s == 200),
        "alpha_all_answered": bool(flood.statuses) and all(s == 200 for s in flood.statuses),
        "alpha_statuses": sorted({str(s): flood.statuses.count(s) for s in set(flood.statuses)}.items()),
        "alpha_answers_per_s": round(flood.statuses.count(200) / flood_s, 3) if flood_s else 0.0,
    }


def run_fairness(
    checkout: Path = REPO_ROOT,
    hold_s: float = HOLD_S,
    questions: int = QUESTIONS,
    clients: int = FLOOD_CLIENTS,
    configurations: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Every configuration in turn (each with its own server and data), within DEADLINE_S."""
    from evals.environment import machine_description

    started = time.monotonic()
    results = []
    for name, places in (configurations or CONFIGURATIONS).items():
        if time.monotonic() - started > DEADLINE_S:
            results.append({"configuration": name, "skipped": f"past the {DEADLINE_S:g} s deadline"})
            continue
        results.append(measure(name, places, checkout, hold_s, questions, clients))

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", *arguments], cwd=checkout, capture_output=True, text=True, check=False
        ).stdout.strip()

    return {
        "benchmark": "fairness",
        "model": "standin",
        "hold_s": hold_s,
        "questions": questions,
        "flood_clients": clients,
        "target_ratio": TARGET_RATIO,
        "checkout": str(checkout),
        "commit": git("rev-parse", "HEAD"),
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
        "api_settings": "the checkout's defaults, but RAG_API_MODEL_CONCURRENCY per configuration",
        "machine": machine_description(),
        "results": results,
        "seconds": round(time.monotonic() - started, 1),
    }
