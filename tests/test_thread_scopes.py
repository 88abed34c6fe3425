"""Thread ids are scoped per tenant: the same id in two tenants is two threads, a tenant cannot lock another
out by claiming the ids it will use, and another tenant's id looks exactly like an unknown one.

Before the scoping, thread ids were one namespace: tenant B's first turn on "t1" made every later turn of
tenant A on "t1" a 403 (A locked out of an id it chose), and the 403 against the 200 of an unused id told B
which ids existed. Threads stored before the scoping keep working for their owner (nothing is lost on
upgrade). Graph, SQLite checkpointer and lock are real; the models are fakes (tests/helpers/fake_rag.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import CheckpointTuple
from typer.testing import CliRunner

from config.settings import Settings
from graphs.rag import build_graph
from graphs.runner import Session
from nodes.resources import use_resources
from persistence.checkpointer import sqlite_checkpointer
from persistence.threads import (
    THREAD_SCOPE_SEPARATOR,
    list_threads,
    resolve_thread_id,
    scoped_thread_id,
    visible_thread_id,
)
from retrieval.knowledge_base import KnowledgeBase
from service.cli import app
from state.context import Context
from tests.fakes import fake_resources
from tests.helpers.fake_rag import answer_for, turn_model

QUESTION_A = "What is 2 + 2?"
QUESTION_B = "What is 3 + 5?"


def stored(owner: str | None) -> CheckpointTuple:
    """A stand-in for a stored root checkpoint whose state names `owner`."""
    values: dict[str, Any] = {"owner_tenant": owner} if owner else {}
    return CheckpointTuple(config={}, checkpoint={"channel_values": values}, metadata={})  # type: ignore[typeddict-item]


def test_scoped_ids_are_per_tenant_and_round_trip() -> None:
    assert scoped_thread_id("acme", "t1") != scoped_thread_id("globex", "t1")
    assert visible_thread_id(scoped_thread_id("acme", "a/b"), "acme") == "a/b"
    assert visible_thread_id("legacy-id", "acme") == "legacy-id"
    assert THREAD_SCOPE_SEPARATOR not in "acme.globex_1-x"  # tenants never hold it: the split is unambiguous


def test_resolution_prefers_the_scoped_thread_then_an_owned_legacy_one() -> None:
    threads = {"t1": stored("acme"), "t2": stored("globex"), scoped_thread_id("acme", "t3"): stored("acme")}
    lookup = threads.get
    assert resolve_thread_id("acme", "t1", lookup) == "t1"  # stored before scoping, owned: kept
    assert resolve_thread_id("acme", "t2", lookup) == scoped_thread_id("acme", "t2")  # another's: new
    assert resolve_thread_id("acme", "t3", lookup) == scoped_thread_id("acme", "t3")
    assert resolve_thread_id("acme", "new", lookup) == scoped_thread_id("acme", "new")


def test_the_same_id_in_two_tenants_is_two_threads(settings: Settings, kb: KnowledgeBase) -> None:
    session = Session(settings)
    with use_resources(fake_resources(kb, turn_model(), settings=settings, strength="strong")):
        first = session.ask(QUESTION_A, thread_id="t1", context=Context(tenant="acme"))
        second = session.ask(QUESTION_B, thread_id="t1", context=Context(tenant="globex"))  # no 403
    assert first["thread_id"] == second["thread_id"] == "t1"
    acme = [m.content for m in session.history("t1", tenant="acme")["messages"]]
    globex = [m.content for m in session.history("t1", tenant="globex")["messages"]]
    assert acme == [QUESTION_A, answer_for(QUESTION_A)]
    assert globex == [QUESTION_B, answer_for(QUESTION_B)]
    assert session.history("t1", tenant="initech") == session.history("never-used", tenant="initech") == {}
    listed = {thread.thread_id for thread in list_threads(settings.checkpoint_path, "acme")}
    assert listed == {scoped_thread_id("acme", "t1")}


def test_a_thread_stored_before_scoping_stays_its_owners(settings: Settings, kb: KnowledgeBase) -> None:
    with use_resources(fake_resources(kb, turn_model(), settings=settings, strength="strong")):
        legacy = build_graph(sqlite_checkpointer(settings))  # the raw id, as every thread was stored before
        legacy.invoke(
            {"question": QUESTION_A}, {"configurable": {"thread_id": "old"}}, context=Context(tenant="acme")
        )
        session = Session(settings)
        session.ask(QUESTION_B, thread_id="old", context=Context(tenant="acme"))
        session.ask(QUESTION_B, thread_id="old", context=Context(tenant="globex"))
    owned = [m.content for m in session.history("old", tenant="acme")["messages"]]
    assert owned == [QUESTION_A, answer_for(QUESTION_A), QUESTION_B, answer_for(QUESTION_B)]  # continued
    other = [m.content for m in session.history("old", tenant="globex")["messages"]]
    assert other == [QUESTION_B, answer_for(QUESTION_B)]  # its own thread, nothing of acme's


def test_threads_list_shows_first_question_turns_and_last_activity(
    settings: Settings, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person recognises a thread by its first question, not its id."""
    session = Session(settings)
    with use_resources(fake_resources(kb, turn_model(), settings=settings, strength="strong")):
        session.ask(QUESTION_A, thread_id="t1", context=Context(tenant="acme"))
        session.ask(QUESTION_B, thread_id="t1", context=Context(tenant="acme"))
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    listed = CliRunner().invoke(app, ["threads", "list", "--tenant", "acme"])
    assert listed.exit_code == 0, listed.output
    line = listed.stdout.strip()
    assert line.startswith("t1  2 turns  last 20") and line.endswith(QUESTION_A), line
    (summary,) = list_threads(settings.checkpoint_path, "acme")
    assert (summary.first_question, summary.turns) == (QUESTION_A, 2) and summary.last_activity
