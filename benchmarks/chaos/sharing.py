"""`python -m benchmarks chaos --suite sharing`: what one tenant, or a caller without a key, can learn or
spoil through what the server shares between requests, attacked through the real server
(benchmarks/chaos/api_server.py).

- Cache side channel: alpha uploads a large generated document; bravo uploads a copy, then fresh text of
the same size. A copy indexed much faster than fresh text tells bravo that somebody holds that document.
- /metrics: every response is counted in rag_requests_total (a 500 too), and a batch's invalid item is
not counted as a failed answer. - Six concurrent uploads of one file name with different bytes: each
answer reports the sha256 of its own bytes, and what the tenant can search at the end is the upload
reported last as indexed. - Health without a key: up or down only (no counts, no model call); with a key:
only that tenant's chunks. - No absolute server path (the data folder's, the upload folder's) in any
answer. - The embedded model server: found from the server's process, it must refuse a call without a
key."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.chaos.api_server import DOCUMENTS, GENERATE, ApiServer, api_server
from benchmarks.chaos.bounds import fresh_data, search, upload
from benchmarks.chaos.bounds_verdicts import BATCH, hits_with, not_applicable
from benchmarks.chaos.corpora import ALPHA, BRAVO
from benchmarks.chaos.http_client import HttpResult, http_request
from benchmarks.chaos.limits import API_TURN_TIMEOUT_S, REFUSAL_TIMEOUT_S
from benchmarks.chaos.probe import Probe
from benchmarks.chaos.runner import ChaosRunner
from benchmarks.chaos.sharing_verdicts import (
    CONCURRENT_UPLOADS,
    HEALTH,
    MEMORIES,
    MODEL_CHAT,
    SHARED_NAME,
    SIDE_CHANNEL_PARAGRAPHS,
    SUITE,
    VERSION_WORDS,
    batch_failures_verdict,
    concurrent_uploads_verdict,
    counted_requests_verdict,
    generated_document,
    keyless_health_verdict,
    model_server_port,
    model_server_verdict,
    path_leak_verdict,
    server_paths,
    side_channel_verdict,
    tenant_health_verdict,
    version_document,
)


def timed_upload(server: ApiServer, tenant: str, name: str, data: bytes) -> HttpResult:
    """An upload of one file, waited for as long as an answer may take."""
    return upload(server, tenant, {name: data}, timeout=API_TURN_TIMEOUT_S)


def side_channel_probe(runner: ChaosRunner, server: ApiServer, paragraphs: int) -> list[HttpResult]:
    """Alpha uploads a generated document; bravo a copy of it, then fresh text of its size."""
    document = generated_document(1, paragraphs)
    original = timed_upload(server, ALPHA, "annual-report.md", document)
    copy = timed_upload(server, BRAVO, "annual-report.md", document)
    fresh = timed_upload(server, BRAVO, "fresh-report.md", generated_document(2, paragraphs))
    runner.record(side_channel_verdict(original, copy, fresh))
    return [original, copy, fresh]


def metrics_probes(runner: ChaosRunner, server: ApiServer) -> list[HttpResult]:
    """A request that still answers 500 (if one does) and a batch with an invalid item, judged by /metrics."""
    candidates: Sequence[tuple[str, Callable[[], HttpResult]]] = (
        ("a 23-digit memory id", lambda: server.request("DELETE", f"{MEMORIES}?id={'9' * 23}", tenant=ALPHA)),
        ("a 304-character file name", lambda: upload(server, ALPHA, {"m" * 301 + ".md": b"# M\n\nm\n"})),
    )
    before = server.request("GET", "/metrics").text
    sent: list[HttpResult] = []
    for what, attack in candidates:
        sent.append(attack())
        if sent[-1].status == 500:
            note = f"{what} answered 500"
            break
    else:
        note = "no candidate answers 500 any more: " + ", ".join(str(result.status) for result in sent)
    after = server.request("GET", "/metrics").text
    runner.record(
        counted_requests_verdict("/metrics counts every response (a 500 too)", before, after, sent, note)
    )

    before = after
    payload = {
        "requests": [{"query": "Which planet is the largest?"}, {"query": "Which planet?", "top_k": 0}]
    }
    batch = server.request("POST", BATCH, tenant=ALPHA, payload=payload, timeout=API_TURN_TIMEOUT_S)
    after = server.request("GET", "/metrics").text
    runner.record(batch_failures_verdict(before, after, batch, invalid_index=1))
    runner.record(counted_requests_verdict("/metrics counts the batch request once", before, after, [batch]))
    return [*sent, batch]


def concurrent_upload_probe(runner: ChaosRunner, server: ApiServer) -> list[HttpResult]:
    """Six uploads of one file name with different bytes at once, as alpha; then which one is searchable."""
    versions = [version_document(index) for index in range(CONCURRENT_UPLOADS)]
    answers: list[tuple[HttpResult, float]] = [(HttpResult(None, {}, b"", 0.0, 0, "not run"), 0.0)] * len(
        versions
    )
    start = threading.Barrier(len(versions))

    def send(index: int) -> None:
        start.wait()
        result = timed_upload(server, ALPHA, SHARED_NAME, versions[index])
        answers[index] = (result, time.monotonic())

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(versions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = {
        index
        for index, word in enumerate(VERSION_WORDS[: len(versions)])
        if hits_with(search(server, ALPHA, word), word)
    }
    runner.record(concurrent_uploads_verdict(versions, answers, found))
    return [result for result, _at in answers]


def health_probes(runner: ChaosRunner, server: ApiServer) -> list[HttpResult]:
    """Health without a key, and with alpha's key against alpha's and all tenants' chunk counts."""
    keyless = server.request("GET", HEALTH, timeout=REFUSAL_TIMEOUT_S)
    runner.record(keyless_health_verdict(keyless))
    counts = {}
    for tenant in (ALPHA, BRAVO):
        listing = server.request("GET", DOCUMENTS, tenant=tenant).json()
        documents = listing.get("documents", []) if isinstance(listing, dict) else []
        counts[tenant] = sum(int(document.get("chunks", 0) or 0) for document in documents)
    keyed = server.request("GET", HEALTH, tenant=ALPHA, timeout=REFUSAL_TIMEOUT_S)
    runner.record(tenant_health_verdict(keyed, counts[ALPHA], sum(counts.values())))
    return [keyless, keyed]


def path_probes(runner: ChaosRunner, server: ApiServer, data_dir: Path, seen: Sequence[HttpResult]) -> None:
    """The answers that name documents (list, search, generate's sources, a failed upload) and every answer
    the suite got, searched for the server's absolute paths."""
    paths = server_paths(data_dir)
    checks: list[tuple[str, HttpResult, set[int]]] = [
        ("GET /api/v1/documents", server.request("GET", DOCUMENTS, tenant=ALPHA), {200}),
        ("POST /api/v1/search", search(server, ALPHA, "Jupiter planet", mode="hybrid"), {200}),
        (
            "generate's sources",
            server.request(
                "POST",
                GENERATE,
                tenant=ALPHA,
                payload={"query": "Which planet is red?"},
                timeout=API_TURN_TIMEOUT_S,
            ),
            {200},
        ),
        (
            "a failed upload's reasons",
            upload(server, ALPHA, {"broken.pdf": b"%PDF-1.4 this is not a PDF"}),
            set(range(400, 500)) | {200},
        ),
    ]
    for name, result, expected in checks:
        runner.record(path_leak_verdict(name, result, paths, expected))
    shown = [result for result in seen if any(path in result.text.replace("\\/", "/") for path in paths)]
    runner.record(
        Probe(
            SUITE,
            f"no server path in any other answer of the suite ({len(seen)})",
            not shown,
            f"{len(shown)} answers show one, the first: {shown[0].text[:160]}" if shown else "",
            {"leaks": float(len(shown))},
        )
    )


def model_server_probe(runner: ChaosRunner, server: ApiServer) -> None:
    """Call the embedded model server without a key (not applicable when its port cannot be found)."""
    port, how = model_server_port(server)
    if port is None:
        runner.record(
            not_applicable(
                SUITE,
                "embedded model server without a key: refused",
                "no port found (no log line, and no other listening port of the server answers a model list)",
            )
        )
        return
    body = {"messages": [{"role": "user", "content": "Reply with OK."}], "max_tokens": 1}
    result = http_request(
        port,
        "POST",
        MODEL_CHAT,
        headers={"Content-Type": "application/json"},
        body=json.dumps(body).encode(),
        timeout=API_TURN_TIMEOUT_S,
    )
    runner.record(model_server_verdict(result, port, how))


def sharing_suite(runner: ChaosRunner, data_dir: Path, paragraphs: int | None = None) -> None:
    """Health, the cache side channel, /metrics, concurrent uploads, server paths and the model server's key,
    through the real server, over data of its own (alpha's and bravo's documents)."""
    del data_dir  # an earlier suite may have damaged the shared store: this one measures its own
    data_dir = fresh_data(runner, "sharing")
    with api_server(runner, data_dir) as server:
        seen = health_probes(runner, server)
        model_server_probe(runner, server)
        seen += side_channel_probe(
            runner, server, SIDE_CHANNEL_PARAGRAPHS if paragraphs is None else paragraphs
        )
        seen += metrics_probes(runner, server)
        seen += concurrent_upload_probe(runner, server)
        path_probes(runner, server, data_dir, seen)
