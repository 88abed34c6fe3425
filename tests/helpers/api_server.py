"""A real uvicorn server of the HTTP API on a loopback port, for tests of the tables, the semantic cache and
the memory routes (the same way tests/test_api.py serves it: over a socket, as deployed).

Why a helper of its own rather than test_api.py's fixture: several test modules need a server, and a
fixture imported from another test module would tie them to that module's other fixtures.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from config.settings import Settings
from service.api.app import create_app

SERVER_START_S = 20


def sse_events(client: httpx.Client, payload: dict[str, Any], **kwargs: Any) -> list[tuple[str, Any]]:
    """The (event, data) pairs of a streamed answer: the engine's own events (POST
    /api/v1/rag/generate/events with `payload`)."""
    events: list[tuple[str, Any]] = []
    with client.stream("POST", "/api/v1/rag/generate/events", json=payload, **kwargs) as reply:
        assert reply.status_code == 200, reply.read()
        name = None
        for line in reply.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and name:
                events.append((name, json.loads(line.split(":", 1)[1].strip())))
                name = None
    return events


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serve_app(app: Any, port: int | None = None, **client_options: object) -> Iterator[httpx.Client]:
    """Serve an ASGI app with uvicorn in a thread on a loopback port and yield a client of it (its
    `base_url` names the port); the server is stopped at the end."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, **client_options)  # type: ignore[arg-type]
    try:
        yield client
    finally:
        client.close()
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def serve(settings: Settings, **client_options: object) -> Iterator[httpx.Client]:
    """Serve `create_app(settings)` (with the process resources installed by the test) and yield a client
    of it; the server is stopped at the end."""
    with serve_app(create_app(settings), **client_options) as client:
        yield client
