"""The chaos API suite's HTTP client, written on raw sockets.

Why not an HTTP library: the probes need what libraries hide, such as sending the headers and waiting for an
answer before the body (a server that refuses from the headers answers without a byte of the body), counting
how much of a body the server took before answering, a Content-Length with a chunked body's absence, and
closing a stream in the middle.
"""

from __future__ import annotations

import json
import selectors
import socket
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from benchmarks.chaos.limits import REFUSAL_TIMEOUT_S, SEND_BLOCK


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
        """The body as text (undecodable bytes replaced: a hostile answer is judged, not trusted)."""
        return self.body.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """A 2xx answer: the server did what was asked."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def hung(self) -> bool:
        """No answer before the deadline (as opposed to a refused or reset connection)."""
        return self.status is None and self.error == "timeout"

    def json(self) -> Any:
        """The body as JSON; None when it is not JSON."""
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
    """Whether the socket has something to read (an answer, or the server closing) within `seconds`."""
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


def _request_head(port: int, method: str, path: str, headers: dict[str, str], *framing: str) -> bytes:
    """A request's line and headers to 127.0.0.1:`port`: the `framing` ones (Connection, Content-Length or
    Transfer-Encoding), then the caller's."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *framing]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


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
    framing = ["Connection: close"]
    payload = body
    if chunked:
        framing.append("Transfer-Encoding: chunked")
        payload = _chunked(body)
    elif body or method in ("POST", "PUT"):
        framing.append(f"Content-Length: {len(body)}")
    head = _request_head(port, method, path, headers or {}, *framing)
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as error:
        return HttpResult(None, {}, b"", time.monotonic() - started, 0, f"connect: {error}")
    with sock:
        sent = 0
        try:
            sock.sendall(head)
            if payload and not (wait_before_body and _readable(sock, wait_before_body)):
                sent = _send_until_answered(sock, payload, deadline)
        except OSError:
            pass  # the answer (a refusal) may still be readable
        data, problem = _read_response(sock, deadline)
    status, response_headers, response_body, _complete = parse_response(data)
    return HttpResult(status, response_headers, response_body, time.monotonic() - started, sent, problem)


def stream_and_leave(
    port: int, path: str, headers: dict[str, str], body: bytes, *, until: bytes, timeout: float
) -> tuple[int | None, bytes]:
    """POST a streaming request to `path`, read its events until `until` arrives (or the stream ends), then
    close the connection in the middle of the stream as a client that gave up would. (status, bytes read)."""
    deadline = time.monotonic() + timeout
    head = _request_head(port, "POST", path, headers, f"Content-Length: {len(body)}")
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + body)
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
