"""Conversations on PostgreSQL (RAG_DATABASE_URL=postgresql://...): stored by LangGraph's Postgres saver,
continued by another session, bounded by keep-last-N, pruned by prune / aprune and `rag threads`.

Each test has a fresh database of its own (the `pg_url` fixture); the graph, savers, runner and CLI are real,
the models fake (tests.fakes). What is counted is read straight from the tables with a connection of its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.settings import get_settings
from graphs.rag import build_graph
from graphs.runner import Session
from persistence import checkpointer as checkpointer_module
from persistence.checkpointer import (
    async_checkpointer_for,
    checkpoint_location,
    checkpointer_for,
    server_checkpointer,
)
from persistence.database import libpq_url
from persistence.postgres_checkpoints import PruningAsyncPostgresSaver, PruningPostgresSaver
from persistence.threads import list_threads, prune_threads, scoped_thread_id
from service.cli import app
from state.context import Context
from tests.fakes import TaskChatModel
from tests.helpers.postgres import orphan_blobs, pg_world, rows, thread_counts

pytestmark = pytest.mark.servers

ANSWER = "Jupiter is the largest planet in the Solar System [1]."
QUESTIONS = ["Which planet is the largest?", "And its largest moon?", "Why is Mars red?", "Which is fourth?"]


def model() -> TaskChatModel:
    return TaskChatModel(replies={"generate": ANSWER}, fallback="yes")


def ACME(thread_id: str) -> str:  # noqa: N802 - reads like the tenant it names
    """The stored id of tenant acme's thread (thread ids are scoped per tenant)."""
    return scoped_thread_id("acme", thread_id)


def turns(session: Session, thread_id: str, count: int, tenant: str = "acme") -> None:
    for question in QUESTIONS[:count]:
        session.ask(question, thread_id=thread_id, context=Context(tenant=tenant))


def test_settings_alone_put_conversations_in_postgres(tmp_path: Path, pg_url: str) -> None:
    with pg_world(tmp_path, pg_url, model()) as world, world.installed():
        session = Session(world.settings)
        assert isinstance(session.checkpointer, PruningPostgresSaver)
        turns(session, "t1", 2)
        # another session (as another process or worker would) continues the same thread
        follow_up = Session(world.settings).ask(QUESTIONS[2], thread_id="t1", context=Context(tenant="acme"))
    assert [message.type for message in follow_up["messages"]] == ["human", "ai"] * 3
    assert thread_counts(pg_url, ACME("t1"))["checkpoints"] >= 3
    assert not (world.settings.data_dir / "checkpoints.sqlite").exists()
    assert not (world.settings.data_dir / "locks").exists()  # the thread lock is an advisory lock
    # the app tables are on the same server (Alembic at head), one session row for the thread
    assert rows(pg_url, "SELECT tenant, thread_id, turns FROM sessions") == [("acme", "t1", 3)]
    assert rows(pg_url, "SELECT COUNT(*) FROM alembic_version")[0][0] == 1


def test_keep_last_n_bounds_each_thread_and_frees_its_values(tmp_path: Path, pg_url: str) -> None:
    with pg_world(tmp_path, pg_url, model(), checkpoint_keep=2) as world, world.installed():
        session = Session(world.settings)
        turns(session, "t1", 4)
        turns(session, "t2", 1)
        history = session.history("t1", tenant="acme")
    assert thread_counts(pg_url, ACME("t1"))["checkpoints"] == 2
    assert thread_counts(pg_url, ACME("t2"))["checkpoints"] == 1
    assert orphan_blobs(pg_url) == 0
    assert len(history["messages"]) == 8  # the newest checkpoint alone holds the whole conversation


def test_keep_zero_keeps_every_checkpoint_and_async_durability_is_bounded_too(
    tmp_path: Path, pg_url: str
) -> None:
    with pg_world(tmp_path, pg_url, model(), checkpoint_keep=0) as world, world.installed():
        turns(Session(world.settings), "all", 3)
    assert thread_counts(pg_url, ACME("all"))["checkpoints"] >= 3
    with pg_world(tmp_path / "b", pg_url, model()) as world, world.installed():
        graph = build_graph(checkpointer_for(world.settings, keep=3))
        config = {"configurable": {"thread_id": "steps"}}
        for question in QUESTIONS[:2]:  # a checkpoint per step (the server's way): 14-24 a turn
            graph.invoke({"question": question}, config, context={"tenant": "acme"}, durability="sync")
    assert thread_counts(pg_url, "steps")["checkpoints"] == 3
    assert orphan_blobs(pg_url) == 0


def test_prune_keep_latest_and_delete(tmp_path: Path, pg_url: str) -> None:
    with pg_world(tmp_path, pg_url, model(), checkpoint_keep=0) as world, world.installed():
        session = Session(world.settings)
        turns(session, "a", 3)
        turns(session, "b", 2)
        saver = checkpointer_for(world.settings)
        saver.prune([ACME("a")], strategy="keep_latest")
        assert thread_counts(pg_url, ACME("a"))["checkpoints"] == 1
        assert len(session.history("a", tenant="acme")["messages"]) == 6
        saver.prune([ACME("b")], strategy="delete_all")  # the server adapter's name for "delete"
        assert thread_counts(pg_url, ACME("b")) == {
            "checkpoints": 0,
            "checkpoint_writes": 0,
            "checkpoint_blobs": 0,
        }
        with pytest.raises(ValueError, match="unknown prune strategy"):
            saver.prune([ACME("a")], strategy="oldest")
        # the thread goes on after its prune
        session.ask(QUESTIONS[3], thread_id="a", context=Context(tenant="acme"))
        assert len(session.history("a", tenant="acme")["messages"]) == 8


def test_async_saver_runs_keeps_and_aprunes(tmp_path: Path, pg_url: str) -> None:
    async def run(world_settings: object) -> None:
        async with async_checkpointer_for(world_settings, keep=2) as saver:  # type: ignore[arg-type]
            assert isinstance(saver, PruningAsyncPostgresSaver)
            graph = build_graph(checkpointer=saver)
            config = {"configurable": {"thread_id": "x"}}
            for question in QUESTIONS[:3]:
                await graph.ainvoke({"question": question}, config, context={"tenant": "acme"})
            assert thread_counts(pg_url, "x")["checkpoints"] == 2
            await saver.aprune(["x"])
            assert thread_counts(pg_url, "x")["checkpoints"] == 1
            state = await graph.aget_state(config)
            assert len(state.values["messages"]) == 6
            await saver.aprune(["x"], strategy="delete")
            assert thread_counts(pg_url, "x")["checkpoints"] == 0

    with pg_world(tmp_path, pg_url, model()) as world, world.installed():
        asyncio.run(run(world.settings))
    assert orphan_blobs(pg_url) == 0


def test_server_checkpointer_picks_postgres_from_the_url(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATABASE_URL", pg_url)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    monkeypatch.setattr(checkpointer_module, "SERVER_CHECKPOINT_KEEP", 5)
    monkeypatch.setenv("RAG_CHECKPOINT_KEEP", "2")  # the server keeps the larger of the two

    async def run() -> tuple[type, int]:
        async with server_checkpointer() as saver:
            return type(saver), saver.keep

    get_settings.cache_clear()  # the factory reads the process settings, as the server's process does
    try:
        kind, keep = asyncio.run(run())
    finally:
        get_settings.cache_clear()
    assert kind is PruningAsyncPostgresSaver and keep == 5
    assert not (tmp_path / "rag" / "checkpoints.sqlite").exists()
    tables = {name for (name,) in rows(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"} <= tables


def test_threads_housekeeping_per_tenant_on_postgres(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pg_world(tmp_path, pg_url, model(), checkpoint_keep=0) as world, world.installed():
        session = Session(world.settings)
        turns(session, "old", 2)
        turns(session, "new", 2)
        turns(session, "theirs", 2, tenant="other")
    location = checkpoint_location(world.settings)
    assert str(location) == libpq_url(pg_url)  # shown with its password hidden (this URL has none)
    assert [t.thread_id for t in list_threads(location, "acme")] == [ACME("new"), ACME("old")]
    removed = prune_threads(location, keep=1, tenant="acme")
    assert removed == {"threads_removed": 1, "checkpoints_removed": 1}
    assert [(t.thread_id, t.checkpoints) for t in list_threads(location, "acme")] == [(ACME("new"), 1)]
    assert (
        thread_counts(pg_url, scoped_thread_id("other", "theirs"))["checkpoints"] == 2
    )  # another tenant's thread is untouched

    monkeypatch.setenv("RAG_DATABASE_URL", pg_url)
    monkeypatch.setenv("RAG_DATA_DIR", str(world.settings.data_dir))
    cli = CliRunner()
    listed = cli.invoke(app, ["threads", "list", "--tenant", "other"])
    assert listed.exit_code == 0 and "theirs" in listed.stdout and "new" not in listed.stdout
    deleted = cli.invoke(app, ["threads", "delete", "theirs", "--tenant", "other"])
    assert deleted.exit_code == 0, deleted.output
    assert thread_counts(pg_url, scoped_thread_id("other", "theirs"))["checkpoints"] == 0
    assert cli.invoke(app, ["threads", "delete", "theirs", "--tenant", "other"]).exit_code == 2  # unknown now
    assert orphan_blobs(pg_url) == 0
