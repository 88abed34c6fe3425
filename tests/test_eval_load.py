"""`rag eval load` (evals.load.run_load) against a fake API server: what each phase sends, how answers are
counted as cold, cached or failed, and the errors by status — no engine, no model, and no timings asserted.

Why a fake server: the report's bookkeeping (which request is cold, which a hit, which phase bypasses the
cache, how a 503 or 504 is counted) must be right whatever the engine's speed; tests/test_api.py runs the
benchmark once against the real API.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evals.load import errors_by_status, percentile_or_none, run_load

QUESTIONS = ("How old is the oak?", "Where is the mill?", "Too busy today?", "A slow one?")


class FakeApi:
    """A generate route with a per-question cache: a question asked with use_cache after it was computed
    with use_cache is a hit. Questions naming "busy" answer 503 with Retry-After, "slow" ones 504."""

    def __init__(self, cached: set[str] | None = None) -> None:
        self.cached = set(cached or ())
        self.received: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        question, use_cache = body["query"], body.get("use_cache", True)
        with self.lock:
            self.received.append(body)
            if "busy" in question.lower():
                return 503, {"error": "Busy", "message": "the server is busy", "status": 503}
            if "slow" in question.lower():
                return 504, {"error": "Timeout", "message": "the run took too long", "status": 504}
            hit = use_cache and question in self.cached
            if use_cache:
                self.cached.add(question)
        return 200, {"answer": "An answer [1].", "metadata": {"cache_hit": hit, "total_ms": 1.0}}


@pytest.fixture
def fake_api() -> Iterator[tuple[str, FakeApi]]:
    api = FakeApi()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 503:
                self.send_header("Retry-After", "5")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # http.server's naming (pep8-naming allows do_*)
            self._send(200, {"status": "ok"})

        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            body = json.loads(self.rfile.read(length))
            if self.path.endswith("/batch"):  # one item per batch: its own status inside a 200
                (item,) = body["requests"]
                status, answer = api.answer(item)
                self._send(200, {"results": [{"index": 0, "ok": status == 200, "status": status, **answer}]})
            elif self.path.endswith("/generate/events"):  # SSE: a token, then done (or error + done)
                status, answer = api.answer(body)
                events = [("token", {"text": "An"})] if status == 200 else [("error", answer)]
                events.append(
                    ("done", {"ok": True, **answer} if status == 200 else {"ok": False, "status": status})
                )
                data = "".join(
                    f"event: {name}\ndata: {json.dumps(value)}\n\n" for name, value in events
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self._send(*api.answer(body))

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", api
    server.shutdown()
    thread.join(timeout=10)


def questions_file(tmp_path: Path, questions: tuple[str, ...]) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps({"question": question}) for question in questions), encoding="utf-8")
    return path


def test_phases_cold_then_cached_load_then_uncached_load(
    fake_api: tuple[str, FakeApi], tmp_path: Path
) -> None:
    url, api = fake_api
    report = run_load(
        url,
        clients=3,
        requests=8,
        questions=2,
        uncached_requests=5,
        questions_file=questions_file(tmp_path, QUESTIONS),
        payload={"max_tokens": 64, "use_cache": False},  # the phases decide use_cache, not the caller
    )
    cold, again = api.received[:2], api.received[2:4]
    load, rest = api.received[4:12], api.received[12:]
    assert [body["query"] for body in cold] == [body["query"] for body in again] == list(QUESTIONS[:2])
    assert all(body["use_cache"] is True and body["max_tokens"] == 64 for body in [*cold, *again, *load])
    assert len(rest) == 5 and all(body["use_cache"] is False for body in rest)
    assert report["cold"]["requests"] == 2 and report["cold"]["recomputed_with_cache_bypassed"] == 0
    assert (report["load"]["requests"], report["load"]["cache_hits"], report["load"]["cache_misses"]) == (
        8,
        8,
        0,
    )
    assert report["cache_hit"]["requests"] == 8 and report["uncached_load"]["requests"] == 5
    assert report["cache_hit_alone"]["requests"] == 2 and report["cache_hit_alone"]["misses"] == 0
    assert report["hit_to_cold_p50_ratio"] is not None
    assert report["hit_under_load_to_cold_p50_ratio"] is not None
    assert report["errors_by_status"] == {} and report["targets"]["zero_errors"] is True
    for phase in ("load", "uncached_load"):
        assert report[phase]["throughput_rps"] > 0 and report[phase]["p50_ms"] <= report[phase]["p95_ms"]


def test_a_question_cached_by_an_earlier_run_is_computed_again_for_the_cold_phase(
    fake_api: tuple[str, FakeApi], tmp_path: Path
) -> None:
    url, api = fake_api
    api.cached.add(QUESTIONS[0])  # left in the cache by an earlier benchmark
    report = run_load(
        url,
        clients=2,
        requests=2,
        questions=2,
        uncached_requests=0,
        questions_file=questions_file(tmp_path, QUESTIONS),
    )
    sent = [(body["query"], body["use_cache"]) for body in api.received[:3]]
    assert sent == [(QUESTIONS[0], True), (QUESTIONS[0], False), (QUESTIONS[1], True)]
    assert report["cold"]["requests"] == 2 and report["cold"]["recomputed_with_cache_bypassed"] == 1
    assert report["uncached_load"] is None and len(api.received) == 7  # 3 cold, 2 again, 2 load


def test_errors_are_counted_by_status_and_fail_the_target(
    fake_api: tuple[str, FakeApi], tmp_path: Path
) -> None:
    url, _api = fake_api
    report = run_load(
        url,
        clients=2,
        requests=4,
        questions=4,
        uncached_requests=4,
        questions_file=questions_file(tmp_path, QUESTIONS),
    )
    # "busy" and "slow" each fail once per phase: cold, cache-hit (asked again), load (4 requests over 4
    # questions), uncached load.
    assert report["errors_by_status"] == {"503": 4, "504": 4}
    assert report["cold"]["errors_by_status"] == {"503": 1, "504": 1}
    assert report["load"]["errors"] == 2 and report["uncached_load"]["errors_by_status"] == {
        "503": 1,
        "504": 1,
    }
    assert report["targets"]["zero_errors"] is False
    assert report["error_messages"] == {"the server is busy": 4, "the run took too long": 4}


def test_errors_by_status_names_a_missing_response_0() -> None:
    records = [{"status": 200}, {"status": 0}, {"status": 503}, {"status": 503}]
    assert errors_by_status(records) == {"0": 1, "503": 2}


def test_bad_counts_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="uncached-requests"):
        run_load(
            "http://127.0.0.1:9", uncached_requests=-1, questions_file=questions_file(tmp_path, QUESTIONS)
        )


@pytest.mark.parametrize("route", ["stream", "batch"])
def test_stream_and_batch_routes_count_whole_answers_and_item_errors(
    fake_api: tuple[str, FakeApi], tmp_path: Path, route: str
) -> None:
    url, api = fake_api
    report = run_load(
        url,
        clients=2,
        requests=4,
        questions=3,
        uncached_requests=0,
        questions_file=questions_file(tmp_path, QUESTIONS[:3]),
        route=route,  # type: ignore[arg-type]
    )
    assert report["route"] == route
    # "Too busy today?" fails inside a 200 (the batch item's status, the stream's error + done events).
    assert report["cold"]["errors"] == 1 and report["cold"]["errors_by_status"] == {"503": 1}
    assert report["cache_hit_alone"]["requests"] == 2 and report["cache_hit_alone"]["misses"] == 1
    assert report["load"]["errors"] == 1  # requests 0..3 cycle through 3 questions: the busy one once
    if route == "stream":
        assert report["cold"]["first_token_p50_ms"] is not None
    assert all(body["query"] in QUESTIONS for body in api.received)


def test_an_unknown_route_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--route must be one of generate, stream, batch"):
        run_load("http://127.0.0.1:9", route="sse")  # type: ignore[arg-type]


def test_load_percentiles_are_the_linear_ones_of_every_report() -> None:
    """One percentile definition across the reports (evals.metrics.linear_percentile): 100, 200, 300, 400 ms
    -> p50 at position 3 * 0.5 = 1.5, 200 + 0.5 * 100 = 250 (nearest rank, used before, said 200); p95 at
    3 * 0.95 = 2.85, 300 + 0.85 * 100 = 385 (nearest rank: 400). No answered request: no percentile."""
    times = [400.0, 100.0, 300.0, 200.0]
    assert percentile_or_none(times, 50) == pytest.approx(250.0)
    assert percentile_or_none(times, 95) == pytest.approx(385.0)
    assert percentile_or_none([], 50) is None
