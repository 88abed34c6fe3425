"""`rag eval chaos --suite sharing`: what one tenant, or a caller without a key, can learn or spoil through
what the server shares between requests, attacked through the real server (evals/chaos/api_server.py).

- Cache side channel: alpha uploads a large generated document; bravo uploads a copy, then fresh text of the
  same size. A copy indexed much faster than fresh text tells bravo that somebody holds that document.
- /metrics: every response is counted in rag_requests_total (a 500 too), and a batch's invalid item is not
  counted as a failed answer.
- Six concurrent uploads of one file name with different bytes: each answer reports the sha256 of its own
  bytes, and what the tenant can search at the end is the upload reported last as indexed.
- Health without a key: up or down only (no counts, no model call); with a key: only that tenant's chunks.
- No absolute server path (the data folder's, the upload folder's) in any answer.
- The embedded model server: found from the server's process, it must refuse a call without a key.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from evals.chaos.api_server import DOCUMENTS, GENERATE, ApiServer, api_server
from evals.chaos.bounds import (
    BATCH,
    exchange_verdict,
    fresh_data,
    hits_with,
    not_applicable,
    search,
    upload,
)
from evals.chaos.corpora import ALPHA, BRAVO
from evals.chaos.http_client import HttpResult, http_request
from evals.chaos.limits import API_TURN_TIMEOUT_S, REFUSAL_TIMEOUT_S
from evals.chaos.probe import Probe, failed_checks
from evals.chaos.runner import TRACEBACK, ChaosRunner

SUITE = "sharing"
HEALTH = "/api/v1/rag/health"
MEMORIES = "/api/v1/memories"
#: Paragraphs (about one chunk each) of the side channel's generated documents: lower it to run faster.
SIDE_CHANNEL_PARAGRAPHS = 800
#: Words per generated paragraph (about 150 tokens: two never share a 200-token chunk).
PARAGRAPH_WORDS = 110
#: A copy indexed more than this many times faster (chunks per second) than fresh text of the same size
#: tells its uploader that another tenant holds the document.
SIDE_CHANNEL_MAX_RATIO = 2.0
#: Concurrent uploads of one file name, and the words that tell their versions apart in a search.
CONCURRENT_UPLOADS = 6
VERSION_WORDS = ("Amberquill", "Brasswhorl", "Cindermoss", "Duskfallow", "Emberlattice", "Frostgable")
#: Paragraphs of each concurrent version (enough work that the uploads overlap).
VERSION_PARAGRAPHS = 40
#: Seconds between two uploads' answers within which either may be "the last" (the client's clock, not
#: the server's commit order).
LAST_ANSWER_TIE_S = 0.5
SHARED_NAME = "shared-notes.md"
#: Statuses a concurrent upload may get: indexed, or refused as busy.
UPLOAD_STATUSES = frozenset({200, 409, 423, 429, 503})
#: Numbers in a health answer under these keys are store counts (chunks, keyword rows, collections).
COUNT_KEYS = ("chunks", "rows", "collections", "documents")
#: The counter of answered requests and of answers by outcome in /metrics.
REQUESTS_METRIC = "rag_requests_total"
ANSWERS_METRIC = "rag_answers_total"
#: What the embedded model answers to (llama.cpp's OpenAI-compatible routes: the list is public, a chat
#: completion needs the key when one is set).
MODEL_LIST = "/v1/models"
MODEL_CHAT = "/v1/chat/completions"
#: How the server logs the embedded model's address (models/local_llm.py).
MODEL_URL_IN_LOG = re.compile(r"embedded LLM .*? at http://127\.0\.0\.1:(\d+)/v1")
#: Vocabulary of the generated documents.
WORDS = (
    "river stone harbour lantern meadow copper orchard signal timber valley engine ledger window garden "
    "market bridge castle forest island mirror needle pepper quarry rocket saddle tunnel velvet wagon "
    "anchor basket candle desert feather glacier hammer jungle kettle ladder marble nectar oyster pillow "
    "quartz ribbon shadow thunder umbrella violin walnut yarrow zephyr amber breeze cobalt dune ember "
    "falcon granite heron indigo jasper kelp lilac mango nutmeg olive prism quill raven sable tulip "
    "umber vessel willow xenon yonder zinnia archive beacon cipher delta estuary fathom gazette harvest"
).split()


# --- verdicts -----------------------------------------------------------------------------------------------


def generated_document(seed: int, paragraphs: int, words: int = PARAGRAPH_WORDS) -> bytes:
    """A markdown document of `paragraphs` paragraphs of `words` random words each (deterministic for a
    seed; two seeds share no paragraph)."""
    chooser = random.Random(seed)
    lines = [f"# Generated report {seed}"]
    for index in range(paragraphs):
        body = " ".join(chooser.choice(WORDS) for _ in range(words))
        lines.append(f"Paragraph {index} of report {seed}: {body}.")
    return ("\n\n".join(lines) + "\n").encode()


def indexing_rate(result: HttpResult) -> tuple[float, float]:
    """(chunks indexed, chunks per second of the client's wall clock) of an upload's answer."""
    body = result.json()
    chunks = float(body.get("chunks", 0) or 0) if isinstance(body, dict) and result.ok else 0.0
    return chunks, chunks / result.seconds if result.seconds > 0 else 0.0


def side_channel_verdict(original: HttpResult, copy: HttpResult, fresh: HttpResult) -> Probe:
    """Bravo's copy of alpha's document must index about as fast as fresh text of its size: a ratio of the
    chunk rates (copy / fresh) over SIDE_CHANNEL_MAX_RATIO tells bravo that alpha holds it."""
    copy_chunks, copy_rate = indexing_rate(copy)
    fresh_chunks, fresh_rate = indexing_rate(fresh)
    ratio = copy_rate / fresh_rate if fresh_rate > 0 else 0.0
    problems = failed_checks(
        *(
            (f"{what}: status {result.status} {result.text[:120]}", not result.ok)
            for what, result in (
                ("alpha's upload", original),
                ("bravo's copy", copy),
                ("bravo's fresh text", fresh),
            )
        ),
        ("bravo's copy indexed no chunk", copy.ok and copy_chunks == 0),
        (
            f"bravo's copy indexed {ratio:.1f}x as fast as fresh text (over {SIDE_CHANNEL_MAX_RATIO:g}x)",
            ratio > SIDE_CHANNEL_MAX_RATIO,
        ),
    )
    return Probe(
        SUITE,
        "cache side channel: a copy of another tenant's document indexes like fresh text",
        not problems,
        "; ".join(problems)
        or f"copy {copy_rate:.1f} chunks/s, fresh {fresh_rate:.1f} chunks/s ({ratio:.2f}x)",
        {
            "leaks": float(ratio > SIDE_CHANNEL_MAX_RATIO),
            "copy_chunks": copy_chunks,
            "fresh_chunks": fresh_chunks,
            "copy_chunks_per_s": round(copy_rate, 2),
            "fresh_chunks_per_s": round(fresh_rate, 2),
            "side_channel_ratio": round(ratio, 2),
        },
    )


def metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of a /metrics text's samples of `name` whose labels include `labels` (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        head, _, value = line.rpartition(" ")
        if all(f'{key}="{wanted}"' in head for key, wanted in labels.items()):
            with suppress(ValueError):
                total += float(value)
    return total


def counted_requests_verdict(
    name: str, before: str, after: str, sent: Sequence[HttpResult], note: str = ""
) -> Probe:
    """Every request answered between two /metrics reads (the metered ones: not /metrics nor /health) is
    counted once in rag_requests_total."""
    counted = metric_sum(after, REQUESTS_METRIC) - metric_sum(before, REQUESTS_METRIC)
    answered = sum(result.status is not None for result in sent)
    statuses = ", ".join(str(result.status) for result in sent)
    wrong = counted != answered
    return Probe(
        SUITE,
        name,
        bool(before) and bool(after) and not wrong,
        "; ".join(
            failed_checks(
                ("/metrics did not answer", not before or not after),
                (
                    f"{REQUESTS_METRIC} rose by {counted:g} for {answered} answered requests ({statuses})",
                    wrong,
                ),
            )
        )
        or note,
        {"miscounted": float(abs(counted - answered))},
    )


def batch_failures_verdict(before: str, after: str, batch: HttpResult, invalid_index: int) -> Probe:
    """A batch with one invalid item: the item is refused in the batch's answer, the batch answered, and
    rag_answers_total{outcome="failure"} rises only by the valid items that failed (the invalid one is a
    refused request, not a failed answer)."""
    body = batch.json()
    listed = body.get("results") if isinstance(body, dict) else None
    items: list[dict[str, Any]] = [item for item in listed or [] if isinstance(item, dict)]
    invalid: dict[str, Any] = next((item for item in items if item.get("index") == invalid_index), {})
    valid_failed = sum(1 for item in items if item.get("index") != invalid_index and not item.get("ok"))
    failures = metric_sum(after, ANSWERS_METRIC, outcome="failure") - metric_sum(
        before, ANSWERS_METRIC, outcome="failure"
    )
    miscounted = failures - valid_failed
    problems = failed_checks(
        (f"batch: status {batch.status} {batch.text[:120]}", not batch.ok),
        ("/metrics did not answer", not before or not after),
        (f"the invalid item is not refused: {str(invalid)[:120]}", batch.ok and invalid.get("ok", True)),
        (f"failed answers rose by {failures:g} for {valid_failed} failed valid items", miscounted != 0),
    )
    return Probe(
        SUITE,
        "a batch's invalid item is not counted as a failed answer",
        not problems,
        "; ".join(problems),
        {"miscounted": float(abs(miscounted)), "wrong_statuses": float(not batch.ok)},
    )


def sha256_hex(data: bytes) -> str:
    """The sha256 of bytes, as hexadecimal."""
    return hashlib.sha256(data).hexdigest()


def concurrent_uploads_verdict(
    sent: Sequence[bytes], answers: Sequence[tuple[HttpResult, float]], found: set[int]
) -> Probe:
    """Concurrent uploads of one name: each answer that indexed reports the sha256 of its own bytes (anywhere
    in its body), none answers otherwise than indexed or busy, and the version the tenant can search at the
    end is exactly the one reported last as indexed (`answers`: each upload's answer and when it arrived;
    `found`: the versions whose words a search finds)."""
    unreported = [
        index
        for index, (result, _at) in enumerate(answers)
        if result.ok and sha256_hex(sent[index]) not in result.text
    ]
    wrong_status = [
        index for index, (result, _at) in enumerate(answers) if result.status not in UPLOAD_STATUSES
    ]
    indexed = [
        (at, index)
        for index, (result, at) in enumerate(answers)
        if result.ok and isinstance(body := result.json(), dict) and body.get("indexed")
    ]
    last_at = max((at for at, _index in indexed), default=0.0)
    candidates = {index for at, index in indexed if last_at - at <= LAST_ANSWER_TIE_S}
    settled = len(found) == 1 and found <= candidates
    problems = failed_checks(
        (f"uploads {unreported} do not report the sha256 of their bytes", unreported),
        (
            "statuses " + ", ".join(f"{index}: {answers[index][0].status}" for index in wrong_status),
            wrong_status,
        ),
        ("no upload was reported as indexed", not indexed),
        (
            f"the tenant finds versions {sorted(found)}, the last indexed is {sorted(candidates)}",
            bool(indexed) and not settled,
        ),
    )
    return Probe(
        SUITE,
        f"{len(sent)} concurrent uploads of one name: each reports its bytes, the last indexed is searched",
        not problems,
        "; ".join(problems),
        {
            "mixed": float(len(unreported) + (bool(indexed) and not settled)),
            "wrong_statuses": float(len(wrong_status)),
            "traces": float(sum(TRACEBACK in result.text for result, _at in answers)),
        },
    )


def version_document(index: int) -> bytes:
    """Version `index` of the concurrently uploaded file: its own word (VERSION_WORDS) on every line."""
    word = VERSION_WORDS[index]
    notes = (f"Note {line} of version {index} names the {word} mark." for line in range(VERSION_PARAGRAPHS))
    return ("# Shared notes\n\n" + "\n\n".join(notes) + "\n").encode()


def numeric_leaves(value: Any, path: str = "") -> list[tuple[str, float]]:
    """(path, number) of every number in a JSON value (booleans are not numbers here)."""
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in numeric_leaves(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in numeric_leaves(item, f"{path}[{index}]")]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [(path, float(value))]
    return []


def model_was_called(value: Any) -> bool:
    """Whether a health answer shows the chat model was asked: `probed` true, or a model check timed."""
    if isinstance(value, dict):
        model = value.get("model")
        if value.get("probed") is True or (isinstance(model, dict) and "latency_ms" in model):
            return True
        return any(model_was_called(item) for item in value.values())
    if isinstance(value, list):
        return any(model_was_called(item) for item in value)
    return False


def keyless_health_verdict(result: HttpResult) -> Probe:
    """Health without a key: 200, up or down only: no number (counts, latencies) and no model call."""
    body = result.json()
    numbers = numeric_leaves(body)
    called = model_was_called(body)
    return exchange_verdict(
        SUITE,
        "health without a key: up or down only",
        result,
        {200},
        harms={"leaks": bool(numbers), "unauthenticated_reads": called},
        checks=[
            (
                "the answer is not a JSON object with a status",
                not (isinstance(body, dict) and "status" in body),
            )
        ],
        note=f"numbers shown: {', '.join(path for path, _ in numbers[:6])}" if numbers else "",
    )


def tenant_health_verdict(result: HttpResult, tenant_chunks: int, total_chunks: int) -> Probe:
    """Health with alpha's key: every count it shows is alpha's chunk count (at least one shown), never the
    store's total over tenants."""
    counts = [
        (path, number)
        for path, number in numeric_leaves(result.json())
        if path.rsplit(".", 1)[-1] in COUNT_KEYS
    ]
    others = [(path, number) for path, number in counts if number != tenant_chunks]
    return exchange_verdict(
        SUITE,
        "health with alpha's key: only alpha's chunk count",
        result,
        {200},
        harms={"leaks": bool(others)},
        checks=[(f"no chunk count of alpha's ({tenant_chunks}) shown", result.ok and not counts)],
        note=(
            f"counts {', '.join(f'{path}={number:g}' for path, number in others[:4])}; alpha has "
            f"{tenant_chunks} chunks, all tenants {total_chunks}"
            if others
            else ""
        ),
    )


def server_paths(data_dir: Path) -> list[str]:
    """The absolute server paths no answer may show: the data folder's and its upload folder's (as given and
    resolved)."""
    paths = {
        str(data_dir),
        str(data_dir.resolve()),
        str(data_dir / "uploads"),
        str(data_dir.resolve() / "uploads"),
    }
    return sorted(paths, key=len, reverse=True)


def path_leak_verdict(name: str, result: HttpResult, paths: Sequence[str], expected: set[int]) -> Probe:
    """An answer that shows none of the server's absolute `paths` (JSON escapes the slashes of none of them,
    so the raw text is searched as well as its decoded form)."""
    text = result.text.replace("\\/", "/")
    shown = [path for path in paths if path in text]
    return exchange_verdict(
        SUITE,
        f"no server path in: {name}",
        result,
        expected,
        harms={"leaks": bool(shown)},
        note=f"shows {shown[0]}" if shown else "",
    )


def listening_ports(pid: int) -> set[int]:
    """The TCP ports the processes of `pid`'s process group listen on (from /proc; empty elsewhere)."""
    inodes: set[str] = set()
    for proc in Path("/proc").glob("[0-9]*"):
        with suppress(OSError, ValueError, IndexError):
            stat = (proc / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[2]) != pid:  # the process group
                continue
            for fd in (proc / "fd").iterdir():
                with suppress(OSError):
                    target = str(fd.readlink())
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def model_server_port(server: ApiServer) -> tuple[int | None, str]:
    """The embedded model server's port and how it was found: the server's log line, else the one listening
    port of the server's processes (other than the API's) that answers llama.cpp's model list."""
    logged = MODEL_URL_IN_LOG.findall(server.log_text())
    if logged:
        return int(logged[-1]), "its log line"
    for port in sorted(listening_ports(server.process.pid) - {server.port}):
        answer = http_request(port, "GET", MODEL_LIST, timeout=10)
        body = answer.json()
        if (
            answer.status in (200, 401, 403)
            and isinstance(body, dict)
            and ("data" in body or "models" in body)
        ):
            return port, "the server process's listening sockets"
    return None, ""


def model_server_verdict(result: HttpResult, port: int, how: str) -> Probe:
    """The embedded model server called without a key: 401 or 403 (anything answered is a free model call
    for whoever reaches the loopback port)."""
    return exchange_verdict(
        SUITE,
        "embedded model server without a key: refused",
        result,
        {401, 403},
        harms={"unauthenticated_reads": result.ok},
        note=f"port {port} (found from {how})",
    )


# --- the suite ----------------------------------------------------------------------------------------------


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
