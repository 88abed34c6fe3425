"""The chaos API suite's disconnect probe: a client closes its stream after the first token. Its turn must
end stored whole (with its answer) or not at all, the thread must stay usable (a follow-up answered and
stored once), and the server must count the client that left (a 499 in /metrics)."""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path

from benchmarks.chaos.api_probes import http_verdict
from benchmarks.chaos.api_server import API_KEYS, GENERATE, KEY_HEADER, STREAM, ApiServer
from benchmarks.chaos.corpora import ALPHA
from benchmarks.chaos.http_client import HttpResult, stream_and_leave
from benchmarks.chaos.limits import API_TURN_TIMEOUT_S
from benchmarks.chaos.probe import Probe, failed_checks
from benchmarks.chaos.runner import ChaosRunner
from benchmarks.chaos.threads import thread_messages, unanswered_questions

#: The Prometheus counter of clients that left before their answer (logged as 499).
DISCONNECT_METRIC = "rag_client_disconnects_total"


def disconnect_verdict(
    stream_status: int | None,
    stream_data: bytes,
    messages: list[list[str]],
    follow_up: HttpResult,
    follow_up_question: str,
    left_question: str,
    *,
    token_marker: bytes = b"event: token",
    healthy: bool = True,
    suite: str = "api",
    name: str = "client leaves mid-stream: its turn completed or rolled back",
) -> Probe:
    """A client left mid-stream (after the stream's first `token_marker`), then a follow-up turn on the same
    thread: the left turn is stored whole (with its answer) or not at all, the follow-up is answered and
    stored once, the thread is not stuck, and the server is `healthy` afterwards."""
    started = stream_status == 200 and token_marker in stream_data
    unanswered = unanswered_questions(messages)
    follow_ups = sum(1 for kind, text in messages if kind == "human" and follow_up_question in text)
    left = sum(1 for kind, text in messages if kind == "human" and left_question in text)
    wrong = not follow_up.hung and follow_up.status != 200
    problems = failed_checks(
        (f"the stream did not reach a token before the client left (status {stream_status})", not started),
        ("the server is unhealthy afterwards (GET /health)", not healthy),
        (f"{unanswered} questions without an answer in the thread", unanswered),
        ("follow-up: no answer in time", follow_up.hung),
        (f"follow-up: status {follow_up.status}: {follow_up.text[:160]}", wrong),
        (f"follow-up stored {follow_ups} times", follow_up.ok and follow_ups != 1),
        (f"the left question stored {left} times", left > 1),
    )
    outcome = "completed" if left else "rolled back"
    figures = {
        "unanswered": float(unanswered),
        "duplicated": float(max(follow_ups - 1, 0) + max(left - 1, 0)),
        "lost": float(follow_up.ok and follow_ups == 0),
        "hangs": float(follow_up.hung),
        "wrong_statuses": float(wrong),
    }
    if not healthy:
        figures["crashes"] = 1.0
    return Probe(
        suite,
        name,
        not problems,
        "; ".join(problems) or f"the left turn was {outcome}",
        figures,
    )


def disconnect_probes(runner: ChaosRunner, server: ApiServer, data_dir: Path) -> None:
    """A client closes its stream after the first token: its turn must end completed or rolled back, the
    thread usable, and the server must count it (a 499 in /metrics)."""
    thread = "api-disconnect-thread"
    left_question = "Which planet is called the red planet?"
    body = json.dumps({"query": left_question, "thread_id": thread}).encode()
    headers = {KEY_HEADER: API_KEYS[ALPHA], "Content-Type": "application/json"}
    status, data = stream_and_leave(
        server.port, STREAM, headers, body, until=b"event: token", timeout=API_TURN_TIMEOUT_S
    )
    follow_up_question = "Is Jupiter the largest planet?"
    follow_up = server.request(
        "POST",
        GENERATE,
        tenant=ALPHA,
        payload={"query": follow_up_question, "thread_id": thread},
        timeout=API_TURN_TIMEOUT_S,
    )
    messages = thread_messages(runner, data_dir, thread, ALPHA)
    runner.record(disconnect_verdict(status, data, messages, follow_up, follow_up_question, left_question))

    metrics = server.request("GET", "/metrics")
    counted = disconnect_count(metrics.text)
    runner.record(
        http_verdict(
            "the disconnect is counted (499) in /metrics",
            metrics,
            {200},
            checks=[(f"{DISCONNECT_METRIC} is {counted}, expected at least 1", counted < 1)],
        )
    )


def disconnect_count(metrics_text: str) -> float:
    """The clients that left before their answer, summed over routes, in a /metrics text (0 when absent)."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith(DISCONNECT_METRIC):
            with suppress(ValueError, IndexError):
                total += float(line.rsplit(maxsplit=1)[1])
    return total
