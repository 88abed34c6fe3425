"""PostgreSQL beside the conversations: the URL helpers, the app tables migrated by Alembic under an advisory
lock (also by two processes at once), the per-thread lock as an advisory lock across processes, and a server
that is down: one line, a StoreUnavailableError (CLI exit 1, HTTP 503), never a stack trace.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from config.settings import load_settings
from persistence.checkpointer import checkpointer_for
from persistence.database import (
    MIGRATIONS_DIR,
    DatabaseUnavailableError,
    alembic_config,
    is_postgres,
    libpq_url,
    open_database,
    postgres_url,
    sqlalchemy_url,
)
from persistence.errors import StoreUnavailableError
from persistence.postgres_checkpoints import CheckpointStoreUnavailableError
from persistence.thread_lock import ThreadBusyError, advisory_key, thread_lock
from service.api.errors import classify
from service.cli import EXIT_UNAVAILABLE, app
from tests.helpers.postgres import closed_port_url, pg_settings, rows

REPO_ROOT = Path(__file__).resolve().parent.parent


# --- one reading of the URL (no server needed) -----------------------------------------------------------
def test_url_helpers() -> None:
    assert is_postgres("postgresql://u@h:5432/d") and is_postgres("postgresql+psycopg://u@h/d")
    assert is_postgres("postgres://u@h/d") and is_postgres("POSTGRESQL://u@h/d")
    assert not is_postgres("sqlite:////tmp/x.sqlite") and not is_postgres(None) and not is_postgres("")
    assert (
        sqlalchemy_url("postgresql://u:p@h:5/d?sslmode=disable")
        == "postgresql+psycopg://u:p@h:5/d?sslmode=disable"
    )
    assert sqlalchemy_url("postgres://u@h/d") == "postgresql+psycopg://u@h/d"
    assert sqlalchemy_url("sqlite:///x.sqlite") == "sqlite:///x.sqlite"
    assert libpq_url("postgresql+psycopg://u@h:5/d") == "postgresql://u@h:5/d"
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        libpq_url("sqlite:///x.sqlite")


def test_without_a_postgres_url_everything_stays_in_sqlite_files(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "rag")
    assert postgres_url(settings) is None
    saver = checkpointer_for(settings)
    assert type(saver).__name__ == "PruningSqliteSaver" and settings.checkpoint_path.exists()
    with thread_lock(settings, "t1", timeout_s=0):
        assert any((settings.data_dir / "locks").iterdir())  # the file lock


# --- app tables ----------------------------------------------------------------------------------------
@pytest.mark.servers
def test_app_tables_are_migrated_to_head_on_postgres(pg_url: str) -> None:
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    for url in (pg_url, pg_url.replace("postgresql://", "postgresql+psycopg://")):  # twice: idempotent
        database = open_database(url)
        database.close()
    assert rows(pg_url, "SELECT version_num FROM alembic_version") == [(head,)]
    tables = {name for (name,) in rows(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"sessions", "conversations", "memories", "audit_logs", "semantic_cache"} <= tables
    assert MIGRATIONS_DIR.is_dir()


MIGRATE = """
import sys
from persistence.database import open_database
open_database(sys.argv[1]).close()
print("migrated")
"""


@pytest.mark.servers
def test_two_processes_migrating_one_fresh_database_both_succeed(pg_url: str) -> None:
    """Without the advisory lock the second fails creating a table the first has just created."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATE, pg_url],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], outputs
    assert rows(pg_url, "SELECT COUNT(*) FROM alembic_version") == [(1,)]


# --- the thread lock across processes and machines --------------------------------------------------------
HOLD = """
import sys, time
from config.settings import load_settings
from persistence.thread_lock import thread_lock
with thread_lock(load_settings(data_dir=sys.argv[2], database_url=sys.argv[1]), sys.argv[3]):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.mark.servers
def test_thread_lock_is_an_advisory_lock_across_processes(tmp_path: Path, pg_url: str) -> None:
    settings = pg_settings(tmp_path, pg_url)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, pg_url, str(tmp_path / "other"), "t1"],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        # another process (with its own data folder: another machine as far as files go) holds it
        held = rows(pg_url, "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")
        assert held == [(1,)]
        with pytest.raises(ThreadBusyError, match="busy"), thread_lock(settings, "t1", timeout_s=0.3):
            pass
        with thread_lock(settings, "t2", timeout_s=0):  # other threads are free
            pass
        holder.kill()  # a crashed holder: the server drops its lock with its connection
        holder.wait(timeout=30)
        with thread_lock(settings, "t1", timeout_s=30):
            assert not (settings.data_dir / "locks").exists()
    finally:
        holder.kill()
        holder.wait(timeout=30)


@pytest.mark.servers
def test_thread_lock_excludes_other_threads_and_is_reentrant(tmp_path: Path, pg_url: str) -> None:
    settings = pg_settings(tmp_path, pg_url)
    outcome: list[str] = []

    def other() -> None:
        try:
            with thread_lock(settings, "t1", timeout_s=0.2):
                outcome.append("acquired")
        except ThreadBusyError:
            outcome.append("busy")

    with thread_lock(settings, "t1", timeout_s=0), thread_lock(settings, "t1", timeout_s=0):  # re-entrant
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
    assert outcome == ["busy"]
    waiter = threading.Thread(target=other)
    with thread_lock(settings, "t1", timeout_s=0):
        waiter.start()
        time.sleep(0.05)
    waiter.join()
    assert outcome == ["busy", "acquired"]  # released at the end of the block, the waiter got it
    assert advisory_key("t1") != advisory_key("t2") and -(2**63) <= advisory_key("t1") < 2**63


# --- a server that is down ----------------------------------------------------------------------------------
def test_a_down_server_is_one_store_unavailable_line(tmp_path: Path) -> None:
    down = closed_port_url()
    settings = pg_settings(tmp_path, down, database_connect_timeout_s=2)
    with pytest.raises(CheckpointStoreUnavailableError) as saver_error:
        checkpointer_for(settings)
    with pytest.raises(StoreUnavailableError) as lock_error:
        with thread_lock(settings, "t1", timeout_s=0):
            pass
    with pytest.raises(DatabaseUnavailableError) as tables_error:
        open_database(down, connect_timeout_s=2)
    for error in (saver_error.value, lock_error.value, tables_error.value):
        message = str(error)
        assert "\n" not in message and "127.0.0.1" in message and "refused" in message.lower()
        assert isinstance(error, StoreUnavailableError) and classify(error).status == 503


def test_cli_with_a_down_server_exits_1_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATABASE_URL", closed_port_url())
    monkeypatch.setenv("RAG_DATABASE_CONNECT_TIMEOUT_S", "2")
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    for command in (["threads", "list"], ["threads", "delete", "t1"], ["threads", "prune", "--keep", "1"]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == EXIT_UNAVAILABLE, (command, result.output)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "PostgreSQL" in errors[0], result.stderr
        assert "Traceback" not in result.output


@pytest.mark.servers
def test_doctor_checks_the_postgres_checkpoints(tmp_path: Path, pg_url: str) -> None:
    from service.doctor import check_checkpoints

    finding = check_checkpoints(pg_settings(tmp_path, pg_url), repair=False)
    assert finding.status == "ok" and "0 threads" in finding.detail and finding.path == libpq_url(pg_url)
    down = check_checkpoints(
        pg_settings(tmp_path, closed_port_url(), database_connect_timeout_s=2), repair=True
    )
    assert down.status == "damaged" and "PostgreSQL" in down.detail
    assert not (tmp_path / "rag" / "checkpoints.sqlite").exists()


@pytest.mark.servers
def test_memories_and_the_semantic_cache_work_on_postgres(tmp_path: Path, pg_url: str) -> None:
    """The app tables' users (memories: items of the long-term store; the cache's SQL backend: eviction
    per tenant)."""
    from persistence.database import close_databases
    from persistence.memories import add_memory, delete_memories, list_memories, search_memories
    from persistence.semantic_cache import SemanticCache
    from persistence.semantic_cache_backends import CacheScope, SqlCacheBackend
    from tests.fakes import HashEmbeddings

    settings = pg_settings(tmp_path, pg_url)
    fake = {"settings": settings, "embeddings": HashEmbeddings(), "model_key": "fake"}
    try:
        first = add_memory("Ganymede is the largest moon of Jupiter.", tenant="acme", **fake)  # type: ignore[arg-type]
        add_memory("Mars is red because of iron oxide.", tenant="acme", metadata={"tag": "mars"}, **fake)  # type: ignore[arg-type]
        add_memory("Ganymede secrets of another tenant.", tenant="globex", **fake)  # type: ignore[arg-type]
        found = search_memories("largest moon Ganymede", tenant="acme", k=1, **fake)  # type: ignore[arg-type]
        assert [memory.id for memory in found] == [first.id]
        assert {memory.tenant for memory in list_memories(tenant="acme", settings=settings)} == {"acme"}
        delete_memories(tenant="acme", memory_ids=[first.id], settings=settings)
        per_tenant = (
            "SELECT split_part(prefix, '.', 2), COUNT(*) FROM store "
            "WHERE split_part(prefix, '.', 1) = 'memories' GROUP BY 1 ORDER BY 1"
        )
        assert rows(pg_url, per_tenant) == [("acme", 1), ("globex", 1)]  # the long-term store's items
        database = open_database(pg_url)
        cache = SemanticCache(settings, SqlCacheBackend(database, 3600, 2), embeddings=HashEmbeddings)
        payload = {"answer": "Jupiter [1].", "citations": [], "sources": []}
        for word in ("one", "two", "three"):
            cache.store(f"question {word}", CacheScope(tenant="acme"), "v1", payload)
        cache.store("question one", CacheScope(tenant="globex"), "v1", payload)
        assert rows(pg_url, "SELECT tenant, COUNT(*) FROM semantic_cache GROUP BY tenant ORDER BY 1") == [
            ("acme", 2),
            ("globex", 1),
        ]
        database.close()
    finally:
        close_databases()
