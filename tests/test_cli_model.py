"""`rag model serve`: argument checks, the model it picks, and the settings it prints, without a real model.

Why a stub server: loading even the smallest catalog model costs seconds of a shared CPU, and what this
command adds over models/local_llm.py (already exercised by the embedded-model tests) is the checks before
the start, the address and key it passes on, the lines it prints and the clean stop. The stub records what
it was given; `wait_until_stopped` is replaced so the command returns at once, except in the one test that
sends the process a real SIGTERM.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from config.settings import load_settings
from models import local_catalog
from models.errors import ModelUnavailableError
from models.factory import resolve_spec
from service.cli import app
from service.cli import model as model_cli
from tests.conftest import REPO_ROOT

runner = CliRunner()


class StubServer:
    """Stands in for LocalLLMServer: records its arguments, 'listens' where it was asked, never loads."""

    instances: list[StubServer] = []
    fail_with: Exception | None = None

    def __init__(self, model_path: Path, **kwargs: Any) -> None:
        self.model_path = model_path
        self.kwargs = kwargs
        self.load_seconds: float | None = None
        self.started = self.stopped = False
        StubServer.instances.append(self)

    def start(self) -> None:
        if StubServer.fail_with is not None:
            raise StubServer.fail_with
        self.started = True
        self.load_seconds = 1.25

    @property
    def base_url(self) -> str:
        port = self.kwargs["port"] or 43210  # port 0: the "free port" the stub was given
        return f"http://{self.kwargs['host']}:{port}/v1"

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> type[StubServer]:
    """The stub server in place of llama.cpp's, every catalog model but Gemma installed, no waiting."""
    StubServer.instances = []
    StubServer.fail_with = None
    monkeypatch.setattr("models.local_llm.LocalLLMServer", StubServer)
    monkeypatch.setattr(local_catalog, "find_model_file", lambda name: Path(f"/models/{name}.gguf"))
    monkeypatch.setattr(local_catalog, "is_installed", lambda name: name != "gemma3-270m")
    monkeypatch.setattr(model_cli, "wait_until_stopped", lambda: None)
    return StubServer


def serve(*args: str) -> Any:
    return runner.invoke(app, ["model", "serve", *args])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def exported(output: str) -> dict[str, str]:
    """The `export NAME=value` lines of the output, as the shell would read them."""
    pairs = [shlex.split(line)[1] for line in output.splitlines() if line.startswith("export ")]
    return dict(pair.split("=", 1) for pair in pairs)


# --- what it prints -------------------------------------------------------------------------------------


def test_serves_the_named_model_and_prints_the_engine_settings(stub: type[StubServer]) -> None:
    port = free_port()
    result = serve("--model", "qwen2.5-coder-1.5b", "--port", str(port), "--threads", "3", "--ctx", "4096")
    assert result.exit_code == 0, result.output + result.stderr
    server = stub.instances[0]
    assert server.model_path == Path("/models/qwen2.5-coder-1.5b.gguf") and server.started and server.stopped
    assert server.kwargs["host"] == "127.0.0.1" and server.kwargs["port"] == port
    assert (server.kwargs["threads"], server.kwargs["n_ctx"], server.kwargs["alias"]) == (
        3,
        4096,
        "qwen2.5-coder-1.5b",
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    assert f"serving qwen2.5-coder-1.5b at {base_url}" in result.output
    assert exported(result.output) == {
        "RAG_LLM_PROVIDER": "openai",
        "RAG_LLM_BASE_URL": base_url,
        "RAG_LLM_MODEL": "qwen2.5-coder-1.5b",
    }
    assert result.output.rstrip().endswith("stopped")


def test_the_printed_lines_configure_the_engine(
    stub: type[StubServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Set exactly as printed, the lines make the engine's settings valid and its generator the endpoint."""
    result = serve("--model", "qwen2.5-coder-1.5b", "--port", str(free_port()))
    assert result.exit_code == 0, result.output + result.stderr
    for name, value in exported(result.output).items():
        monkeypatch.setenv(name, value)
    spec = resolve_spec(load_settings())
    assert (spec.provider, spec.model) == ("openai", "qwen2.5-coder-1.5b")
    assert spec.base_url == stub.instances[0].base_url


def test_defaults_serve_the_strongest_installed_model_with_the_settings_threads_and_context(
    stub: type[StubServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        local_catalog, "is_installed", lambda name: name in ("smollm2-135m", "qwen2.5-coder-0.5b")
    )
    monkeypatch.setenv("RAG_LOCAL_THREADS", "1")
    monkeypatch.setenv("RAG_LOCAL_N_CTX", "2048")
    result = serve("--port", "0")
    assert result.exit_code == 0, result.output + result.stderr
    server = stub.instances[0]
    assert server.kwargs["alias"] == "qwen2.5-coder-0.5b"
    assert (server.kwargs["threads"], server.kwargs["n_ctx"]) == (1, 2048)
    assert model_cli.DEFAULT_PORT == 8080  # the documented default when --port is not given


def test_an_api_key_is_required_by_the_server_and_printed_for_the_engine(
    stub: type[StubServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(model_cli.API_KEY_ENV, "s3cret key")
    result = serve("--port", str(free_port()))
    assert result.exit_code == 0, result.output + result.stderr
    assert stub.instances[0].kwargs["api_key"] == "s3cret key"
    assert exported(result.output)["RAG_LLM_API_KEY"] == "s3cret key"


def test_a_remote_host_needs_allow_remote(stub: type[StubServer]) -> None:
    refused = serve("--host", "0.0.0.0")
    assert refused.exit_code == 2 and stub.instances == []
    assert refused.stderr.strip() == (
        "error: --host 0.0.0.0 is reachable from other machines: add --allow-remote (and --api-key) "
        "to serve it"
    )
    allowed = serve("--host", "0.0.0.0", "--port", str(free_port()), "--allow-remote")
    assert allowed.exit_code == 0, allowed.output + allowed.stderr
    assert stub.instances[0].kwargs["host"] == "0.0.0.0"
    assert exported(allowed.output)["RAG_LLM_BASE_URL"].startswith("http://127.0.0.1:")  # reachable here


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True), ("0.0.0.0", False)]
    + [("192.168.1.5", False), ("::", False), ("example.org", False)],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert model_cli.is_loopback(host) is loopback


# --- one-line errors ------------------------------------------------------------------------------------


def one_error_line(result: Any) -> str:
    assert result.exit_code == 2, result.output + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output + result.stderr, lines
    return lines[0]


def test_an_unknown_model_names_the_catalog(stub: type[StubServer]) -> None:
    line = one_error_line(serve("--model", "llama-70b"))
    assert line.startswith("error: unknown model 'llama-70b': choose one of ")
    assert all(name in line for name in local_catalog.CATALOG) and stub.instances == []


def test_a_model_not_installed_names_the_install_command(stub: type[StubServer]) -> None:
    line = one_error_line(serve("--model", "gemma3-270m"))
    assert "gemma3-270m is not installed" in line
    assert line.endswith("-m models.local_catalog install gemma3-270m`") and stub.instances == []


def test_no_model_installed_names_the_strongest_to_install(
    stub: type[StubServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_catalog, "is_installed", lambda name: False)
    line = one_error_line(serve())
    assert line.endswith("-m models.local_catalog install qwen2.5-coder-1.5b`")


def test_a_busy_port_is_refused_before_loading(stub: type[StubServer]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_error_line(serve("--port", str(port)))
    assert (
        line == f"error: port {port} on 127.0.0.1 is in use: stop what listens there or pick another --port"
    )
    assert stub.instances == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "error: --port 70000 is not a port (0-65535)"),
        (["--threads", "0"], "error: --threads 0 must be at least 1"),
        (["--ctx", "100"], "error: --ctx 100 must be at least 512"),
    ],
)
def test_bad_numbers(stub: type[StubServer], args: list[str], message: str) -> None:
    assert one_error_line(serve(*args)) == message


def test_a_server_that_cannot_start_is_one_line_and_exit_1(stub: type[StubServer]) -> None:
    stub.fail_with = ModelUnavailableError("llama.cpp could not start on 127.0.0.1:8080")
    result = serve("--port", str(free_port()))
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: llama.cpp could not start on 127.0.0.1:8080"


def test_a_split_model_counts_as_installed_once_assembled_or_with_all_its_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_catalog, "_part_path", lambda module, relative: None)
    assert not local_catalog.is_installed("qwen2.5-coder-1.5b", tmp_path)
    (tmp_path / local_catalog.CATALOG["qwen2.5-coder-1.5b"].file_name).write_bytes(b"GGUF")
    assert local_catalog.is_installed("qwen2.5-coder-1.5b", tmp_path)
    monkeypatch.setattr(local_catalog, "_part_path", lambda module, relative: tmp_path / relative)
    assert local_catalog.is_installed("gemma3-270m", tmp_path / "empty")


def test_strongest_first_follows_the_measured_accuracy() -> None:
    """The default model of `rag model serve` is the most accurate by `python -m benchmarks models`, not by
    size."""
    measured = json.loads((REPO_ROOT / "results" / "models.json").read_text(encoding="utf-8"))["models"]
    by_accuracy = sorted(measured, key=lambda name: measured[name]["accuracy"], reverse=True)
    assert tuple(by_accuracy) == local_catalog.STRONGEST_FIRST


# --- stopping -------------------------------------------------------------------------------------------


def test_sigterm_ends_the_wait_and_restores_the_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    model_cli.wait_until_stopped()  # returns instead of the test process dying
    timer.join()
    assert signal.getsignal(signal.SIGTERM) == before
