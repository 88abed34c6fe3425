"""The conversation summarizer: a thread's turns become detail events with block summaries linked above them,
so retrieval scoped to the conversation finds the summary and "deep search" expands it into the turns.

Why these tests: the layout (levels, shared doc_id, conversation id) is a contract with nodes/retrieve.py's
expansion; re-summarizing must replace, not duplicate; the thread is read from the real SQLite checkpointer
after real graph turns (fake models), and the command is run through the CLI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from typer.testing import CliRunner

from graphs.rag import build_graph
from nodes.resources import Resources, use_resources
from nodes.retrieve import retrieve
from persistence import summary_store
from persistence.checkpointer import sqlite_checkpointer
from persistence.vector_store import InvalidCollectionError
from retrieval import conversation_index
from retrieval.conversation_index import (
    DETAIL_LEVEL,
    SUMMARY_LEVEL,
    ThreadNotFoundError,
    block_doc_id,
    index_conversation,
    summarize_thread,
)
from retrieval.conversation_summary import (
    SUMMARY_MAX_TOKENS,
    ConversationTurn,
    extractive_summary,
    turns_from_messages,
)
from retrieval.knowledge_base import KnowledgeBase
from retrieval.tokens import count_tokens
from service.cli import app
from state.context import Context
from state.graph_state import RetrieveTask
from state.schemas import SearchQuery
from tests.conftest import isolated_settings, runtime
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel, fake_resources
from tests.helpers.summaries import stored_thread

TURNS = [
    ConversationTurn(1, "Which telescope should I buy for planets?", "A 127 mm Maksutov suits planets well."),
    ConversationTurn(
        2, "How do I collimate a Newtonian?", "Centre the secondary first. Then adjust the primary."
    ),
    ConversationTurn(3, "What eyepiece for Saturn?", "A 6 mm eyepiece shows the rings of Saturn."),
]


@pytest.fixture
def small_blocks(make_settings: Any, make_kb: Any, monkeypatch: pytest.MonkeyPatch) -> KnowledgeBase:
    """A knowledge base whose summaries cover two turns each."""
    monkeypatch.setattr(conversation_index, "SUMMARY_BLOCK_TURNS", 2)
    return make_kb(make_settings())


# --- turns and the extractive summary -------------------------------------------------------------------


def test_turns_pair_each_question_with_the_replies_after_it() -> None:
    messages: list[BaseMessage] = [
        SystemMessage("ignored"),
        AIMessage("a greeting before any question is not a turn"),
        HumanMessage("first?"),
        AIMessage("one"),
        AIMessage("two"),
        HumanMessage("  "),
        HumanMessage("second?"),
    ]
    assert turns_from_messages(messages) == [
        ConversationTurn(1, "first?", "one\ntwo"),
        ConversationTurn(2, "second?", ""),
    ]
    assert ConversationTurn(2, "second?", "").text() == "Turn 2\nUser: second?"


def test_extractive_summary_keeps_each_question_and_its_best_answer_sentence() -> None:
    summary = extractive_summary(TURNS, 200)
    assert summary.startswith("Summary of conversation turns 1-3:")
    for turn in TURNS:
        assert turn.question in summary
    assert "Centre the secondary first." in summary or "Then adjust the primary." in summary
    assert "127 mm Maksutov" in summary and "6 mm eyepiece" in summary


def test_extractive_summary_stays_within_its_token_budget() -> None:
    long_turns = [
        ConversationTurn(n, "Tell me about comets " + "tail " * 80, "Comets have tails.") for n in range(9)
    ]
    assert count_tokens(extractive_summary(long_turns, 64)) <= 64


# --- the store layout -----------------------------------------------------------------------------------


def test_summaries_and_details_share_their_block_doc_id(small_blocks: KnowledgeBase) -> None:
    result = index_conversation(small_blocks, TURNS, thread_id="t1", conversation_id="c1", tenant="default")
    assert (result.status, result.summaries, result.details, result.collection) == (
        "indexed",
        2,
        3,
        "conversations",
    )
    chunks = stored_thread(small_blocks, "default", "t1")
    assert len(chunks) == 5
    by_level: dict[str, list[Any]] = {SUMMARY_LEVEL: [], DETAIL_LEVEL: []}
    for chunk in chunks:
        by_level[chunk.metadata["level"]].append(chunk)
        assert chunk.metadata["conversation_id"] == "c1" and chunk.metadata["doc_type"] == "event"
        assert chunk.metadata["thread_id"] == "t1"
    summaries = {chunk.metadata["doc_id"]: chunk for chunk in by_level[SUMMARY_LEVEL]}
    assert set(summaries) == {block_doc_id("t1", 1), block_doc_id("t1", 2)}
    details = sorted(by_level[DETAIL_LEVEL], key=lambda chunk: chunk.metadata["turn_first"])
    assert [chunk.metadata["doc_id"] for chunk in details] == [
        block_doc_id("t1", 1),
        block_doc_id("t1", 1),
        block_doc_id("t1", 2),
    ]
    assert details[1].text == TURNS[1].text()  # a turn is one unchunked event
    assert (
        summaries[block_doc_id("t1", 2)].metadata["turn_first"],
        summaries[block_doc_id("t1", 2)].metadata["turn_last"],
    ) == (3, 3)


def test_the_retrieve_node_levels_match_the_summarizers() -> None:
    assert (summary_store.SUMMARY_LEVEL, summary_store.DETAIL_LEVEL) == (SUMMARY_LEVEL, DETAIL_LEVEL)


def test_unchanged_thread_is_skipped_and_a_grown_one_replaced(small_blocks: KnowledgeBase) -> None:
    index_conversation(small_blocks, TURNS[:2], thread_id="t1", conversation_id="c1", tenant="default")
    before = {chunk.chunk_id for chunk in stored_thread(small_blocks, "default", "t1")}
    again = index_conversation(
        small_blocks, TURNS[:2], thread_id="t1", conversation_id="c1", tenant="default"
    )
    assert again.status == "skipped"
    grown = index_conversation(small_blocks, TURNS, thread_id="t1", conversation_id="c1", tenant="default")
    assert grown.status == "indexed"
    after = stored_thread(small_blocks, "default", "t1")
    assert len(after) == 5 and before <= {
        chunk.chunk_id for chunk in after
    }  # block 1 unchanged, block 2 added
    assert len(stored_thread(small_blocks, "default", "t1")) == 5  # nothing duplicated


def test_bad_names_and_empty_threads_are_refused(kb: KnowledgeBase) -> None:
    with pytest.raises(ThreadNotFoundError, match="no conversation turns"):
        index_conversation(kb, [], thread_id="t1", conversation_id="c1", tenant="default")
    with pytest.raises(InvalidCollectionError):
        index_conversation(kb, TURNS, thread_id="t1", conversation_id="c1", tenant="bad tenant!")
    with pytest.raises(ValueError, match="empty conversation id"):
        index_conversation(kb, TURNS, thread_id="t1", conversation_id=" ", tenant="default")


def test_a_strong_models_summary_is_used_and_garbage_falls_back(kb: KnowledgeBase) -> None:
    from retrieval.conversation_summary import model_summarizer

    written = TaskChatModel(fallback="The user chose a 127 mm Maksutov for planets.")
    summary = model_summarizer(written, 100)(TURNS)
    assert summary == "The user chose a 127 mm Maksutov for planets."
    assert "turns 1 to 3" in str(written.calls[0][1][-1].content)  # the transcript went to the model

    result = index_conversation(
        kb,
        TURNS,
        thread_id="t2",
        conversation_id="c2",
        tenant="default",
        summarize=lambda _turns: "%%% ### %%%",
    )
    chunks = stored_thread(kb, "default", "t2")
    summary_text = next(chunk.text for chunk in chunks if chunk.metadata["level"] == SUMMARY_LEVEL)
    assert result.summarizer == "model" and summary_text == extractive_summary(TURNS, SUMMARY_MAX_TOKENS)


# --- deep search over the written memory ----------------------------------------------------------------


def test_deep_search_expands_a_retrieved_summary_into_its_turns(small_blocks: KnowledgeBase) -> None:
    index_conversation(small_blocks, TURNS, thread_id="t1", conversation_id="c1", tenant="default")
    question = "How do I collimate the Newtonian telescope, which secondary and primary?"
    task = RetrieveTask(
        query=SearchQuery(text=question, dense_text=question, purpose="original"),
        tenant="default",
        filters={"level": SUMMARY_LEVEL},
        conversation_id="c1",
        wants_details=True,
    )
    with use_resources(Resources(small_blocks.settings, knowledge_base=small_blocks)):
        documents = retrieve(task, runtime(top_k=1))["documents"]
    summary = documents[0]  # the store's summaries, nearest first, each followed by its details
    assert summary["metadata"]["level"] == SUMMARY_LEVEL and summary["doc_id"] == block_doc_id("t1", 1)
    details = [doc for doc in documents if doc["doc_id"] == block_doc_id("t1", 1)][1:]
    assert {doc["text"] for doc in details} == {TURNS[0].text(), TURNS[1].text()}
    assert all(doc["metadata"]["level"] == DETAIL_LEVEL for doc in details)


# --- from a stored thread, and the command --------------------------------------------------------------


@pytest.fixture
def thread_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KnowledgeBase]:
    """Two real turns on thread t1 (tenant acme) in the SQLite checkpointer; the CLI sees the same data."""
    settings = isolated_settings(tmp_path)
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    kb = KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    model = TaskChatModel(fallback="The Maksutov is a good planetary telescope.")
    resources = fake_resources(kb, model, settings=settings)
    graph = build_graph(sqlite_checkpointer(settings))
    config = {"configurable": {"thread_id": "t1"}}
    with use_resources(resources):
        for question in (TURNS[0].question, TURNS[2].question):
            graph.invoke(
                {"question": question}, config=config, context=Context(tenant="acme", answer_source="chat")
            )
        yield kb
    kb.close()


def test_summarize_thread_reads_the_checkpointer_and_writes_into_the_threads_tenant(
    thread_store: KnowledgeBase,
) -> None:
    result = summarize_thread(thread_store, "t1", conversation_id="c7", tenant="acme")
    assert (result.tenant, result.turns, result.conversation_id, result.status) == (
        "acme",
        2,
        "c7",
        "indexed",
    )
    chunks = stored_thread(thread_store, "acme", "t1")
    details = sorted(
        (c for c in chunks if c.metadata["level"] == DETAIL_LEVEL), key=lambda c: c.metadata["turn_first"]
    )
    assert [chunk.text.splitlines()[1] for chunk in details] == [
        f"User: {TURNS[0].question}",
        f"User: {TURNS[2].question}",
    ]
    assert all("Assistant: The Maksutov" in chunk.text for chunk in details)
    assert stored_thread(thread_store, "default", "t1") == []


def test_summarize_thread_refuses_another_tenant_and_unknown_threads(thread_store: KnowledgeBase) -> None:
    for tenant in ("other", None):  # None: the default tenant, which does not own t1 either
        with pytest.raises(ThreadNotFoundError) as refused:  # looks exactly like an unknown id
            summarize_thread(thread_store, "t1", tenant=tenant)
        assert str(refused.value) == "unknown thread 't1'"  # the owner is never named
    with pytest.raises(ThreadNotFoundError, match="unknown thread 'nope'"):
        summarize_thread(thread_store, "nope")
    written = [stored_thread(thread_store, tenant, "t1") for tenant in ("acme", "other", "default")]
    assert written == [[], [], []]  # nothing was written by the refusals


def test_rag_summarize_command(thread_store: KnowledgeBase) -> None:
    runner = CliRunner()
    owner = ["--tenant", "acme"]
    result = runner.invoke(app, ["summarize", "--thread", "t1", "--conversation-id", "c1", "--json", *owner])
    assert result.exit_code == 0, result.output + result.stderr
    report = json.loads(result.stdout)
    assert (
        report["status"] == "indexed" and report["summarizer"] == "extractive" and report["tenant"] == "acme"
    )
    assert len(stored_thread(thread_store, "acme", "t1")) == 3  # one summary, two turns

    again = runner.invoke(app, ["summarize", "--thread", "t1", "--conversation-id", "c1", *owner])
    assert again.exit_code == 0 and "unchanged" in again.stdout

    unknown = runner.invoke(app, ["summarize", "--thread", "nope"])
    assert (
        unknown.exit_code == 2
        and "unknown thread 'nope'" in unknown.stderr
        and "Traceback" not in unknown.output
    )
    foreign = runner.invoke(app, ["summarize", "--thread", "t1", "--tenant", "other"])
    assert foreign.exit_code == 2 and foreign.stderr == "error: unknown thread 't1'\n"  # as if unknown
    assert "acme" not in foreign.stderr
