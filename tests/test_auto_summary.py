"""Conversations that summarize themselves (conversational memory): every RAG_SUMMARY_EVERY_TURNS new turns in
the background, idle ones by a sweep (`rag summarize --idle`), with the conversation's character /
background / plot ids on the memory's summary and detail chunks.

Why these tests: the trigger (counted from what the store covers, not from the turn number), the background
worker (coalescing, failures logged and never raised into an answer), the ids that must survive into the
store, and the sweep that catches up idle threads all drive real graph turns (fake models) over the real
SQLite checkpointer, app tables and catalog.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from graphs.rag import build_graph
from nodes.conversation_memory import schedule_summary
from nodes.resources import use_resources
from persistence.checkpointer import sqlite_checkpointer
from persistence.database import get_database, utcnow
from persistence.long_term_store import SUMMARIES, namespace
from retrieval import conversation_index
from retrieval.auto_summary import (
    IdleThread,
    SummaryJob,
    SummaryWorker,
    idle_threads,
    is_due,
    run_job,
    summary_worker,
    sweep_idle,
)
from retrieval.conversation_index import DETAIL_LEVEL, SUMMARY_LEVEL, index_conversation, summarized_turns
from retrieval.conversation_summary import (
    ConversationTurn,
    InvalidConversationMetadataError,
    conversation_metadata,
)
from retrieval.knowledge_base import KnowledgeBase
from retrieval.summary_migration import summaries_store
from service.cli import app
from state.context import Context
from tests.conftest import isolated_settings
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel, fake_resources
from tests.helpers.summaries import stored_thread

TURNS = [
    ConversationTurn(n, f"Where did the hero go on day {n}?", f"On day {n} the hero went to town {n}.")
    for n in range(1, 6)
]
IDS = {"character_id": "hero", "background_id": "castle", "related_plot_id": 7}
FLUSH_S = 20.0


def chunks_of(kb: KnowledgeBase, tenant: str, thread_id: str) -> list[Any]:
    """The stored items of a thread's memory (the long-term store's, in chunk form)."""
    return list(stored_thread(kb, tenant, thread_id))


# --- the ids and the count the store keeps ---------------------------------------------------------------


def test_conversation_metadata_keeps_the_three_ids_and_names_what_it_refuses() -> None:
    assert conversation_metadata({**IDS, "character_id": "hero", "background_id": ""}) == {
        "character_id": "hero",
        "related_plot_id": 7,
    }
    for bad, named in (
        ({"level": "summary"}, "'level' is not one of"),
        ({"character_id": True}, "character_id"),
        ({"character_id": ["a"]}, "character_id"),
        ({"background_id": "x" * 129}, "background_id"),
        ({"background_id": "line\nbreak"}, "background_id"),
    ):
        with pytest.raises(InvalidConversationMetadataError, match=named):
            conversation_metadata(bad)


def test_summary_and_detail_chunks_keep_the_conversations_ids(
    make_settings: Any, make_kb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conversation_index, "SUMMARY_BLOCK_TURNS", 2)
    kb = make_kb(make_settings())
    index_conversation(kb, TURNS[:3], thread_id="t1", conversation_id="c1", tenant="default", metadata=IDS)
    chunks = chunks_of(kb, "default", "t1")
    assert {chunk.metadata["level"] for chunk in chunks} == {SUMMARY_LEVEL, DETAIL_LEVEL}
    assert len(chunks) == 5
    for chunk in chunks:
        assert (chunk.metadata["character_id"], chunk.metadata["background_id"]) == ("hero", "castle")
        assert chunk.metadata["related_plot_id"] == 7 and chunk.metadata["conversation_id"] == "c1"
    # filterable like ingested events' ids: the store's filters (and the director's) scope to the character
    store = summaries_store(kb).store
    hits = store.search(namespace(SUMMARIES, "default"), filter={"character_id": "hero"}, limit=10)
    assert len(hits) == 5 and all(hit.value["character_id"] == "hero" for hit in hits)
    assert store.search(namespace(SUMMARIES, "default"), filter={"character_id": "x"}, limit=10) == []


def test_the_store_says_how_many_turns_its_memory_covers(kb: KnowledgeBase) -> None:
    assert summarized_turns(kb, "t1", tenant="default") == 0
    index_conversation(kb, TURNS[:2], thread_id="t1", conversation_id="c1", tenant="default")
    assert summarized_turns(kb, "t1", tenant="default") == 2
    index_conversation(kb, TURNS, thread_id="t1", conversation_id="c1", tenant="default")
    assert summarized_turns(kb, "t1", tenant="default") == 5
    assert summarized_turns(kb, "t1", tenant="other") == 0  # per tenant


def test_a_grown_thread_asks_the_model_about_its_new_block_only(
    make_settings: Any, make_kb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conversation_index, "SUMMARY_BLOCK_TURNS", 2)
    kb = make_kb(make_settings())
    calls: list[int] = []

    def summarize(block: list[ConversationTurn]) -> str:
        calls.append(block[0].number)
        return f"The hero travelled on days {block[0].number} to {block[-1].number}."

    index_conversation(
        kb, TURNS[:2], thread_id="t1", conversation_id="c1", tenant="default", summarize=summarize
    )
    index_conversation(
        kb, TURNS[:4], thread_id="t1", conversation_id="c1", tenant="default", summarize=summarize
    )
    assert calls == [1, 3]  # block 1 (turns 1-2) kept its summary; only block 2 (turns 3-4) was asked
    summaries = [c.text for c in chunks_of(kb, "default", "t1") if c.metadata["level"] == SUMMARY_LEVEL]
    assert any("days 1 to 2" in text for text in summaries) and any(
        "days 3 to 4" in text for text in summaries
    )


# --- when a thread is due, and the worker ----------------------------------------------------------------


def test_a_thread_is_due_after_every_n_new_turns_since_its_memory() -> None:
    assert not is_due(3, 0, 4) and is_due(4, 0, 4) and not is_due(7, 4, 4) and is_due(8, 4, 4)
    assert not is_due(100, 0, 0)  # 0 = off
    assert is_due(9, 4, 4)  # a summary that failed at turn 8 is retried at turn 9, not at turn 12


def test_the_worker_runs_the_newest_job_of_a_thread_and_survives_a_failure(
    caplog: pytest.LogCaptureFixture, kb: KnowledgeBase
) -> None:
    gate = threading.Event()
    ran: list[tuple[str, int]] = []

    def run(job: SummaryJob) -> None:
        gate.wait(FLUSH_S)
        if job.thread_id == "broken":
            raise RuntimeError("store down")
        ran.append((job.thread_id, len(job.turns)))

    worker = SummaryWorker(run)
    job = SummaryJob(kb=kb, turns=(), thread_id="first", conversation_id="c", tenant="default")
    worker.submit(job)  # occupies the worker until the gate opens
    for count in (1, 2, 3):  # queued while the worker is busy: only the newest of thread t1 runs
        worker.submit(SummaryJob(kb, tuple(TURNS[:count]), "t1", "c1", "default"))
    worker.submit(SummaryJob(kb, (), "broken", "c2", "default"))
    with caplog.at_level(logging.WARNING):
        gate.set()
        assert worker.flush(FLUSH_S)
    assert ran == [("first", 0), ("t1", 3)]
    assert worker.failed == 1 and "could not summarize thread broken" in caplog.text


def test_run_job_writes_only_a_due_thread(kb: KnowledgeBase) -> None:
    job = SummaryJob(kb, tuple(TURNS[:3]), "t1", "c1", "default", metadata=IDS, every=4)
    assert run_job(job) is None and chunks_of(kb, "default", "t1") == []
    result = run_job(SummaryJob(kb, tuple(TURNS[:4]), "t1", "c1", "default", metadata=IDS, every=4))
    assert result is not None and result.turns == 4


# --- through the graph ----------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[KnowledgeBase, Any]]:
    """A knowledge base, fake models and the agentic graph on the real SQLite checkpointer, summarizing every
    2 turns; the CLI sees the same data folder."""
    monkeypatch.setattr(conversation_index, "SUMMARY_BLOCK_TURNS", 2)
    settings = isolated_settings(tmp_path, summary_every_turns=2)
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    kb = KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    model = TaskChatModel(fallback="The hero went to town.")
    graph = build_graph(sqlite_checkpointer(settings))
    with use_resources(fake_resources(kb, model, settings=settings)):
        yield kb, graph
    assert summary_worker().flush(FLUSH_S)
    kb.close()


def ask(graph: Any, question: str, thread: str, tenant: str = "acme", **inputs: Any) -> dict[str, Any]:
    """One chat turn (no retrieval needed) on `thread`."""
    config = {"configurable": {"thread_id": thread}}
    context = Context(tenant=tenant, answer_source="chat")
    return dict(graph.invoke({"question": question, **inputs}, config=config, context=context))


def test_a_conversation_summarizes_itself_every_n_turns_with_its_ids(
    store: tuple[KnowledgeBase, Any],
) -> None:
    kb, graph = store
    ask(
        graph,
        "Where did the hero go?",
        "t1",
        conversation_id="c1",
        conversation_metadata={"character_id": "hero"},
    )
    assert summary_worker().flush(FLUSH_S)
    assert chunks_of(kb, "acme", "t1") == []  # 1 turn: not due yet
    out = ask(
        graph, "And then?", "t1", conversation_id="c1", conversation_metadata={"background_id": "castle"}
    )
    assert out["answer"]  # the answer did not wait for, nor depend on, the summary
    assert summary_worker().flush(FLUSH_S)
    chunks = chunks_of(kb, "acme", "t1")
    assert len(chunks) == 3 and summarized_turns(kb, "t1", tenant="acme") == 2  # 1 summary + 2 turns
    for chunk in chunks:  # ids given on different turns both kept (a turn replaces only what it gives)
        assert chunk.metadata["character_id"] == "hero" and chunk.metadata["background_id"] == "castle"
        assert chunk.metadata["conversation_id"] == "c1" and chunk.metadata["thread_id"] == "t1"
    assert chunks_of(kb, "default", "t1") == []  # written into the thread's own tenant only
    ask(graph, "Who did he meet?", "t1", conversation_id="c1")
    assert summary_worker().flush(FLUSH_S)
    assert summarized_turns(kb, "t1", tenant="acme") == 2  # 1 new turn: not due
    ask(graph, "What did he buy?", "t1", conversation_id="c1")
    assert summary_worker().flush(FLUSH_S)
    assert summarized_turns(kb, "t1", tenant="acme") == 4


def test_a_thread_without_a_conversation_id_is_not_summarized(store: tuple[KnowledgeBase, Any]) -> None:
    kb, graph = store
    for question in ("What is the capital of France?", "And of Spain?"):
        ask(graph, question, "plain")
    assert summary_worker().flush(FLUSH_S)
    assert kb.catalog.count_chunks() == 0


def test_a_failing_summary_never_costs_the_answer(
    store: tuple[KnowledgeBase, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kb, graph = store

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("embedding server down")

    monkeypatch.setattr("retrieval.auto_summary.index_conversation", broken)
    with caplog.at_level(logging.WARNING):
        for question in ("Where did the hero go?", "And then?"):
            assert ask(graph, question, "t1", conversation_id="c1")["answer"]
        assert summary_worker().flush(FLUSH_S)
    assert "could not summarize thread t1 of tenant acme" in caplog.text and kb.catalog.count_chunks() == 0


def test_bad_conversation_metadata_is_refused_before_the_turn(store: tuple[KnowledgeBase, Any]) -> None:
    _kb, graph = store
    with pytest.raises(ValueError, match="invalid conversation_metadata: conversation metadata key 'level'"):
        ask(graph, "Where?", "t1", conversation_id="c1", conversation_metadata={"level": "summary"})


def test_schedule_summary_needs_a_thread(store: tuple[KnowledgeBase, Any]) -> None:
    state: Any = {"conversation_id": "c1", "messages": []}
    assert schedule_summary(state, "acme", "") is False  # a run without a checkpointer has no thread


# --- the idle sweep -------------------------------------------------------------------------------------


def test_the_idle_sweep_catches_up_idle_conversations_of_every_tenant(
    store: tuple[KnowledgeBase, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    kb, graph = store
    monkeypatch.setattr(kb.settings, "summary_every_turns", 0)  # nothing written after the turns
    ask(graph, "Where did the hero go?", "t1", conversation_id="c1", conversation_metadata=IDS)
    ask(graph, "Where did the villain go?", "t9", tenant="other", conversation_id="c9")
    ask(graph, "No conversation id here", "plain")
    assert kb.catalog.count_chunks() == 0
    database = get_database(kb.settings)
    assert sweep_idle(kb, idle_s=3600).checked == 0  # nobody idle for an hour yet
    later = utcnow() + timedelta(hours=2)
    report = sweep_idle(kb, idle_s=3600, now=later)
    assert report.checked == 2 and not report.failed
    assert {(r["tenant"], r["thread_id"]) for r in report.summarized} == {("acme", "t1"), ("other", "t9")}
    acme = chunks_of(kb, "acme", "t1")
    assert acme and all(
        c.metadata["character_id"] == "hero" and c.metadata["conversation_id"] == "c1" for c in acme
    )
    assert {c.metadata["conversation_id"] for c in chunks_of(kb, "other", "t9")} == {"c9"}
    again = sweep_idle(kb, idle_s=3600, now=later)
    assert again.checked == 2 and again.summarized == []  # covered already: no checkpoint read
    # a periodic sweep only looks at the threads that went idle since its last look
    since = idle_threads(database, idle_before=later, idle_since=later - timedelta(minutes=1))
    assert since == []


def test_a_broken_thread_does_not_stop_the_sweep(
    store: tuple[KnowledgeBase, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    kb, graph = store
    ask(graph, "Where did the hero go?", "t1", conversation_id="c1")
    ghost = IdleThread("acme", "ghost", "c0", 3, utcnow())
    real = idle_threads(get_database(kb.settings), idle_before=utcnow(), idle_since=None)
    monkeypatch.setattr("retrieval.auto_summary.idle_threads", lambda *_args, **_kwargs: [ghost, *real])
    report = sweep_idle(kb, idle_s=0)
    assert report.failed == [{"tenant": "acme", "thread_id": "ghost", "error": "ThreadNotFoundError"}]
    assert [r["thread_id"] for r in report.summarized] == ["t1"]


def test_rag_summarize_idle_and_ids_on_the_command_line(store: tuple[KnowledgeBase, Any]) -> None:
    kb, graph = store
    ask(graph, "Where did the hero go?", "t1", conversation_id="c1")
    runner = CliRunner()
    both = runner.invoke(app, ["summarize", "--thread", "t1", "--idle"])
    assert both.exit_code == 2 and "not both" in both.stderr
    neither = runner.invoke(app, ["summarize"])
    assert neither.exit_code == 2 and "--thread ID" in neither.stderr
    swept = runner.invoke(app, ["summarize", "--idle", "--json"], env={"RAG_SUMMARY_IDLE_S": "0"})
    assert swept.exit_code == 0, swept.output
    report = json.loads(swept.stdout)
    assert [r["thread_id"] for r in report["summarized"]] == ["t1"]
    by_hand = runner.invoke(
        app, ["summarize", "--thread", "t1", "--tenant", "acme", "--character-id", "hero", "--json"]
    )
    assert by_hand.exit_code == 0, by_hand.output
    assert json.loads(by_hand.stdout)["conversation_id"] == "c1"  # the thread's own conversation id
    assert {c.metadata["character_id"] for c in chunks_of(kb, "acme", "t1")} == {"hero"}
