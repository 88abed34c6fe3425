"""The SQL tables are written on every answer, from every interface, and the schema is Alembic's.

Every answer goes through the graph's record_turn node, so Python (`graph.invoke`), the CLI (`rag ask`) and
the REST API must all leave the same rows: a session per (tenant, thread), the user and assistant rows of
each turn (role, content, mode, source chunk ids, latency) and an audit row (action, tenant, thread, chunk
ids, mode, time). The tests read the rows back with plain SQL and compare them with what the caller sent
and with the chunk ids the catalog holds for the cited file, not with values the recorder computed.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text
from typer.testing import CliRunner

from graphs.rag import build_graph
from persistence.checkpointer import sqlite_checkpointer
from persistence.database import (
    APP_DB_FILENAME,
    Base,
    DatabaseUnavailableError,
    alembic_config,
    close_databases,
    get_database,
    open_database,
    upgrade,
)
from retrieval.knowledge_base import KnowledgeBase
from service.cli import app as cli_app
from state.context import Context
from tests.conftest import REPO_ROOT
from tests.helpers.api_server import serve
from tests.helpers.calibrators import constant
from tests.helpers.rag_world import ANSWER, QUESTION, World, world

TABLES = {"sessions", "conversations", "memories", "audit_logs", "semantic_cache", "alembic_version"}


@pytest.fixture
def acme(settings: Any, kb: KnowledgeBase, tmp_path: Path) -> Iterator[World]:
    """The corpus of tenant `acme`, the fake model installed."""
    with world(settings, kb, tmp_path, tenants=("acme",)) as built:
        yield built


def rows(db_file: Path, sql: str, *params: Any) -> list[dict[str, Any]]:
    """Rows of a query on the SQLite file, as dicts (read outside the engine under test)."""
    with sqlite3.connect(db_file) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute(sql, params)]


def app_db(world_: World) -> Path:
    return world_.settings.data_dir / APP_DB_FILENAME


def jupiter_chunk_ids(world_: World, tenant: str) -> set[str]:
    """The chunk ids the catalog holds for jupiter.md of `tenant` (what a cited answer rests on)."""
    source = str((world_.folders[tenant] / "jupiter.md").resolve())
    with sqlite3.connect(world_.settings.catalog_path) as connection:
        found = connection.execute(
            "SELECT chunks.chunk_id FROM chunks JOIN documents ON documents.id = chunks.document_id "
            "WHERE documents.source = ? AND documents.tenant = ?",
            (source, tenant),
        ).fetchall()
    return {row[0] for row in found}


def parse_time(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def assert_turn_rows(
    world_: World,
    *,
    tenant: str,
    thread: str,
    question: str,
    mode: str,
    interface: str,
    turns: int = 1,
    before: datetime,
) -> None:
    """The session, the last turn's two conversation rows and its audit row, field by field."""
    db = app_db(world_)
    (session,) = rows(db, "SELECT * FROM sessions WHERE thread_id = ?", thread)
    assert session["tenant"] == tenant and session["turns"] == turns
    messages = rows(db, "SELECT * FROM conversations WHERE session_id = ? ORDER BY id", session["id"])
    assert len(messages) == 2 * turns
    user, assistant = messages[-2:]
    assert (user["role"], user["content"], user["tenant"]) == ("user", question, tenant)
    assert (assistant["role"], assistant["content"], assistant["tenant"]) == ("assistant", ANSWER, tenant)
    assert user["turn_id"] == assistant["turn_id"] and user["mode"] == assistant["mode"] == mode
    sources = json.loads(assistant["source_ids"])
    assert sources and set(sources) <= jupiter_chunk_ids(world_, tenant)
    assert assistant["latency_ms"] > 0 and not assistant["cache_hit"] and not assistant["not_found"]
    audit = rows(db, "SELECT * FROM audit_logs WHERE thread_id = ? ORDER BY id", thread)
    assert len(audit) == turns
    last = audit[-1]
    assert (last["action"], last["tenant"], last["mode"], last["graph"]) == ("answer", tenant, mode, "rag")
    assert json.loads(last["chunk_ids"]) == sources and last["interface"] == interface
    assert before - timedelta(seconds=1) <= parse_time(last["created_at"]) <= datetime.now(UTC)
    assert json.loads(last["detail"])["turn_id"] == user["turn_id"]


# --- every interface writes the rows --------------------------------------------------------------------


def test_graph_invoke_writes_session_conversation_and_audit_rows(acme: World) -> None:
    graph = build_graph(sqlite_checkpointer(acme.settings))
    config = {"configurable": {"thread_id": "py-1"}}
    before = datetime.now(UTC)
    for turn in (1, 2):
        out = graph.invoke(
            {"question": QUESTION}, config=config, context=Context(tenant="acme", mode="precise")
        )
        assert out["answer"] == ANSWER
        assert_turn_rows(
            acme,
            tenant="acme",
            thread="py-1",
            question=QUESTION,
            mode="precise",
            interface="python",
            turns=turn,
            before=before,
        )
    assert rows(app_db(acme), "SELECT DISTINCT tenant FROM audit_logs") == [{"tenant": "acme"}]


def test_a_run_without_a_checkpointer_gets_a_session_of_its_own(acme: World) -> None:
    graph = build_graph()
    for _ in range(2):
        graph.invoke({"question": QUESTION}, context=Context(tenant="acme"))
    sessions = rows(app_db(acme), "SELECT thread_id, turns FROM sessions")
    assert len(sessions) == 2 and all(row["turns"] == 1 for row in sessions)
    assert all(row["thread_id"].startswith("run-") for row in sessions)


def test_a_not_found_answer_is_recorded_with_no_sources(acme: World, calibrator: Any) -> None:
    calibrator(constant(0.1))  # the judgement declines the draft
    out = build_graph().invoke(
        {"question": "How long should sourdough bread proof overnight?"}, context=Context(tenant="acme")
    )
    assert out["not_found"] is True
    (assistant,) = rows(app_db(acme), "SELECT * FROM conversations WHERE role = 'assistant'")
    assert assistant["content"] == out["answer"] and assistant["not_found"] == 1
    assert json.loads(assistant["source_ids"]) == []
    (audit,) = rows(app_db(acme), "SELECT * FROM audit_logs")
    assert audit["not_found"] == 1 and json.loads(audit["chunk_ids"]) == []


def test_cli_ask_writes_the_rows(acme: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(acme.settings.data_dir))
    before = datetime.now(UTC)
    arguments = ["ask", QUESTION, "--thread", "cli-1", "--tenant", "acme", "--mode", "advanced", "--json"]
    result = CliRunner().invoke(cli_app, arguments)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["answer"] == ANSWER
    assert_turn_rows(
        acme,
        tenant="acme",
        thread="cli-1",
        question=QUESTION,
        mode="advanced",
        interface="cli",
        before=before,
    )


def test_rest_api_generate_writes_the_rows(acme: World) -> None:
    before = datetime.now(UTC)
    with serve(acme.settings) as client:
        payload = {"query": QUESTION, "tenant_id": "acme", "thread_id": "api-1", "mode": "simple"}
        reply = client.post("/api/v1/rag/generate", json=payload)
    assert reply.status_code == 200, reply.text
    assert reply.json()["answer"] == ANSWER
    assert_turn_rows(
        acme,
        tenant="acme",
        thread="api-1",
        question=QUESTION,
        mode="simple",
        interface="api",
        before=before,
    )


def test_a_database_that_cannot_be_written_never_costs_the_answer(
    settings: Any, kb: KnowledgeBase, tmp_path: Path
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the database's folder should be")
    broken = settings.model_copy(update={"database_url": f"sqlite:///{blocked}/app.sqlite"})
    with world(broken, kb, tmp_path) as built:
        out = build_graph().invoke({"question": QUESTION})
        assert out["answer"] == ANSWER and built.generate_calls() == 1


# --- Alembic ----------------------------------------------------------------------------------------------


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() or ""


def current_revision(db_file: Path) -> str | None:
    engine = create_engine(f"sqlite:///{db_file}")
    with engine.connect() as connection:
        revision = MigrationContext.configure(connection).get_current_revision()
    engine.dispose()
    return revision


def test_a_fresh_database_is_upgraded_to_head_on_first_use(tmp_path: Path) -> None:
    db_file = tmp_path / "fresh" / "app.sqlite"
    database = open_database(f"sqlite:///{db_file}")
    try:
        assert TABLES <= set(inspect(database.engine).get_table_names())
        with database.engine.connect() as connection:
            # the migrations create exactly what the models describe (no drift between the two)
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    finally:
        database.close()
    assert current_revision(db_file) == head_revision() != ""


OPEN_AT = """
import sys, time
from persistence.database import open_database
start_at, url = float(sys.argv[1]), sys.argv[2]
time.sleep(max(0.0, start_at - time.time()))
open_database(url).close()
print("opened")
"""


def test_processes_opening_a_fresh_database_at_once_all_succeed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared' / 'app.sqlite'}"
    start_at = time.time() + 4  # every process imported and waiting, then all migrate together
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AT, str(start_at), url],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert [
        (process.returncode, out.strip()) for process, (out, _err) in zip(processes, outputs, strict=True)
    ] == [(0, "opened")] * 6, [err for _out, err in outputs if err]
    assert current_revision(tmp_path / "shared" / "app.sqlite") == head_revision()


def test_reopening_a_database_keeps_its_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.sqlite'}"
    first = open_database(url)
    with first.session() as session:
        session.execute(
            text(
                "INSERT INTO audit_logs (action, tenant, thread_id, conversation_id, chunk_ids, "
                "mode, interface, graph, cache_hit, not_found, detail, created_at) VALUES "
                "('answer', 't', 'th', '', '[]', 'simple', 'cli', 'rag', 0, 0, '{}', "
                "'2026-01-01 00:00:00')"
            )
        )
    first.close()
    second = open_database(url)
    try:
        with second.session() as session:
            assert session.execute(text("SELECT tenant, thread_id FROM audit_logs")).all() == [("t", "th")]
    finally:
        second.close()
    assert current_revision(tmp_path / "app.sqlite") == head_revision()


def test_a_database_of_an_older_revision_is_brought_forward_with_its_rows(tmp_path: Path) -> None:
    db_file = tmp_path / "old.sqlite"
    engine = create_engine(f"sqlite:///{db_file}")
    upgrade(engine, "0001")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO memories (tenant, conversation_id, kind, content, model_key, "
                "created_at) VALUES ('t', '', 'note', 'kept across the upgrade', '', "
                "'2026-01-01 00:00:00')"
            )
        )
    engine.dispose()
    assert current_revision(db_file) == "0001"
    database = open_database(f"sqlite:///{db_file}")
    database.close()
    assert current_revision(db_file) == head_revision() != "0001"
    assert rows(db_file, "SELECT content, metadata_json FROM memories") == [
        {"content": "kept across the upgrade", "metadata_json": "{}"}
    ]


def test_database_url_points_the_tables_at_another_file(
    settings: Any, kb: KnowledgeBase, tmp_path: Path
) -> None:
    other = tmp_path / "elsewhere" / "tables.sqlite"
    moved = settings.model_copy(update={"database_url": f"sqlite:///{other}"})
    with world(moved, kb, tmp_path) as built:
        build_graph().invoke({"question": QUESTION})
        assert get_database(built.settings).url == f"sqlite:///{other}"
    assert not (settings.data_dir / APP_DB_FILENAME).exists()
    assert [row["role"] for row in rows(other, "SELECT role FROM conversations ORDER BY id")] == [
        "user",
        "assistant",
    ]
    assert current_revision(other) == head_revision()


def test_database_url_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    other = tmp_path / "env.sqlite"
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    monkeypatch.setenv("RAG_DATABASE_URL", f"sqlite:///{other}")
    result = CliRunner().invoke(cli_app, ["memory", "stats", "--json"])
    close_databases()
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == dict.fromkeys(
        ("sessions", "conversations", "memories", "audit_logs", "semantic_cache"), 0
    )
    assert other.exists() and not (tmp_path / "rag" / APP_DB_FILENAME).exists()


@pytest.mark.parametrize(
    ("url", "code", "fragment"),
    [
        ("not a database url", 2, "RAG_DATABASE_URL"),
        ("nosuchdriver://host/db", 2, "RAG_DATABASE_URL"),
        ("sqlite:////proc/no-such-folder/app.sqlite", 1, "cannot open the app database"),
    ],
)
def test_a_bad_database_url_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, code: int, fragment: str
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    monkeypatch.setenv("RAG_DATABASE_URL", url)
    result = CliRunner().invoke(cli_app, ["memory", "list"])
    assert result.exit_code == code, result.output
    assert fragment in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_open_database_raises_its_own_error(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUnavailableError, match="cannot open the app database"):
        open_database("sqlite:////proc/no-such-folder/app.sqlite")
