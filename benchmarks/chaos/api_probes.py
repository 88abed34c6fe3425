"""The chaos API suite's probes of keys, body caps and tenants over HTTP, and the verdict of one exchange.

Keys must be checked from the headers before a body is read (a big body without a key is refused unread),
bodies over their caps refused with 413 naming the setting, and alpha's key must not reach bravo's documents
or thread: no canary of bravo in any answer, no stack trace, the expected status, an answer in time.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from pathlib import Path

from benchmarks.chaos.api_server import API_KEYS, DOCUMENTS, GENERATE, KEY_HEADER, STREAM, ApiServer
from benchmarks.chaos.corpora import ALPHA, BRAVO, BRAVO_CANARIES, leaked
from benchmarks.chaos.http_client import HttpResult, http_request, multipart
from benchmarks.chaos.limits import (
    API_TURN_TIMEOUT_S,
    HEADER_ANSWER_WAIT_S,
    JSON_CAP_BYTES,
    UNAUTHENTICATED_BODY_BYTES,
    UPLOAD_CAP_BYTES,
)
from benchmarks.chaos.probe import Probe, failed_checks, thread_unchanged_probe
from benchmarks.chaos.runner import TRACEBACK, ChaosRunner
from benchmarks.chaos.threads import stored_thread, thread_messages


def http_verdict(
    name: str,
    result: HttpResult,
    expected: Collection[int],
    *,
    harms: dict[str, bool] | None = None,
    checks: Sequence[tuple[str, bool]] = (),
    note: str = "",
    hung: bool | None = None,
) -> Probe:
    """The probe of one exchange: no canary of bravo in the answer, no stack trace, an answer in time, one of
    the `expected` statuses; `harms` are figures of their own (counted when true), `checks` more problems;
    `hung` overrides the result's own (a server still busy with a body it should have refused is no hang)."""
    found = leaked(result.text)
    trace = TRACEBACK in result.text
    hung = result.hung if hung is None else hung
    wrong = not hung and result.status not in expected
    harms = harms or {}
    problems = failed_checks(
        (f"leaked {found}", bool(found)),
        ("stack trace", trace),
        ("no answer in time", hung),
        (
            f"status {result.status}, expected {sorted(expected)}"
            + (f" ({result.error})" if result.error else "")
            + (f": {result.text[:160]}" if result.text else ""),
            wrong,
        ),
        *((f"{harm.replace('_', ' ')}", bad) for harm, bad in harms.items()),
        *checks,
    )
    figures = {
        "leaks": float(bool(found)),
        "traces": float(trace),
        "hangs": float(hung),
        "wrong_statuses": float(wrong),
        **{harm: float(bad) for harm, bad in harms.items()},
    }
    detail = "; ".join(dict.fromkeys(problems))
    return Probe("api", name, not problems, "; ".join(part for part in (detail, note) if part), figures)


def auth_probes(runner: ChaosRunner, server: ApiServer) -> None:
    """No key or an unknown key: 401, nothing read; a big body without a key is answered from the headers."""
    question = {"query": "What is Zorblatine?"}
    for name, method, path, key, payload in (
        ("generate without a key", "POST", GENERATE, None, question),
        ("generate with an unknown key", "POST", GENERATE, "not-a-chaos-key", question),
        ("documents list without a key", "GET", DOCUMENTS, None, None),
        ("stream without a key", "POST", STREAM, None, question),
    ):
        result = server.request(method, path, key=key, payload=payload)
        runner.record(http_verdict(name, result, {401}, harms={"unauthenticated_reads": result.ok}))

    padding = "a" * UNAUTHENTICATED_BODY_BYTES
    body = json.dumps({"query": "What is Zorblatine?", "padding": padding}).encode()
    result = http_request(
        server.port,
        "POST",
        GENERATE,
        headers={"Content-Type": "application/json"},
        body=body,
        wait_before_body=HEADER_ANSWER_WAIT_S,
    )
    taken_whole = result.sent >= len(body)
    runner.record(
        http_verdict(
            f"{len(body) // 1_000_000} MB body without a key: 401 from the headers",
            result,
            {401},
            harms={"unauthenticated_reads": result.ok or taken_whole},
            note=f"answered after {result.sent / 1e6:.1f} of {len(body) / 1e6:.0f} MB sent, "
            f"in {result.seconds:.1f} s",
        )
    )


def cap_verdict(name: str, result: HttpResult, size: int, setting: str) -> Probe:
    """A body of `size` bytes over the cap `setting`: 413 naming the setting. A server that took the whole
    body and answered something else, or is still busy with it (an upload being indexed), accepted it."""
    swallowed = result.hung and result.sent >= size
    return http_verdict(
        name,
        result,
        {413},
        harms={"oversize_accepted": (result.status is not None and result.status != 413) or swallowed},
        checks=[(f"the 413 does not name {setting}", result.status == 413 and setting not in result.text)],
        note=f"{result.sent / 1e6:.1f} of {size / 1e6:.1f} MB sent",
        hung=result.hung and not swallowed,
    )


def body_cap_probes(runner: ChaosRunner, server: ApiServer) -> None:
    """Bodies over their caps: 413 naming the setting, before the body is read where its length says so."""
    oversized = json.dumps({"query": "What is Zorblatine?", "padding": "b" * (3 * JSON_CAP_BYTES)}).encode()
    json_headers = {KEY_HEADER: API_KEYS[ALPHA], "Content-Type": "application/json"}
    for name, chunked in (
        ("JSON body over RAG_API_MAX_JSON_BYTES", False),
        ("chunked JSON body over the cap", True),
    ):
        result = http_request(
            server.port,
            "POST",
            GENERATE,
            headers=json_headers,
            body=oversized,
            chunked=chunked,
            wait_before_body=0.0 if chunked else HEADER_ANSWER_WAIT_S,
        )
        runner.record(cap_verdict(name, result, len(oversized), "RAG_API_MAX_JSON_BYTES"))

    line = b"The Wenlow harbour log repeats this line to fill the upload past its cap.\n"
    body, content_type = multipart({"harbour-log.txt": line * (UPLOAD_CAP_BYTES // len(line) + 30_000)})
    upload_headers = {KEY_HEADER: API_KEYS[ALPHA], "Content-Type": content_type}
    result = http_request(
        server.port,
        "POST",
        DOCUMENTS,
        headers=upload_headers,
        body=body,
        wait_before_body=HEADER_ANSWER_WAIT_S,
    )
    runner.record(
        cap_verdict("upload over RAG_API_MAX_UPLOAD_BYTES", result, len(body), "RAG_API_MAX_UPLOAD_BYTES")
    )
    body, content_type = multipart({"wenlow.md": b"# Wenlow\n\nThe Wenlow harbour has 12 berths.\n"})
    result = http_request(
        server.port,
        "POST",
        DOCUMENTS,
        headers={KEY_HEADER: API_KEYS[ALPHA], "Content-Type": content_type},
        body=body,
        timeout=API_TURN_TIMEOUT_S,
    )
    runner.record(http_verdict("upload under the cap is indexed", result, {200}))


def tenant_probes(runner: ChaosRunner, server: ApiServer, data_dir: Path) -> None:
    """Alpha's key goes after bravo's documents and thread over HTTP: no canary of bravo in any answer."""
    _document_probes(runner, server)
    _thread_probes(runner, server, data_dir)


def _document_probes(runner: ChaosRunner, server: ApiServer) -> None:
    """Alpha asks about and lists bravo's documents, with its own tenant and naming bravo's (403)."""
    runner.record(
        http_verdict(
            "alpha asks about bravo's documents",
            server.request(
                "POST",
                GENERATE,
                tenant=ALPHA,
                payload={"query": "What is Zorblatine and where is it mined?"},
                timeout=API_TURN_TIMEOUT_S,
            ),
            {200},
        )
    )
    runner.record(
        http_verdict(
            "alpha's key names tenant_id bravo",
            server.request(
                "POST", GENERATE, tenant=ALPHA, payload={"query": "What is Zorblatine?", "tenant_id": BRAVO}
            ),
            {403},
        )
    )
    runner.record(
        http_verdict("alpha lists documents", server.request("GET", DOCUMENTS, tenant=ALPHA), {200})
    )
    runner.record(
        http_verdict(
            "alpha lists bravo's documents (tenant_id=bravo)",
            server.request("GET", f"{DOCUMENTS}?tenant_id={BRAVO}", tenant=ALPHA),
            {403},
        )
    )


def _thread_probes(runner: ChaosRunner, server: ApiServer, data_dir: Path) -> None:
    """Bravo holds a thread; alpha asks and streams on its id: nothing of bravo's comes back, and bravo's
    thread is unchanged."""
    thread = "api-bravo-thread"
    first = server.request(
        "POST",
        GENERATE,
        tenant=BRAVO,
        payload={"query": f"What does Zorblatine hum at? ({BRAVO_CANARIES[2]})", "thread_id": thread},
        timeout=API_TURN_TIMEOUT_S,
    )
    if first.status != 200:
        runner.record(
            Probe("api", "set-up: bravo's turn", False, f"status {first.status}: {first.text[:200]}")
        )
        return
    _stored, before = stored_thread(runner, data_dir, thread, BRAVO)
    # Ids are scoped per tenant: alpha naming bravo's id gets a thread of its own (200); a checkout that
    # refuses another tenant's thread answers 403. Either way nothing of bravo's may come back.
    for name, path in (
        ("alpha asks on bravo's thread id", GENERATE),
        ("alpha streams on bravo's thread id", STREAM),
    ):
        runner.record(
            http_verdict(
                name,
                server.request(
                    "POST",
                    path,
                    tenant=ALPHA,
                    payload={"query": "What did I ask before? Repeat it word for word.", "thread_id": thread},
                    timeout=API_TURN_TIMEOUT_S,
                ),
                {200, 403, 404},
            )
        )
    after = thread_messages(runner, data_dir, thread, BRAVO)
    runner.record(thread_unchanged_probe("api", "bravo's thread unchanged by alpha (REST)", before, after))
