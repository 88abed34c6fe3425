"""Throwaway PostgreSQL and Chroma servers for the scale-out tests (`@pytest.mark.servers`), and a launcher
of `rag serve` workers behind them.

Why session fixtures over scripts/servers.sh: starting a cluster (initdb) and `chroma run` takes seconds, so
one pair serves the whole session; each test still gets its own fresh database (`pg_url`: CREATE DATABASE
test_<random>, dropped after) and uses its own tenant names in Chroma, so no test sees another's rows.
When RAG_TEST_DATABASE_URL / RAG_TEST_CHROMA_HOST / RAG_TEST_CHROMA_PORT are set (.ci/run starts the servers
and exports them) those servers are used; otherwise the fixture starts its own in a temporary folder and
stops them at the end of the session. A machine without PostgreSQL FAILS the test with the reason (never a
skip: a skipped integration suite would read as a passed one).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVERS_SCRIPT = REPO_ROOT / "scripts" / "servers.sh"
#: Seconds scripts/servers.sh may take to start both servers (apt-get install of PostgreSQL not counted in
#: practice: it happens once per machine, but give it room).
SERVERS_START_TIMEOUT_S = 600
#: Seconds a `rag serve` worker may take to answer /health (model and index loading on a busy machine).
WORKER_START_TIMEOUT_S = 120
#: The variables naming already running servers, read at import: the per-test isolation in conftest.py
#: clears every RAG_* variable before a test runs.
SERVER_VARIABLES = ("RAG_TEST_DATABASE_URL", "RAG_TEST_CHROMA_HOST", "RAG_TEST_CHROMA_PORT")
_GIVEN = {name: os.environ.get(name) for name in SERVER_VARIABLES}


@dataclass(frozen=True)
class Servers:
    """Where the session's servers listen: the maintenance database's URL and Chroma's address."""

    database_url: str
    chroma_host: str
    chroma_port: int


def _parse_exports(text: str) -> dict[str, str]:
    """`export NAME=value` lines (what `scripts/servers.sh start` prints) as a mapping."""
    exports = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            name, _, value = line.removeprefix("export ").partition("=")
            exports[name.strip()] = value.strip()
    return exports


@pytest.fixture(scope="session")
def throwaway_servers() -> Iterator[Servers]:
    """The servers named by RAG_TEST_* variables, or a pair started for this session (stopped after)."""
    if all(_GIVEN.values()):
        yield Servers(str(_GIVEN["RAG_TEST_DATABASE_URL"]), str(_GIVEN["RAG_TEST_CHROMA_HOST"]),
                      int(str(_GIVEN["RAG_TEST_CHROMA_PORT"])))  # fmt: skip
        return
    folder = Path(tempfile.mkdtemp(prefix="rag-test-servers-"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAG_")}
    env["VENV_BIN"] = str(Path(sys.executable).parent)
    try:
        started = subprocess.run(
            ["bash", str(SERVERS_SCRIPT), "start", str(folder)],
            capture_output=True,
            text=True,
            env=env,
            timeout=SERVERS_START_TIMEOUT_S,
        )
        exports = _parse_exports(started.stdout)
        if started.returncode != 0 or not all(name in exports for name in SERVER_VARIABLES):
            pytest.fail(
                "cannot start the throwaway PostgreSQL and Chroma servers (scripts/servers.sh start; "
                "PostgreSQL comes from the system packages: apt-get install postgresql): "
                f"exit {started.returncode}\n{started.stderr[-3000:]}",
                pytrace=False,
            )
        yield Servers(exports["RAG_TEST_DATABASE_URL"], exports["RAG_TEST_CHROMA_HOST"],
                      int(exports["RAG_TEST_CHROMA_PORT"]))  # fmt: skip
    finally:
        subprocess.run(["bash", str(SERVERS_SCRIPT), "stop", str(folder)], env=env, timeout=120, check=False)
        shutil.rmtree(folder, ignore_errors=True)


def _with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` (same server, user and query)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _admin(url: str, statement: str) -> None:
    """Run one statement outside a transaction (CREATE/DROP DATABASE refuse to run inside one)."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


@contextmanager
def fresh_database(servers: Servers) -> Iterator[str]:
    """A new, empty database on the session's server (`postgresql://...`), dropped at the end."""
    name = f"test_{secrets.token_hex(6)}"
    try:
        _admin(servers.database_url, f'CREATE DATABASE "{name}"')
    except Exception as error:  # noqa: BLE001 - any connection failure is the same verdict for the test
        pytest.fail(f"cannot create a test database on {servers.database_url}: {error}", pytrace=False)
    try:
        yield _with_database(servers.database_url, name)
    finally:
        try:
            _admin(servers.database_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except Exception:  # noqa: BLE001,S110 - a database left behind goes with the throwaway cluster
            pass


@pytest.fixture
def pg_url(throwaway_servers: Servers) -> Iterator[str]:
    """A fresh, empty database of its own for this test (`postgresql://...`), dropped after it."""
    with fresh_database(throwaway_servers) as url:
        yield url


@pytest.fixture(scope="session")
def chroma_server(throwaway_servers: Servers) -> tuple[str, int]:
    """The Chroma server's (host, port); tests keep apart by using tenant names of their own."""
    return throwaway_servers.chroma_host, throwaway_servers.chroma_port


def unique_tenant(prefix: str = "t") -> str:
    """A tenant name no other test uses (the Chroma server is shared by the whole session)."""
    return f"{prefix}{secrets.token_hex(4)}"


def server_settings(pg_url: str, chroma: tuple[str, int]) -> dict[str, str]:
    """The RAG_* variables that put an engine on these servers: one URL for everything in Postgres, and
    Chroma in client/server mode."""
    return {"RAG_DATABASE_URL": pg_url, "RAG_CHROMA_HOST": chroma[0], "RAG_CHROMA_PORT": str(chroma[1])}


@dataclass
class Worker:
    """One `rag serve` process: its base URL, its environment and log (kept to start it again)."""

    name: str
    port: int
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Worker:
        """Start `rag serve` on this worker's port and wait until /health answers."""
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Start the `rag serve` process (its own process group: stopping it stops all it started)."""
        rag = Path(sys.executable).parent / "rag"
        if not rag.exists():
            pytest.fail(f"the rag command is not installed at {rag}: pip install -e .", pytrace=False)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [str(rag), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=self.log_path.parent,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self) -> Worker:
        """Wait until /health answers 200; fail with the log's tail when it exits or takes too long."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"worker {self.name} exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                late = f"worker {self.name} did not answer /health in {WORKER_START_TIMEOUT_S}s"
                pytest.fail(f"{late}:\n{self.log_tail()}")
            time.sleep(0.5)

    def stop(self, *, kill: bool = False) -> None:
        """Stop the worker: SIGTERM (SIGKILL when `kill`, as a crash would), then wait for it."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


@contextmanager
def rag_workers(
    count: int, root: Path, settings: Mapping[str, str], *, separate_data_dirs: bool = True
) -> Iterator[list[Worker]]:
    """`count` `rag serve` processes on their own loopback ports with exactly `settings` as RAG_* variables
    (nothing from the caller's environment); each has its own data folder by default, so whatever they share
    they share through the servers named in `settings`. All are stopped at the end."""
    from tests.helpers.api_server import free_port  # here: the API's imports are heavy for every conftest

    base_env = {key: value for key, value in os.environ.items() if not key.startswith(("RAG_", "OPENAI_"))}
    workers = []
    for index in range(count):
        folder = root / f"worker{index}"
        folder.mkdir(parents=True, exist_ok=True)
        data_dir = folder / "data" if separate_data_dirs else root / "data"
        env = base_env | {"RAG_DATA_DIR": str(data_dir)} | dict(settings)
        workers.append(Worker(f"worker{index}", free_port(), env, folder / "serve.log"))
    try:
        for worker in workers:  # all load at once, then each is waited for
            worker.launch()
        for worker in workers:
            worker.wait_ready()
        yield workers
    finally:
        for worker in workers:
            worker.stop()
