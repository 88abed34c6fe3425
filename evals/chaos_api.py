"""`rag eval chaos --suite api`: the REST API attacked over real sockets, as a hostile client would.

The server is the real one (`rag serve` of code_root in a child process, on a free loopback port, with two
tenants' keys and the embedded models), so what is measured is what a deployment answers: keys checked from
the headers before a body is read, bodies over their caps refused with 413 naming the setting, tenants kept
apart over HTTP, and a client that leaves mid-stream leaving no half-written turn in its thread.

Why a hand-written HTTP client (raw sockets) rather than an HTTP library: the probes need what libraries
hide, such as sending the headers and waiting for an answer before the body (a server that refuses from the
headers answers without a byte of the body), counting how much of a body the server took before answering,
a Content-Length with a chunked body's absence, and closing a stream in the middle.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals.chaos import (
    ALPHA,
    BRAVO,
    BRAVO_CANARIES,
    BRAVO_DOCS,
    ChaosRunner,
    Probe,
    leaked,
    stored_thread,
    thread_messages,
    unanswered_questions,
    write_files,
)

GENERATE = "/api/v1/rag/generate"
STREAM = "/api/v1/rag/generate/stream"
DOCUMENTS = "/api/v1/documents"
KEY_HEADER = "X-API-Key"
#: Each tenant's key (RAG_API_KEYS of the server).
API_KEYS = {ALPHA: "chaos-alpha-key", BRAVO: "chaos-bravo-key"}
#: Body caps the server runs with (RAG_API_MAX_JSON_BYTES / RAG_API_MAX_UPLOAD_BYTES): small, so the probes
#: send a few MB rather than the defaults' 10 MB / 100 MB; what is probed is that a cap is enforced unread.
JSON_CAP_BYTES = 1_000_000
UPLOAD_CAP_BYTES = 4_000_000
#: Body sent without a key: a server that reads it before refusing takes all of it.
UNAUTHENTICATED_BODY_BYTES = 20_000_000
#: Seconds a client waits after its headers for an answer before it sends the body: a server that decides
#: from the headers (no key, Content-Length over the cap) answers well within this.
HEADER_ANSWER_WAIT_S = 3.0
#: Seconds the server may take to start (it loads the models and measures their speed before it listens).
SERVER_START_TIMEOUT_S = 300.0
#: Seconds the server has to stop after SIGTERM before it is killed.
SERVER_STOP_TIMEOUT_S = 30.0
#: Seconds one answered request may take (real-model turns queue for the single embedded model).
API_TURN_TIMEOUT_S = 300.0
#: Seconds a refusal may take (no model involved).
REFUSAL_TIMEOUT_S = 60.0
#: Bytes written to the socket at a time.
SEND_BLOCK = 1 << 16
TRACEBACK = "Traceback (most recent call last)"
#: The Prometheus counter of clients that left before their answer (logged as 499).
DISCONNECT_METRIC = "rag_client_disconnects_total"


@dataclass
class HttpResult:
    """One HTTP exchange as the client saw it."""

    status: int | None  # None: no answer (refused connection, reset, timeout: see error)
    headers: dict[str, str]
    body: bytes
    seconds: float
    sent: int  # bytes of the request body the server took before it answered
    error: str = ""

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    @property
    def hung(self) -> bool:
        return self.status is None and self.error == "timeout"

    def json(self) -> Any:
        try:
            return json.loads(self.text)
        except ValueError:
            return None


def _chunked(body: bytes) -> bytes:
    """A body in HTTP/1.1 chunked transfer encoding (no Content-Length: the server counts as it reads)."""
    blocks = [body[start : start + SEND_BLOCK] for start in range(0, len(body), SEND_BLOCK)]
    return b"".join(b"%x\r\n%s\r\n" % (len(block), block) for block in blocks) + b"0\r\n\r\n"


def _dechunk(body: bytes) -> bytes:
    """The payload of a chunked response (as much as arrived)."""
    out, rest = b"", body
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            break
        if size == 0:
            break
        out, rest = out + rest[:size], rest[size + 2 :]
    return out


def parse_response(data: bytes) -> tuple[int | None, dict[str, str], bytes, bool]:
    """(status, headers, body, complete) of the bytes of an HTTP response received so far."""
    head, separator, body = data.partition(b"\r\n\r\n")
    if not separator:
        return None, {}, b"", False
    lines = head.decode("latin-1").split("\r\n")
    try:
        status: int | None = int(lines[0].split()[1])
    except (IndexError, ValueError):
        status = None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return status, headers, _dechunk(body), body.endswith(b"0\r\n\r\n")
    length = headers.get("content-length")
    if length is not None and length.isdigit():
        return status, headers, body[: int(length)], len(body) >= int(length)
    return status, headers, body, False


def _ready(sock: socket.socket, events: int, seconds: float) -> int:
    """The events of `events` the socket is ready for within `seconds` (0: none). A selector, not
    select.select: select() refuses descriptors past 1023, which a long-lived process (the test suite) has."""
    with selectors.DefaultSelector() as selector:
        selector.register(sock, events)
        ready = selector.select(max(seconds, 0.0))
    return ready[0][1] if ready else 0


def _readable(sock: socket.socket, seconds: float) -> bool:
    return bool(_ready(sock, selectors.EVENT_READ, seconds))


def _send_until_answered(sock: socket.socket, payload: bytes, deadline: float) -> int:
    """Send `payload`, stopping as soon as the server answers or closes; the bytes it took."""
    view, sent = memoryview(payload), 0
    sock.setblocking(False)
    try:
        while sent < len(view) and time.monotonic() < deadline:
            ready = _ready(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, deadline - time.monotonic())
            if ready & selectors.EVENT_READ:
                break
            if ready & selectors.EVENT_WRITE:
                try:
                    sent += sock.send(view[sent : sent + SEND_BLOCK])
                except BlockingIOError:
                    continue
                except OSError:  # the server closed the connection (reset, broken pipe)
                    break
    finally:
        sock.setblocking(True)
    return sent


def _read_response(sock: socket.socket, deadline: float) -> tuple[bytes, str]:
    """The response's bytes (until complete or the server closes) and an error ('timeout' or the OS's)."""
    data = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return data, "timeout"
        sock.settimeout(remaining)
        try:
            block = sock.recv(SEND_BLOCK)
        except TimeoutError:
            return data, "timeout"
        except OSError as error:
            return data, str(error)
        if not block:
            return data, ""
        data += block
        if parse_response(data)[3]:
            return data, ""


def http_request(
    port: int,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    chunked: bool = False,
    wait_before_body: float = 0.0,
    timeout: float = REFUSAL_TIMEOUT_S,
) -> HttpResult:
    """One request to 127.0.0.1:`port`. With `wait_before_body`, the headers go first and the body only if
    no answer came within that many seconds (so `sent` is 0 for a server that refused from the headers)."""
    started = time.monotonic()
    deadline = started + timeout
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    payload = body
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        payload = _chunked(body)
    elif body or method in ("POST", "PUT"):
        lines.append(f"Content-Length: {len(body)}")
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as error:
        return HttpResult(None, {}, b"", time.monotonic() - started, 0, f"connect: {error}")
    with sock:
        sent = 0
        try:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            if payload and not (wait_before_body and _readable(sock, wait_before_body)):
                sent = _send_until_answered(sock, payload, deadline)
        except OSError:
            pass  # the answer (a refusal) may still be readable
        data, problem = _read_response(sock, deadline)
    status, response_headers, response_body, _complete = parse_response(data)
    return HttpResult(status, response_headers, response_body, time.monotonic() - started, sent, problem)


def stream_and_leave(
    port: int, headers: dict[str, str], body: bytes, *, until: bytes, timeout: float
) -> tuple[int | None, bytes]:
    """POST a streaming request, read its events until `until` arrives (or the stream ends), then close the
    connection in the middle of the stream as a client that gave up would. (status, bytes read)."""
    deadline = time.monotonic() + timeout
    lines = [f"POST {STREAM} HTTP/1.1", f"Host: 127.0.0.1:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        while until not in data and b"event: done" not in data and time.monotonic() < deadline:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                block = sock.recv(SEND_BLOCK)
            except OSError:
                break
            if not block:
                break
            data += block
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    return parse_response(data)[0], data


def multipart(files: dict[str, bytes], fields: dict[str, str] | None = None) -> tuple[bytes, str]:
    """A multipart/form-data body of files (field `files`) and form fields, and its Content-Type."""
    boundary = f"chaos{uuid.uuid4().hex}"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in (fields or {}).items()
    ]
    parts += [
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
        f"Content-Type: text/plain\r\n\r\n".encode()
        + content
        + b"\r\n"
        for filename, content in files.items()
    ]
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ApiServer:
    """A running `rag serve` child."""

    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def request(
        self,
        method: str,
        path: str,
        *,
        tenant: str | None = None,
        key: str | None = None,
        payload: Any = None,
        **options: Any,
    ) -> HttpResult:
        """A request with the key of `tenant` (or `key` as given) and a JSON `payload`."""
        headers = dict(options.pop("headers", None) or {})
        key = API_KEYS[tenant] if tenant else key
        if key:
            headers[KEY_HEADER] = key
        if payload is not None:
            headers["Content-Type"] = "application/json"
            options["body"] = json.dumps(payload).encode()
        return http_request(self.port, method, path, headers=headers, **options)

    def log_text(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, SIGKILL it when it does not stop in time."""
    if process.poll() is not None:
        return
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(SERVER_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def api_server(runner: ChaosRunner, data_dir: Path) -> Iterator[ApiServer]:
    """`rag serve` of code_root on a free loopback port with the chaos keys and caps, ready (its /health
    answers) for the block, and stopped after it, on failure too. RuntimeError (a set-up failure, with the
    end of its log) when it does not start."""
    port = free_port()
    log = runner.work_dir / "api-server.log"
    env = {
        "RAG_API_KEYS": ",".join(f"{key}:{tenant}" for tenant, key in API_KEYS.items()),
        "RAG_API_MAX_JSON_BYTES": str(JSON_CAP_BYTES),
        "RAG_API_MAX_UPLOAD_BYTES": str(UPLOAD_CAP_BYTES),
    }
    args = ["-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    process = runner.spawn(args, data_dir, log=log, extra_env=env)
    server = ApiServer(port, process, log)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"chaos set-up: the API server exited with {process.returncode}: "
                    f"{server.log_text()[-400:]}"
                )
            if http_request(port, "GET", "/health", timeout=5).status == 200:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"chaos set-up: the API server did not answer /health within {SERVER_START_TIMEOUT_S:g} s"
                )
            time.sleep(1.0)
        yield server
    finally:
        _stop(process)


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
    problems = [
        label
        for label, bad in (
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
        if bad
    ]
    figures = {
        "leaks": float(bool(found)),
        "traces": float(trace),
        "hangs": float(hung),
        "wrong_statuses": float(wrong),
        **{harm: float(bad) for harm, bad in harms.items()},
    }
    detail = "; ".join(dict.fromkeys(problems))
    return Probe("api", name, not problems, "; ".join(part for part in (detail, note) if part), figures)


def _ok(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


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
        runner.record(http_verdict(name, result, {401}, harms={"unauthenticated_reads": _ok(result.status)}))

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
            harms={"unauthenticated_reads": _ok(result.status) or taken_whole},
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
    intact = before == after and bool(before)
    runner.record(
        Probe(
            "api",
            "bravo's thread unchanged by alpha (REST)",
            intact,
            "" if intact else f"{len(before)} messages before, {len(after)} after",
            {"leaks": float(not intact)},
        )
    )


def disconnect_verdict(
    stream_status: int | None,
    stream_data: bytes,
    messages: list[list[str]],
    follow_up: HttpResult,
    follow_up_question: str,
    left_question: str,
) -> Probe:
    """A client left mid-stream, then a follow-up turn on the same thread: the left turn is stored whole (with
    its answer) or not at all, the follow-up is answered and stored once, and the thread is not stuck."""
    started = stream_status == 200 and b"event: token" in stream_data
    unanswered = unanswered_questions(messages)
    follow_ups = sum(1 for kind, text in messages if kind == "human" and follow_up_question in text)
    left = sum(1 for kind, text in messages if kind == "human" and left_question in text)
    wrong = not follow_up.hung and follow_up.status != 200
    problems = [
        label
        for label, bad in (
            (
                f"the stream did not reach a token before the client left (status {stream_status})",
                not started,
            ),
            (f"{unanswered} questions without an answer in the thread", unanswered),
            ("follow-up: no answer in time", follow_up.hung),
            (f"follow-up: status {follow_up.status}: {follow_up.text[:160]}", wrong),
            (f"follow-up stored {follow_ups} times", _ok(follow_up.status) and follow_ups != 1),
            (f"the left question stored {left} times", left > 1),
        )
        if bad
    ]
    outcome = "completed" if left else "rolled back"
    return Probe(
        "api",
        "client leaves mid-stream: its turn completed or rolled back",
        not problems,
        "; ".join(problems) or f"the left turn was {outcome}",
        {
            "unanswered": float(unanswered),
            "duplicated": float(max(follow_ups - 1, 0) + max(left - 1, 0)),
            "lost": float(_ok(follow_up.status) and follow_ups == 0),
            "hangs": float(follow_up.hung),
            "wrong_statuses": float(wrong),
        },
    )


def disconnect_probes(runner: ChaosRunner, server: ApiServer, data_dir: Path) -> None:
    """A client closes its stream after the first token: its turn must end completed or rolled back, the
    thread usable, and the server must count it (a 499 in /metrics)."""
    thread = "api-disconnect-thread"
    left_question = "Which planet is called the red planet?"
    body = json.dumps({"query": left_question, "thread_id": thread}).encode()
    headers = {KEY_HEADER: API_KEYS[ALPHA], "Content-Type": "application/json"}
    status, data = stream_and_leave(
        server.port, headers, body, until=b"event: token", timeout=API_TURN_TIMEOUT_S
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


def api_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """Keys, body caps, tenants and disconnects through the real server; then its log holds no stack trace."""
    folder = write_files(runner.work_dir / "corpus" / BRAVO, BRAVO_DOCS)
    runner.ingest(data_dir, folder, BRAVO, "bravo's documents")
    with api_server(runner, data_dir) as server:
        auth_probes(runner, server)
        body_cap_probes(runner, server)
        tenant_probes(runner, server, data_dir)
        disconnect_probes(runner, server, data_dir)
    log = server.log_text()
    traces = log.count(TRACEBACK)
    runner.record(
        Probe(
            "api",
            "server log holds no stack trace",
            traces == 0,
            f"{traces} stack traces, the first ending {first_trace_error(log)!r}" if traces else "",
            {"traces": float(traces)},
        )
    )


def first_trace_error(log: str) -> str:
    """The exception line ending the first stack trace of a log (the report outlives the log's folder)."""
    lines = log[log.find(TRACEBACK) :].splitlines()[1:]
    for line in lines:
        if line and not line.startswith(" "):
            return line[:200]
    return ""
