"""The seeds suite's stream probes: a client leaves each of the seed contract's streams (/query-stream and
/generate/stream) after its first piece of answer, then asks a follow-up on the same conversation. The server
must stay healthy, the left turn must be stored whole or not at all, and the follow-up answered and stored
once (benchmarks/chaos/seeds.py runs them)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.chaos.api_disconnect import disconnect_verdict
from benchmarks.chaos.api_server import API_KEYS, GENERATE, KEY_HEADER, ApiServer
from benchmarks.chaos.corpora import ALPHA
from benchmarks.chaos.http_client import HttpResult, stream_and_leave
from benchmarks.chaos.limits import API_TURN_TIMEOUT_S
from benchmarks.chaos.probe import Probe
from benchmarks.chaos.runner import ChaosRunner
from benchmarks.chaos.seeds_verdicts import GENERATE_STREAM, QUERY, QUERY_STREAM, SUITE, alive
from benchmarks.chaos.threads import thread_messages

#: The event of a piece of the answer in each seed stream (`data: {"type": ...}`), what the client waits for.
TOKEN_MARKERS = {QUERY_STREAM: b'"type": "token"', GENERATE_STREAM: b'"type": "chunk"'}


def left_stream_verdict(
    route: str,
    stream_status: int | None,
    stream_data: bytes,
    messages: list[list[str]],
    follow_up: HttpResult,
    follow_up_question: str,
    left_question: str,
    *,
    healthy: bool,
) -> Probe:
    """A client left `route` mid-answer, then asked a follow-up on the same conversation: the stream had
    started answering, the server is healthy, the left turn is stored whole (with its answer) or not at all,
    and the follow-up is answered and stored once (api_disconnect.disconnect_verdict)."""
    return disconnect_verdict(
        stream_status,
        stream_data,
        messages,
        follow_up,
        follow_up_question,
        left_question,
        token_marker=TOKEN_MARKERS.get(route, b'"type"'),
        healthy=healthy,
        suite=SUITE,
        name=f"client leaves {route} mid-answer: server healthy, turns consistent",
    )


def stream_probes(runner: ChaosRunner, server: ApiServer, data_dir: Path) -> None:
    """Leave each seed stream after its first piece of answer; then a follow-up on the same conversation."""
    headers = {KEY_HEADER: API_KEYS[ALPHA], "Content-Type": "application/json"}
    for route, conversation_key, follow_up_route, left_question, follow_up_question in (
        (
            QUERY_STREAM,
            "conversation_id",
            QUERY,
            "Why is Mars called the red planet?",
            "Is Jupiter bigger than Mars?",
        ),
        (
            GENERATE_STREAM,
            "thread_id",
            GENERATE,
            "What gives the surface of Mars its colour?",
            "Which planet of the Solar System is the largest one?",
        ),
    ):
        conversation = f"seeds-leave-{route.rsplit('/', 1)[-1]}"
        body = json.dumps({"query": left_question, conversation_key: conversation}).encode()
        status, data = stream_and_leave(
            server.port, route, headers, body, until=TOKEN_MARKERS[route], timeout=API_TURN_TIMEOUT_S
        )
        healthy = alive(server)
        follow_up = server.request(
            "POST",
            follow_up_route,
            tenant=ALPHA,
            payload={"query": follow_up_question, conversation_key: conversation},
            timeout=API_TURN_TIMEOUT_S,
        )
        messages = thread_messages(runner, data_dir, conversation, ALPHA)
        runner.record(
            left_stream_verdict(
                route, status, data, messages, follow_up, follow_up_question, left_question, healthy=healthy
            )
        )
