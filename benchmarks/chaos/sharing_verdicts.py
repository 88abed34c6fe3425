"""The sharing suite's attacks and verdicts as pure functions: the documents it uploads, the figures it reads
(metrics, indexing rates, listening ports) and how a response is judged, so they are tested without a
server (benchmarks/chaos/sharing.py runs them)."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from benchmarks.chaos.api_server import ApiServer
from benchmarks.chaos.bounds_verdicts import exchange_verdict
from benchmarks.chaos.http_client import HttpResult, http_request
from benchmarks.chaos.probe import Probe, failed_checks
from benchmarks.chaos.runner import TRACEBACK

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
        # An open server lists its models; one that requires a key answers llama.cpp's JSON error.
        if isinstance(body, dict) and (
            (answer.status == 200 and ("data" in body or "models" in body))
            or (answer.status in (401, 403) and "error" in body)
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
