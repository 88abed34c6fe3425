"""`rag eval load`: the HTTP API under concurrent clients — throughput, latency percentiles, errors, and cold
versus cache-hit latency.

Two phases, and why:
1. cold: each distinct question once, one at a time, so every answer is computed (and cached) with the
   machine to itself — the cold latency is the engine's real cost per answer;
2. load: N clients send M requests in total, cycling through the same questions, as fast as answers come
   back. Repeated questions are what a semantic cache serves; the report splits this phase's latencies by the
   response's `metadata.cache_hit`, so a missing or bypassed cache shows as zero hits, not as a fast engine.
Targets (issue 9): 0 errors at 16 clients; a cache hit in at most 5% of a cold answer's time.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from evals.environment import machine_description

DEFAULT_QUESTIONS = Path(__file__).resolve().parent.parent / "samples" / "questions.jsonl"
GENERATE_ROUTE = "/api/v1/rag/generate"
#: A client waits this long for one answer (longer than the server's own run limit, so 504s are seen).
CLIENT_TIMEOUT_S = 300
#: The cache-hit target: a hit costs at most this share of a cold answer.
HIT_TARGET_RATIO = 0.05


def load_questions(path: Path, limit: int) -> list[str]:
    """The first `limit` questions of a JSONL file with a "question" field."""
    questions = [
        json.loads(line)["question"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    if not questions:
        raise ValueError(f"no questions in {path}")
    return questions[:limit]


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def _one(client: httpx.Client, question: str, payload: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        reply = client.post(GENERATE_ROUTE, json={"query": question, **payload})
        status = reply.status_code
        body = reply.json() if reply.headers.get("content-type", "").startswith("application/json") else {}
    except httpx.HTTPError as error:
        status, body = 0, {"message": f"{type(error).__name__}: {error}"}
    seconds = time.perf_counter() - started
    metadata = body.get("metadata") or {}
    return {
        "question": question,
        "status": status,
        "seconds": seconds,
        "cache_hit": bool(metadata.get("cache_hit", False)),
        "server_ms": metadata.get("total_ms"),
        "error": None if status == 200 else body.get("message") or f"HTTP {status}",
    }


def _summary(records: list[dict[str, Any]], wall_s: float | None = None) -> dict[str, Any]:
    ok = [record["seconds"] * 1000 for record in records if record["status"] == 200]
    summary: dict[str, Any] = {
        "requests": len(records),
        "errors": sum(1 for record in records if record["status"] != 200),
        "p50_ms": _round(percentile(ok, 0.5)),
        "p95_ms": _round(percentile(ok, 0.95)),
        "mean_ms": _round(statistics.fmean(ok) if ok else None),
    }
    if wall_s is not None:
        summary["wall_s"] = round(wall_s, 3)
        summary["throughput_rps"] = round(len(records) / wall_s, 3) if wall_s > 0 else None
    return summary


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def run_load(
    url: str,
    *,
    clients: int = 16,
    requests: int = 160,
    questions: int = 4,
    questions_file: Path = DEFAULT_QUESTIONS,
    payload: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the cold phase then the load phase against a running API; return the report."""
    if clients < 1 or requests < 1 or questions < 1:
        raise ValueError("--clients, --requests and --questions must be at least 1")
    texts = load_questions(questions_file, questions)
    payload = dict(payload or {})
    say = progress or (lambda _line: None)
    base = url.rstrip("/")
    with httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT_S, headers=headers) as client:
        health = client.get("/health")
        if health.status_code != 200:
            raise ConnectionError(f"{base}/health answered {health.status_code}")
        say(f"cold phase: {len(texts)} questions, one at a time")
        cold = [_one(client, question, payload) for question in texts]

    say(f"load phase: {requests} requests from {clients} clients")
    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    counter = iter(range(requests))

    def client_loop() -> None:
        with httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT_S, headers=headers) as own:
            while True:
                with lock:
                    index = next(counter, None)
                if index is None:
                    return
                record = _one(own, texts[index % len(texts)], payload)
                with lock:
                    records.append(record)

    started = time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started

    hits = [record for record in records if record["status"] == 200 and record["cache_hit"]]
    misses = [record for record in records if record["status"] == 200 and not record["cache_hit"]]
    cold_summary = _summary(cold)
    hit_summary = _summary(hits)
    ratio = (
        round(hit_summary["p50_ms"] / cold_summary["p50_ms"], 4)
        if hit_summary["p50_ms"] is not None and cold_summary["p50_ms"]
        else None
    )
    errors: dict[str, int] = {}
    for record in [*cold, *records]:
        if record["error"]:
            errors[record["error"]] = errors.get(record["error"], 0) + 1
    return {
        "url": base,
        "machine": machine_description(),
        "clients": clients,
        "questions": len(texts),
        "payload": payload,
        "cold": cold_summary,
        "load": {**_summary(records, wall), "cache_hits": len(hits), "cache_misses": len(misses)},
        "cache_hit": hit_summary,
        "uncached_under_load": _summary(misses),
        "hit_to_cold_p50_ratio": ratio,
        "targets": {
            "zero_errors": _summary(records)["errors"] == 0 and cold_summary["errors"] == 0,
            "hit_within_5_percent_of_cold": None if ratio is None else ratio <= HIT_TARGET_RATIO,
        },
        "error_messages": errors,
    }
