"""Adversarial, on PostgreSQL: tenant A attacks tenant B's thread stored by the Postgres savers (sync and
async) and must get nothing of it: refused turns, replays, time travel, server-style async runs, history,
housekeeping; and B's stored rows stay exactly as they were.

Why an echoing model: a leak only shows in an output if something copies it there; every reply of the fake
model is its prompt, so any B turn that reaches any prompt of A's run comes back in A's output, and every
prompt is also checked directly. B's canaries (the chaos benchmark's) occur only in B's conversation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchmarks.chaos import ALPHA, BRAVO, BRAVO_CANARIES, leaked
from graphs.rag import build_graph
from graphs.runner import Session
from persistence.checkpointer import async_checkpointer_for, checkpoint_location, checkpointer_for
from persistence.threads import (
    ThreadAccessError,
    delete_thread,
    list_threads,
    prune_threads,
    scoped_thread_id,
)
from service.cli import EXIT_BAD_INPUT, app
from state.context import Context
from tests.helpers.postgres import EchoModel, PgWorld, pg_world, rows, thread_counts

pytestmark = pytest.mark.servers

BRAVO_THREAD = "t-9c1e4b"  # names no tenant: a refusal must not name the owner
BRAVO_STORED = scoped_thread_id(BRAVO, BRAVO_THREAD)  # thread ids are scoped per tenant
BRAVO_QUESTION = f"What does Zorblatine hum at? ({BRAVO_CANARIES[2]})"


def stored(url: str) -> tuple[Any, ...]:
    """B's thread as stored: every row of it in the three checkpoint tables."""
    return tuple(
        rows(url, f"SELECT * FROM {table} WHERE thread_id = %s ORDER BY 1, 2, 3, 4", BRAVO_STORED)
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
    )


@pytest.fixture
def attack(tmp_path: Path, pg_url: str) -> Iterator[PgWorld]:
    """B's conversation stored on Postgres; yields with the echo model installed, then checks that B's rows
    did not change and that no prompt of A's runs held B's text."""
    with pg_world(tmp_path, pg_url, EchoModel(), tenants=[ALPHA, BRAVO]) as world, world.installed():
        out = Session(world.settings).ask(
            BRAVO_QUESTION, thread_id=BRAVO_THREAD, context=Context(tenant=BRAVO)
        )
        assert leaked(json.dumps(out, default=str))  # B's thread really holds B's secrets
        owners = {t.thread_id: t.owner for t in list_threads(checkpoint_location(world.settings))}
        assert owners[BRAVO_STORED] == BRAVO
        before, calls = stored(pg_url), len(world.model.calls)
        yield world
        assert stored(pg_url) == before, "tenant A changed B's stored thread"
        prompts = " ".join(str(m.content) for _, messages in world.model.calls[calls:] for m in messages)
        assert leaked(prompts) == [], "B's text reached a prompt of A's run"


def refused(error: pytest.ExceptionInfo[ThreadAccessError]) -> None:
    message = str(error.value)
    assert "belongs to another tenant" in message and BRAVO not in message and leaked(message) == []


def test_turns_streams_and_history_on_bravos_thread_id_never_reach_it(attack: PgWorld) -> None:
    session = Session(attack.settings)
    assert session.history(BRAVO_THREAD, tenant=ALPHA) == {}  # as for an id nobody uses
    out = session.ask("What did I ask before?", thread_id=BRAVO_THREAD, context=Context(tenant=ALPHA))
    assert out["thread_id"] == BRAVO_THREAD and leaked(json.dumps(out, default=str)) == []
    items = list(session.stream("Say it again.", thread_id=BRAVO_THREAD, context=Context(tenant=ALPHA)))
    assert leaked(json.dumps(items, default=str)) == []
    assert len(session.history(BRAVO_THREAD, tenant=ALPHA)["messages"]) == 4  # A's own two turns
    assert session.history(BRAVO_THREAD, tenant=BRAVO)["messages"]  # the owner still reads its own


@pytest.mark.parametrize("context", [{"tenant": ALPHA}, None], ids=["alpha", "no-context"])
def test_replays_on_the_sync_postgres_saver_are_refused(
    attack: PgWorld, context: dict[str, str] | None
) -> None:
    """Straight through the graph (no runner): the saver's own owner check refuses."""
    graph = build_graph(checkpointer_for(attack.settings))
    config: dict[str, Any] = {"configurable": {"thread_id": BRAVO_STORED}}
    with pytest.raises(ThreadAccessError):
        graph.invoke(None, config, context=context)
    with pytest.raises(ThreadAccessError):
        graph.invoke({"question": "Repeat my previous question word for word."}, config, context=context)
    first = list(graph.get_state_history(config))[-1].config  # time travel to the ownerless first checkpoint
    with pytest.raises(ThreadAccessError):
        graph.invoke(None, first, context={"tenant": ALPHA})


def test_server_style_async_runs_on_bravos_thread_are_refused(attack: PgWorld) -> None:
    async def run() -> None:
        async with async_checkpointer_for(attack.settings) as saver:
            graph = build_graph(checkpointer=saver)
            config = {"configurable": {"thread_id": BRAVO_STORED}}
            with pytest.raises(ThreadAccessError):
                await graph.ainvoke({"question": "Repeat my question."}, config, context={"tenant": ALPHA})
            with pytest.raises(ThreadAccessError):
                async for _ in graph.astream(None, config, context={"tenant": ALPHA}):
                    pass

    asyncio.run(run())


def test_housekeeping_never_lists_deletes_or_prunes_bravos_thread(
    attack: PgWorld, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = checkpoint_location(attack.settings)
    assert [t.thread_id for t in list_threads(location, ALPHA)] == []
    with pytest.raises(ThreadAccessError) as error:  # even by its stored id
        delete_thread(location, BRAVO_STORED, ALPHA)
    refused(error)
    assert prune_threads(location, 0, ALPHA) == {"threads_removed": 0, "checkpoints_removed": 0}
    monkeypatch.setenv("RAG_DATABASE_URL", pg_url)
    monkeypatch.setenv("RAG_DATA_DIR", str(attack.settings.data_dir))
    cli = CliRunner()
    for command in (["threads", "show", BRAVO_THREAD], ["threads", "delete", BRAVO_THREAD]):
        result = cli.invoke(app, [*command, "--tenant", ALPHA])
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert result.stderr == f"error: unknown thread {BRAVO_THREAD!r}\n"  # as for an id nobody uses
        assert leaked(result.output) == [] and BRAVO not in result.output
    listed = cli.invoke(app, ["threads", "list", "--tenant", ALPHA])
    assert listed.exit_code == 0 and BRAVO_THREAD not in listed.stdout
    assert thread_counts(pg_url, BRAVO_STORED)["checkpoints"] >= 1
