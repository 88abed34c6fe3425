"""`rag eval load`: the HTTP API under concurrent clients — throughput, latency percentiles, errors (by
status), and cold versus cache-hit latency.

Phases: (1) each question alone, computed, then alone again as a cache hit (like with like); (2) N clients
cycling through the questions, latencies split by `metadata.cache_hit` so a missing cache shows as no hits;
(3) N clients at once with the cache bypassed: the queueing it hides. Targets: 0 errors at 16 clients; a
cache hit within 5% of a cold answer's time (p50 / p50, both alone).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import httpx

from evals.datasets import read_questions
from evals.environment import machine_description
from evals.metrics import linear_percentile

DEFAULT_QUESTIONS = Path(__file__).resolve().parent.parent / "samples" / "questions.jsonl"
GENERATE_ROUTE = "/api/v1/rag/generate"
STREAM_ROUTE = "/api/v1/rag/generate/events"
BATCH_ROUTE = "/api/v1/rag/batch"
LoadRoute = Literal["generate", "stream", "batch"]
LOAD_ROUTES: tuple[LoadRoute, ...] = ("generate", "stream", "batch")


def load_route(name: str) -> LoadRoute:
    """`name` as a load route, or ValueError naming the choices (`--route` read from the command line)."""
    if name in LOAD_ROUTES:
        return name
    raise ValueError(f"--route must be one of {', '.join(LOAD_ROUTES)}, not {name!r}")


#: A client waits this long for one answer (longer than the server's own run limit, so 504s are seen).
CLIENT_TIMEOUT_S = 300
#: The cache-hit target: a hit costs at most this share of a cold answer.
HIT_TARGET_RATIO = 0.05


def percentile_or_none(values: list[float], q: float) -> float | None:
    """evals.metrics.linear_percentile of the values (q in 0..100); None when no request was answered."""
    return linear_percentile(values, q) if values else None


def _one(
    client: httpx.Client, question: str, payload: dict[str, Any], route: LoadRoute = "generate"
) -> dict[str, Any]:
    """Ask one question on `route`; the record's status is 200 only for a whole answer."""
    started = time.perf_counter()
    first_token_s: float | None = None
    request = {"query": question, **payload}
    try:
        if route == "stream":
            status, body, first_token_s = _streamed(client, request, started)
        else:
            url, sent = (
                (BATCH_ROUTE, {"requests": [request]}) if route == "batch" else (GENERATE_ROUTE, request)
            )
            reply = client.post(url, json=sent)
            status, body = reply.status_code, _json_or_empty(reply)
            if route == "batch" and status == 200:
                body = (body.get("results") or [{}])[0]
                status = int(body.get("status", 0))
    except httpx.HTTPError as failure:
        status, body = 0, {"message": f"{type(failure).__name__}: {failure}"}
    seconds = time.perf_counter() - started
    metadata = body.get("metadata") or {}
    error = body.get("message") or (body.get("error") if isinstance(body.get("error"), str) else None)
    return {
        "question": question,
        "status": status,
        "seconds": seconds,
        "first_token_s": first_token_s,
        "cache_hit": bool(metadata.get("cache_hit", False)),
        "server_ms": metadata.get("total_ms"),
        "error": None if status == 200 else error or f"HTTP {status}",
    }


def _streamed(
    client: httpx.Client, request: dict[str, Any], started: float
) -> tuple[int, dict[str, Any], float | None]:
    """POST to the SSE route and read it to its `done` event: (status, done or error payload, first token s).
    A stream that ends without `done`, or whose `done` is not ok, is not an answer (its status, else 0)."""
    first_token_s: float | None = None
    event, done, failure = "", None, None
    with client.stream("POST", STREAM_ROUTE, json=request) as reply:
        if reply.status_code != 200:
            reply.read()
            return reply.status_code, _json_or_empty(reply), None
        for line in reply.iter_lines():
            if line.startswith("event:"):
                event = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data = json.loads(line[len("data:") :].strip() or "{}")
                if event == "token" and first_token_s is None:
                    first_token_s = time.perf_counter() - started
                elif event == "error":
                    failure = data
                elif event == "done":
                    done = data
    if done is not None and done.get("ok"):
        return 200, done, first_token_s
    status = int((done or {}).get("status") or 0)
    return status, failure or done or {"message": "the stream ended without its done event"}, first_token_s


def _json_or_empty(reply: httpx.Response) -> dict[str, Any]:
    try:
        body = reply.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _concurrently(
    base: str,
    clients: int,
    count: int,
    texts: list[str],
    payload: dict[str, Any],
    headers: dict[str, str] | None,
    route: LoadRoute = "generate",
) -> tuple[list[dict[str, Any]], float]:
    """`count` requests from `clients` client threads, cycling through `texts`: (records, wall seconds)."""
    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    counter = iter(range(count))

    def client_loop() -> None:
        with httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT_S, headers=headers) as own:
            while True:
                with lock:
                    index = next(counter, None)
                if index is None:
                    return
                record = _one(own, texts[index % len(texts)], payload, route)
                with lock:
                    records.append(record)

    started = time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(min(clients, count))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return records, time.perf_counter() - started


def errors_by_status(records: list[dict[str, Any]]) -> dict[str, int]:
    """Failed requests per HTTP status ("0" = no response: connection error or client timeout)."""
    return dict(
        sorted(Counter(str(record["status"]) for record in records if record["status"] != 200).items())
    )


def _summary(records: list[dict[str, Any]], wall_s: float | None = None) -> dict[str, Any]:
    ok = [record["seconds"] * 1000 for record in records if record["status"] == 200]
    first_tokens = [
        r["first_token_s"] * 1000 for r in records if r["status"] == 200 and r.get("first_token_s")
    ]
    summary: dict[str, Any] = {
        "requests": len(records),
        "errors": sum(1 for record in records if record["status"] != 200),
        "errors_by_status": errors_by_status(records),
        "p50_ms": _round(percentile_or_none(ok, 50)),
        "p95_ms": _round(percentile_or_none(ok, 95)),
        "mean_ms": _round(statistics.fmean(ok) if ok else None),
    }
    if first_tokens:
        summary["first_token_p50_ms"] = _round(percentile_or_none(first_tokens, 50))
        summary["first_token_p95_ms"] = _round(percentile_or_none(first_tokens, 95))
    if wall_s is not None:
        summary["wall_s"] = round(wall_s, 3)
        summary["throughput_rps"] = round(len(records) / wall_s, 3) if wall_s > 0 else None
    return summary


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _ratio(part: dict[str, Any], whole: dict[str, Any]) -> float | None:
    """part's p50 / whole's p50 (None when either is missing)."""
    if part["p50_ms"] is None or not whole["p50_ms"]:
        return None
    return round(float(part["p50_ms"]) / float(whole["p50_ms"]), 4)


def run_load(
    url: str,
    *,
    clients: int = 16,
    requests: int = 160,
    questions: int = 4,
    uncached_requests: int | None = None,
    questions_file: Path = DEFAULT_QUESTIONS,
    payload: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    route: LoadRoute = "generate",
) -> dict[str, Any]:
    """Run the cold (then cache-hit), load and uncached-load phases against a running API on `route`; return
    the report. `uncached_requests` defaults to `clients` (every client computes one answer at once); 0 skips
    phase 3."""
    uncached = clients if uncached_requests is None else uncached_requests
    texts = _questions_to_ask(questions_file, questions, clients, requests, uncached, route)
    payload = {key: value for key, value in (payload or {}).items() if key != "use_cache"}
    cached, bypass = {**payload, "use_cache": True}, {**payload, "use_cache": False}
    say = progress or (lambda _line: None)
    base = url.rstrip("/")
    cold, recomputed, again = _one_at_a_time(base, headers, texts, cached, bypass, route, say)
    say(f"load phase: {requests} requests from {clients} clients")
    records, wall = _concurrently(base, clients, requests, texts, cached, headers, route)
    fresh: list[dict[str, Any]] = []
    fresh_wall = 0.0
    if uncached:
        say(f"uncached load phase: {uncached} requests from {clients} clients, cache bypassed")
        fresh, fresh_wall = _concurrently(base, clients, uncached, texts, bypass, headers, route)

    hits = [record for record in records if record["status"] == 200 and record["cache_hit"]]
    misses = [record for record in records if record["status"] == 200 and not record["cache_hit"]]
    cold_summary = _summary(cold)
    hit_summary = _summary(hits)
    alone_hits = [record for record in again if record["status"] == 200 and record["cache_hit"]]
    alone_summary = _summary(alone_hits)
    ratio = _ratio(alone_summary, cold_summary)
    everything = [*cold, *again, *records, *fresh]
    return {
        "url": base,
        "route": route,
        "machine": machine_description(),
        "clients": clients,
        "questions": len(texts),
        "payload": payload,
        "cold": {**cold_summary, "recomputed_with_cache_bypassed": recomputed},
        "load": {**_summary(records, wall), "cache_hits": len(hits), "cache_misses": len(misses)},
        "cache_hit_alone": {**alone_summary, "misses": len(again) - len(alone_hits)},
        "cache_hit": hit_summary,
        "uncached_under_load": _summary(misses),
        "uncached_load": _summary(fresh, fresh_wall) if uncached else None,
        "hit_to_cold_p50_ratio": ratio,
        "hit_under_load_to_cold_p50_ratio": _ratio(hit_summary, cold_summary),
        "errors_by_status": errors_by_status(everything),
        "targets": _targets(everything, ratio),
        "error_messages": dict(Counter(record["error"] for record in everything if record["error"])),
    }


def _targets(records: list[dict[str, Any]], hit_to_cold: float | None) -> dict[str, bool | None]:
    """Whether the run met its targets: no failed request, a hit alone within HIT_TARGET_RATIO of a cold
    answer (None when either was never answered)."""
    return {
        "zero_errors": not any(record["status"] != 200 for record in records),
        "hit_within_5_percent_of_cold": None if hit_to_cold is None else hit_to_cold <= HIT_TARGET_RATIO,
    }


def _questions_to_ask(
    questions_file: Path, questions: int, clients: int, requests: int, uncached: int, route: str
) -> list[str]:
    """The first `questions` questions of `questions_file`, once the route and the counts are checked
    (ValueError naming what is wrong)."""
    load_route(route)
    if clients < 1 or requests < 1 or questions < 1 or uncached < 0:
        raise ValueError(
            "--clients, --requests and --questions must be at least 1, --uncached-requests at least 0"
        )
    texts = read_questions(questions_file)[:questions]
    if not texts:
        raise ValueError(f"no questions in {questions_file}")
    return texts


def _one_at_a_time(
    base: str,
    headers: dict[str, str] | None,
    texts: list[str],
    cached: dict[str, Any],
    bypass: dict[str, Any],
    route: LoadRoute,
    say: Callable[[str], None],
) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
    """The cold phase (a question an earlier run cached is computed again with the cache bypassed) and the
    cache-hit phase, one request at a time after a health check: (cold records, recomputed, hit records)."""
    with httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT_S, headers=headers) as client:
        health = client.get("/health")
        if health.status_code != 200:
            raise ConnectionError(f"{base}/health answered {health.status_code}")
        say(f"cold phase: {len(texts)} questions, one at a time")
        cold: list[dict[str, Any]] = []
        recomputed = 0
        for question in texts:
            record = _one(client, question, cached, route)
            if record["status"] == 200 and record["cache_hit"]:  # cached by an earlier run: compute it
                record, recomputed = _one(client, question, bypass, route), recomputed + 1
            cold.append(record)
        say(f"cache-hit phase: {len(texts)} questions again, one at a time")
        again = [_one(client, question, cached, route) for question in texts]
    return cold, recomputed, again
