"""`langgraph dev` in a subprocess, started on a copy of the project and always stopped: for the tests of the
LangGraph server (tests/test_langgraph_server.py, test_langgraph_sdk.py, test_storage_bounds.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.api_server import free_port

#: Seconds `langgraph dev` may take to answer /ok (it is about 5 s here; the machine may be busy).
SERVER_START_TIMEOUT = 90
#: Folders of the project not needed by the server (or not to be copied at all).
COPY_IGNORE = shutil.ignore_patterns(
    ".venv", ".git", ".rag", ".langgraph_api", "__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache"
)


def request(url: str, payload: dict[str, Any] | None = None, timeout: float = 10) -> Any:
    """GET (or POST `payload` as JSON) and decode the JSON reply."""
    data = None if payload is None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    call = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(call, timeout=timeout) as reply:
        return json.loads(reply.read())


@contextmanager
def langgraph_dev(project: Path, env: dict[str, str], log_path: Path) -> Iterator[str]:
    """`langgraph dev` in `project` with exactly `env` (plus no analytics or version check); yields its base
    URL once /ok answers. Always stopped after, its log's tail in the failure when it does not start."""
    langgraph = Path(sys.executable).parent / "langgraph"
    if not langgraph.exists():
        pytest.fail(f"langgraph CLI not installed at {langgraph}: pip install -e '.[server]'")
    port = free_port()
    env = env | {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true"}
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [str(langgraph), "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload"]
            + ["--config", "langgraph.json"],
            cwd=project,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopping it stops its workers too
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if server.poll() is not None:
                pytest.fail(f"langgraph dev exited with {server.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                if request(f"{base}/ok", timeout=2).get("ok") is True:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                log_tail = log_path.read_text()[-4000:]
                pytest.fail(f"langgraph dev did not answer /ok in {SERVER_START_TIMEOUT}s:\n{log_tail}")
            time.sleep(0.5)
        yield base
    finally:
        stop(server)


def environment_without_settings() -> dict[str, str]:
    """This process's environment without any RAG_ variable (the server gets exactly the settings given)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("RAG_")}


def stop(server: subprocess.Popen[bytes]) -> None:
    """Terminate the server's process group; kill it if it does not stop within 15 s."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
