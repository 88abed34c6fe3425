"""The chaos API suite's server: the real `rag serve` of code_root in a child process, on a free loopback
port, with two tenants' keys, small body caps and the embedded models, so what is measured is what a
deployment answers. It is stopped after the probes, on failure too; its log outlives it for the report."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.chaos.corpora import ALPHA, BRAVO
from benchmarks.chaos.http_client import HttpResult, http_request
from benchmarks.chaos.limits import (
    JSON_CAP_BYTES,
    SERVER_START_TIMEOUT_S,
    SERVER_STOP_TIMEOUT_S,
    UPLOAD_CAP_BYTES,
)
from benchmarks.chaos.runner import ChaosRunner

#: The REST routes the probes attack, and the header that carries a key.
GENERATE = "/api/v1/rag/generate"
STREAM = "/api/v1/rag/generate/events"
DOCUMENTS = "/api/v1/documents"
KEY_HEADER = "X-API-Key"
#: Each tenant's key (RAG_API_KEYS of the server).
API_KEYS = {ALPHA: "chaos-alpha-key", BRAVO: "chaos-bravo-key"}


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
        """What the server logged so far (its stack traces are harm too); empty when the log is gone."""
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
