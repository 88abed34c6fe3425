"""`python -m benchmarks chaos --suite seeds`: the seed contract's routes and the memory routes attacked as a
hostile client would, through the real server (benchmarks/chaos/api_server.py, keys mapping to tenants alpha
and bravo).

- Keys: every seed route (/api/v1/rag/query, /query-stream, /generate, /generate/stream, /batch), every memory
  route and the conversation summary route, without a key and with a wrong one: 401, nothing read.
- Bodies over RAG_API_MAX_JSON_BYTES on every seed route and on POST /api/v1/memories: 413 naming the setting,
  nothing stored; bad JSON, wrong types, missing fields, a malformed memory id: 422 naming the field, never a
  500; a batch of 51 questions (either batch body): 422.
- Another tenant's memories and another conversation's memories and summaries
  (benchmarks/chaos/seeds_memory.py): no canary of theirs in any answer or stream event, bravo's memories
  intact afterwards.
- Streams: a client leaving /query-stream and /generate/stream mid-answer leaves the server healthy and the
  conversation's stored turns consistent (benchmarks/chaos/seeds_streams.py).
- At the end the server's log holds no stack trace.

The routes and the verdicts of one exchange are benchmarks/chaos/seeds_verdicts.py.

The probes judge what the HTTP contract promises (statuses, bodies, events, what a later request sees), never
how memories are stored: the store behind the routes may change without the probes changing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.chaos.api_server import API_KEYS, GENERATE, KEY_HEADER, ApiServer, api_server
from benchmarks.chaos.bounds_verdicts import batch_item
from benchmarks.chaos.corpora import ALPHA, ALPHA_DOCS, write_files
from benchmarks.chaos.http_client import HttpResult, http_request
from benchmarks.chaos.limits import HEADER_ANSWER_WAIT_S, JSON_CAP_BYTES, REFUSAL_TIMEOUT_S
from benchmarks.chaos.probe import Probe
from benchmarks.chaos.runner import ChaosRunner, last_json
from benchmarks.chaos.seeds_memory import MemoryProbes
from benchmarks.chaos.seeds_streams import stream_probes
from benchmarks.chaos.seeds_verdicts import (
    BATCH,
    CAP_CANARY,
    GENERATE_STREAM,
    JSON_CAP_SETTING,
    MEMORIES,
    OVERSIZED_BATCH,
    PLANET_QUESTION,
    QUERY,
    QUERY_STREAM,
    SUITE,
    SUMMARIZE,
    UNKNOWN_MEMORY_ID,
    alive,
    auth_verdict,
    cap_refusal_verdict,
    log_verdict,
    nothing_stored_verdict,
    validation_verdict,
)
from benchmarks.chaos.threads import THREAD_MESSAGES_SNIPPET, stored_ids

# --- requests -----------------------------------------------------------------------------------------------


#: The seed contract's question routes, each a JSON POST.
SEED_ROUTES = (QUERY, QUERY_STREAM, GENERATE, GENERATE_STREAM, BATCH)


def seed_routes(question: str, conversation: str) -> dict[str, dict[str, Any]]:
    """Each seed route (a JSON POST) and a valid body of it asking `question` on `conversation`."""
    return {
        QUERY: {"query": question, "conversation_id": conversation},
        QUERY_STREAM: {"query": question, "conversation_id": conversation},
        GENERATE: {"query": question, "thread_id": conversation},
        GENERATE_STREAM: {"query": question, "thread_id": conversation},
        BATCH: {"queries": [{"query": question, "conversation_id": conversation}]},
    }


def keyed_routes(memory_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    """(method, path, JSON body) of every route that needs a key: the seed routes, the memory routes (on a
    real memory's id: a read without a key would read it) and the summary route."""
    routes: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", path, body) for path, body in seed_routes(PLANET_QUESTION, "seeds-keyless").items()
    ]
    routes += [
        ("POST", MEMORIES, {"text": "A note sent without a valid key."}),
        ("GET", MEMORIES, None),
        ("GET", f"{MEMORIES}/search?query=vault", None),
        ("GET", f"{MEMORIES}/{memory_id}", None),
        ("DELETE", f"{MEMORIES}/{memory_id}", None),
        ("DELETE", f"{MEMORIES}?id={memory_id}", None),
        ("DELETE", f"{MEMORIES}?all=true", None),
        ("POST", SUMMARIZE.format(thread="seeds-keyless"), {}),
    ]
    return routes


def bad_bodies() -> list[tuple[str, str, bytes, str | None]]:
    """(what, path, raw body, the field its 422 must name) of bodies no route may answer with a 500."""
    cases: list[tuple[str, str, bytes, str | None]] = []
    for path in (QUERY, QUERY_STREAM, GENERATE, GENERATE_STREAM, BATCH, MEMORIES):
        cases.append(("JSON that does not parse", path, b'{"query": "Which planet', None))
        cases.append(("a JSON array for an object", path, b"[1, 2, 3]", None))
    for path in (QUERY, QUERY_STREAM, GENERATE, GENERATE_STREAM):
        cases += [
            ("a number for the query", path, b'{"query": 42}', "query"),
            ("text for top_k", path, b'{"query": "Which planet?", "top_k": "many"}', "top_k"),
            ("no query", path, b'{"top_k": 3}', "query"),
        ]
    cases += [
        ("text for the queries", BATCH, b'{"queries": "Which planet?"}', "queries"),
        ("a number as a batch question", BATCH, b'{"queries": [{"query": 7}]}', "query"),
        ("no questions", BATCH, b"{}", "requests"),
        ("a number for the text", MEMORIES, b'{"text": 5}', "text"),
        ("no text", MEMORIES, b'{"kind": "note"}', "text"),
    ]
    return cases


def post_raw(server: ApiServer, path: str, body: bytes, tenant: str = ALPHA) -> HttpResult:
    """POST a raw body as JSON with `tenant`'s key."""
    return server.request(
        "POST",
        path,
        tenant=tenant,
        headers={"Content-Type": "application/json"},
        body=body,
        timeout=REFUSAL_TIMEOUT_S,
    )


# --- probes -------------------------------------------------------------------------------------------------


def auth_probes(runner: ChaosRunner, server: ApiServer, memory_id: str) -> None:
    """Every keyed route without a key and with a wrong key: 401."""
    for method, path, body in keyed_routes(memory_id):
        for how, key in (("without a key", None), ("with a wrong key", "not-a-seeds-key")):
            result = server.request(method, path, key=key, payload=body, timeout=REFUSAL_TIMEOUT_S)
            runner.record(auth_verdict(f"{method} {path.split('?')[0]} {how}: 401", result))


def cap_probes(runner: ChaosRunner, server: ApiServer, data_dir: Path) -> None:
    """A body three times the JSON cap on every seed route and on POST /api/v1/memories (one of them
    chunked, counted as it arrives): 413 naming the setting; then nothing of them stored."""
    padding = "c" * (3 * JSON_CAP_BYTES)
    headers = {KEY_HEADER: API_KEYS[ALPHA], "Content-Type": "application/json"}
    conversations = [f"seeds-cap-{index}" for index in range(len(SEED_ROUTES) + 1)]
    targets = [
        (path, {**seed_routes(f"{CAP_CANARY}?", conversation)[path], "padding": padding}, False)
        for path, conversation in zip(SEED_ROUTES, conversations, strict=False)
    ]
    targets.append(
        (QUERY, {**seed_routes(f"{CAP_CANARY}?", conversations[-1])[QUERY], "padding": padding}, True)
    )
    targets.append((MEMORIES, {"text": f"{CAP_CANARY} {padding}"}, False))
    for path, body, chunked in targets:
        raw = json.dumps(body).encode()
        result = http_request(
            server.port,
            "POST",
            path,
            headers=headers,
            body=raw,
            chunked=chunked,
            wait_before_body=0.0 if chunked else HEADER_ANSWER_WAIT_S,
        )
        how = "chunked body" if chunked else "body"
        runner.record(cap_refusal_verdict(f"{path}: {how} over {JSON_CAP_SETTING}: 413", result, len(raw)))
    stored = stored_messages(runner, data_dir, ALPHA, conversations)
    memories = server.request("GET", MEMORIES, tenant=ALPHA, timeout=REFUSAL_TIMEOUT_S)
    runner.record(nothing_stored_verdict("nothing of the oversized bodies stored", stored, memories))


def stored_messages(runner: ChaosRunner, data_dir: Path, tenant: str, threads: list[str]) -> list[list[str]]:
    """The stored messages of the first of a tenant's `threads` that holds any (none: nothing stored on any),
    read in one child (benchmarks/chaos/threads.py's reader, given every thread's stored ids)."""
    ids = [stored_id for thread in threads for stored_id in stored_ids(thread, tenant)]
    result = runner.python_snippet(data_dir, THREAD_MESSAGES_SNIPPET.replace("THREAD_IDS", repr(ids)))
    found = last_json(result.stdout)
    return list(found.get("messages") or []) if isinstance(found, dict) else []


def validation_probes(runner: ChaosRunner, server: ApiServer) -> None:
    """Bad JSON, wrong types, missing fields, a malformed memory id, bad query parameters and batches of 51:
    422 naming the field, never a 500."""
    for what, path, body, field in bad_bodies():
        result = post_raw(server, path, body)
        if path == BATCH and result.ok:  # the batch answered: its one item carries the refusal
            result, what = batch_item(result), f"{what} (its item)"
        runner.record(validation_verdict(f"{path}: {what}: 422", result, field))
    for what, path, field in (
        ("a malformed memory id", f"{MEMORIES}/not-an-id", "id"),
        ("a search without a query", f"{MEMORIES}/search", "query"),
        ("text for k", f"{MEMORIES}/search?query=vault&k=many", "k"),
        ("a limit of 0", f"{MEMORIES}?limit=0", "limit"),
    ):
        result = server.request("GET", path, tenant=ALPHA, timeout=REFUSAL_TIMEOUT_S)
        runner.record(validation_verdict(f"GET {path}: {what}: 422", result, field))
    result = server.request("DELETE", f"{MEMORIES}?id=not-an-id", tenant=ALPHA, timeout=REFUSAL_TIMEOUT_S)
    runner.record(validation_verdict("DELETE a malformed memory id: 422", result, "id"))
    batches: dict[str, list[Any]] = {
        "queries": [PLANET_QUESTION] * OVERSIZED_BATCH,
        "requests": [{"query": PLANET_QUESTION}] * OVERSIZED_BATCH,
    }
    for field, items in batches.items():
        result = server.request(
            "POST", BATCH, tenant=ALPHA, payload={field: items}, timeout=REFUSAL_TIMEOUT_S
        )
        runner.record(validation_verdict(f"{BATCH}: {OVERSIZED_BATCH} {field}: 422", result, field))


def seeds_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """Keys, caps, bad input, memory isolation between tenants and conversations, and clients leaving
    mid-stream, through the real server over data of its own; then its log holds no stack trace."""
    del data_dir  # an earlier suite may have damaged the shared store: this one measures its own
    root = runner.work_dir / "seeds"
    data_dir = root / "rag"
    runner.ingest(data_dir, write_files(root / "corpus" / ALPHA, ALPHA_DOCS), ALPHA, "alpha's documents")
    with api_server(runner, data_dir) as server:
        memory = MemoryProbes(runner, server, data_dir)
        bravo_ids = memory.plant()
        auth_probes(runner, server, bravo_ids[0] if bravo_ids else UNKNOWN_MEMORY_ID)
        cap_probes(runner, server, data_dir)
        validation_probes(runner, server)
        if bravo_ids:
            memory.attack_tenants()
        memory.attack_conversations()
        stream_probes(runner, server, data_dir)
        if bravo_ids:
            memory.check_intact()
        healthy = alive(server)
        runner.record(
            Probe(
                SUITE, "server alive at the end (GET /health)", healthy, "", {"crashes": float(not healthy)}
            )
        )
    runner.record(log_verdict(server.log_text()))
