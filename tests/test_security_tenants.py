"""Adversarial: tenant A attacks tenant B's documents, threads and history through every interface, and must
get nothing of B's: no B text, no B chunk id, no B history in any output, in any prompt, or in B's thread.

Why a model that echoes its prompt: a leak only shows in an answer if something copies it there. Every reply
of the fake model is the text of the prompt it received, so any B passage or B turn that reaches any prompt of
A's run comes back in A's output; every prompt is also recorded and checked directly. Graph, checkpointer,
CLI and stores are real (fake embeddings); B's canaries are words that occur only in B's documents and B's
conversation, never in A's questions (an echoed question is no leak).

Thread ids are scoped per tenant (persistence.threads.scoped_thread_id): through the runner (CLI,
API, `Session`), A naming B's thread id gets a thread of its own, exactly as for an id nobody uses, so A
can neither read nor lock B's thread nor learn that the id exists. Below the runner, the graph itself
refuses a run of A on B's stored thread: a replay (`invoke(None, config)`, also by checkpoint id and
async like the server) and a turn; a graph input `tenant` that differs from the context's is refused too.
Nothing A does may change B's stored thread byte for byte (LangGraph stores a run's input before the first
node runs, so the check must come earlier).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import Result
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from benchmarks.chaos import ALPHA, ALPHA_DOCS, BRAVO, BRAVO_CANARIES, BRAVO_DOCS, leaked
from config.settings import Settings
from graphs.rag import build_graph
from graphs.runner import Session
from nodes.resources import Resources, use_resources
from nodes.start_turn import InvalidQuestionError
from persistence.catalog import chunks_table
from persistence.checkpointer import async_sqlite_checkpointer, sqlite_checkpointer
from persistence.threads import ThreadAccessError, delete_thread, list_threads, scoped_thread_id
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.cli import EXIT_BAD_INPUT, app
from state.context import Context
from tests.conftest import isolated_settings, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel, fake_resources

BRAVO_THREAD = "t-7f3a9c"  # names no tenant: the refusal must not name the owner
BRAVO_STORED = scoped_thread_id(BRAVO, BRAVO_THREAD)  # the id under which B's thread is stored
UNUSED_THREAD = "t-0c11d2"  # an id no tenant uses
BRAVO_QUESTION = f"What does Zorblatine hum at? ({BRAVO_CANARIES[2]})"


class EchoModel(TaskChatModel):
    """Replies with the prompt it was given: whatever reaches a prompt reaches the output."""

    def _reply(self, task: str, messages: list[BaseMessage]) -> str:
        return " ".join(str(message.content) for message in messages)[:6000]


def leaks(text: str, bravo_ids: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """B's canaries (the chaos benchmark's judge) and chunk ids found in `text`."""
    return leaked(text) + [i for i in bravo_ids if i in text]


class World:
    """B's and A's documents, B's conversation, the fake model and what it was asked."""

    def __init__(self, settings: Settings, kb: KnowledgeBase, model: EchoModel, bravo_ids: set[str]) -> None:
        self.settings, self.kb, self.model, self.bravo_ids = settings, kb, model, bravo_ids

    def resources(self) -> Resources:
        return fake_resources(self.kb, self.model, settings=self.settings, strength="strong")

    def stored(self) -> tuple[list[list[str]], int, int]:
        """B's thread as stored: its messages (read straight from the saver, no tenant check on this path),
        and its checkpoint and write rows."""
        graph = build_graph(sqlite_checkpointer(self.settings))
        values = graph.get_state({"configurable": {"thread_id": BRAVO_STORED}}).values or {}
        messages = [[m.type, str(m.content)] for m in values.get("messages", [])]
        with sqlite3.connect(str(self.settings.checkpoint_path)) as connection:
            (checkpoints,) = connection.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (BRAVO_STORED,)
            ).fetchone()
            (writes,) = connection.execute(
                "SELECT COUNT(*) FROM writes WHERE thread_id = ?", (BRAVO_STORED,)
            ).fetchone()
        return messages, checkpoints, writes

    def prompt_leaks(self, since: int) -> list[str]:
        """Canaries in any prompt the model received since call number `since`."""
        found: list[str] = []
        for _task, messages in self.model.calls[since:]:
            found += leaks(" ".join(str(message.content) for message in messages), self.bravo_ids)
        return found


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("security")
    settings = isolated_settings(root)
    kb = KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    write_corpus(root / "bravo", BRAVO_DOCS)
    write_corpus(root / "alpha", ALPHA_DOCS)
    assert ingest_paths(kb, [root / "bravo"], tenant=BRAVO).count("indexed") == 2
    assert ingest_paths(kb, [root / "alpha"], tenant=ALPHA).count("indexed") == 1
    with kb.catalog.engine.connect() as connection:
        rows = connection.execute(chunks_table.select().where(chunks_table.c.tenant == BRAVO)).mappings()
        bravo_ids = {row["chunk_id"] for row in rows}
    assert bravo_ids
    world = World(settings, kb, EchoModel(), bravo_ids)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        with use_resources(world.resources()):
            out = Session(settings).ask(BRAVO_QUESTION, thread_id=BRAVO_THREAD, context=Context(tenant=BRAVO))
    # The set-up must show B's thread really holds B's secrets, so "no leak" below means refused, not empty.
    stored_messages, _, _ = world.stored()
    assert len(stored_messages) == 2 and leaks(" ".join(text for _, text in stored_messages))
    assert leaks(json.dumps(out, default=str))
    yield world
    kb.close()


@pytest.fixture
def attack(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """The world with its fakes installed for the CLI and the graph; B's thread checked intact after."""
    monkeypatch.setenv("RAG_DATA_DIR", str(world.settings.data_dir))
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, settings=None: world.kb))
    before = world.stored()
    since = len(world.model.calls)
    with use_resources(world.resources()):
        yield world
    assert world.stored() == before, "tenant A changed B's stored thread"
    assert world.prompt_leaks(since) == [], "B's text reached a prompt of A's run"
    for thread in list_threads(world.settings.checkpoint_path):  # the next attack starts from B's alone
        if thread.thread_id != BRAVO_STORED:
            delete_thread(world.settings.checkpoint_path, thread.thread_id)


def cli(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=stdin)


def assert_own_thread(result: Result, world: World) -> None:
    """Exit 0, no traceback, nothing of B's: the id named a thread of the caller's own."""
    output = result.stdout + result.stderr
    assert result.exit_code == 0, output
    assert "Traceback" not in output
    assert leaks(output, world.bravo_ids) == []
    assert "another tenant" not in output


def without_id(text: str, *thread_ids: str) -> str:
    """`text` with the thread ids blanked, to compare what two ids look like from outside."""
    for thread_id in thread_ids:
        text = text.replace(thread_id, "<id>")
    return text


# --- turns and chat on B's thread id --------------------------------------------------------------
def test_ask_on_bravos_thread_id_starts_the_callers_own_thread(attack: World) -> None:
    result = cli("ask", "What did I ask before?", "--tenant", ALPHA, "--thread", BRAVO_THREAD, "--json")
    assert_own_thread(result, attack)
    assert json.loads(result.stdout)["thread_id"] == BRAVO_THREAD  # the caller keeps the id it chose
    history = Session(attack.settings).history(BRAVO_THREAD, tenant=ALPHA)
    assert [m.type for m in history["messages"]] == ["human", "ai"]  # A's one turn, none of B's


def test_ask_on_bravos_thread_id_as_the_default_tenant_starts_its_own_thread(attack: World) -> None:
    assert_own_thread(cli("ask", "What did I ask before?", "--thread", BRAVO_THREAD), attack)


def test_chat_on_bravos_thread_id_starts_the_callers_own_thread(attack: World) -> None:
    result = cli("chat", "--tenant", ALPHA, "--thread", BRAVO_THREAD, stdin="Repeat my last question.\n\n")
    assert_own_thread(result, attack)


def test_session_ask_and_stream_on_bravos_thread_id_never_reach_it(attack: World) -> None:
    session = Session(attack.settings)
    out = session.ask("What did I ask before?", thread_id=BRAVO_THREAD, context=Context(tenant=ALPHA))
    assert out["thread_id"] == BRAVO_THREAD and leaks(json.dumps(out, default=str), attack.bravo_ids) == []
    items = list(session.stream("Say it again.", thread_id=BRAVO_THREAD, context=Context(tenant=ALPHA)))
    assert leaks(json.dumps(items, default=str), attack.bravo_ids) == []


# --- thread housekeeping and state reads ----------------------------------------------------------
def test_threads_show_of_bravos_thread_id_looks_like_an_unknown_id(attack: World) -> None:
    taken = cli("threads", "show", BRAVO_THREAD, "--tenant", ALPHA)
    unused = cli("threads", "show", UNUSED_THREAD, "--tenant", ALPHA)
    assert taken.exit_code == unused.exit_code != 0
    assert without_id(taken.stderr, BRAVO_THREAD) == without_id(unused.stderr, UNUSED_THREAD)
    assert leaks(taken.stdout + taken.stderr, attack.bravo_ids) == [] and BRAVO not in taken.stderr
    default = cli("threads", "show", BRAVO_THREAD)
    assert default.exit_code == unused.exit_code and "Traceback" not in default.output


def test_threads_list_shows_only_the_callers_threads(attack: World) -> None:
    result = cli("threads", "list", "--tenant", ALPHA)
    assert result.exit_code == 0, result.output
    assert BRAVO_THREAD not in result.stdout and leaks(result.stdout) == []
    owned = cli("threads", "list", "--tenant", BRAVO)  # B itself does see it, by the id it chose
    assert owned.exit_code == 0 and BRAVO_THREAD in owned.stdout and BRAVO_STORED not in owned.stdout
    assert [t.thread_id for t in list_threads(attack.settings.checkpoint_path, ALPHA)] == []


def test_threads_delete_and_prune_leave_bravos_thread(attack: World) -> None:
    taken = cli("threads", "delete", BRAVO_THREAD, "--tenant", ALPHA)
    unused = cli("threads", "delete", UNUSED_THREAD, "--tenant", ALPHA)
    assert taken.exit_code == unused.exit_code != 0
    assert without_id(taken.stderr, BRAVO_THREAD) == without_id(unused.stderr, UNUSED_THREAD)
    result = cli("threads", "prune", "--keep", "0", "--tenant", ALPHA)
    assert result.exit_code == 0, result.output
    assert "removed 0 threads" in result.stdout


def test_session_history_of_bravos_thread_id_is_empty(attack: World) -> None:
    assert Session(attack.settings).history(BRAVO_THREAD, tenant=ALPHA) == {}
    assert Session(attack.settings).history(BRAVO_THREAD, tenant=BRAVO)["messages"]


# --- graph-level paths that never pass through the runner -----------------------------------------
@pytest.mark.parametrize("context", [{"tenant": ALPHA}, None], ids=["alpha", "no-context"])
def test_replay_of_bravos_thread_is_refused(attack: World, context: dict[str, str] | None) -> None:
    graph = build_graph(sqlite_checkpointer(attack.settings))
    config: dict[str, Any] = {"configurable": {"thread_id": BRAVO_STORED}}
    with pytest.raises(ThreadAccessError):
        graph.invoke(None, config, context=context)
    with pytest.raises(ThreadAccessError):
        graph.invoke({"question": "Repeat my previous question word for word."}, config, context=context)


def test_time_travel_replay_of_bravos_first_checkpoint_is_refused(attack: World) -> None:
    """The first checkpoint of a thread (its input, before start_turn) holds no owner yet: the owner is
    always taken from the thread's latest checkpoint."""
    graph = build_graph(sqlite_checkpointer(attack.settings))
    history = list(graph.get_state_history({"configurable": {"thread_id": BRAVO_STORED}}))
    first = history[-1].config
    with pytest.raises(ThreadAccessError):
        graph.invoke(None, first, context={"tenant": ALPHA})


def test_server_style_async_run_on_bravos_thread_is_refused(attack: World) -> None:
    async def run() -> None:
        async with async_sqlite_checkpointer(attack.settings) as saver:
            graph = build_graph(checkpointer=saver)
            config = {"configurable": {"thread_id": BRAVO_STORED}}
            with pytest.raises(ThreadAccessError):
                await graph.ainvoke({"question": "Repeat my question."}, config, context={"tenant": ALPHA})
            with pytest.raises(ThreadAccessError):
                async for _ in graph.astream(None, config, context={"tenant": ALPHA}):
                    pass

    asyncio.run(run())


def test_start_turn_refuses_another_tenant_on_any_checkpointer(attack: World) -> None:
    """Defence in depth: with a checkpointer that has no owner check (in memory, Postgres), start_turn
    refuses before any model or store is used."""
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "memory-thread"}}
    bravo_model = EchoModel()  # B's own turns: their prompts hold B's text legitimately
    bravo = Resources(attack.settings, knowledge_base=attack.kb, generator=bravo_model, grader=bravo_model)
    with use_resources(bravo):
        graph.invoke({"question": BRAVO_QUESTION}, config, context=Context(tenant=BRAVO))
    calls = len(attack.model.calls)
    with pytest.raises(ThreadAccessError):
        graph.invoke({"question": "What did I ask before?"}, config, context=Context(tenant=ALPHA))
    assert len(attack.model.calls) == calls
    with use_resources(bravo):
        owner_turn = graph.invoke({"question": "And again?"}, config, context=Context(tenant=BRAVO))
    assert [m.type for m in owner_turn["messages"]] == ["human", "ai", "human", "ai"]


# --- the graph input's tenant ---------------------------------------------------------------------
def test_graph_input_tenant_cannot_override_the_context() -> None:
    with pytest.raises(InvalidQuestionError) as refused:
        build_graph().invoke({"question": "What is Zorblatine?", "tenant": BRAVO}, context={"tenant": ALPHA})
    assert f"'{BRAVO}'" in str(refused.value) and f"'{ALPHA}'" in str(refused.value)


def test_graph_input_tenant_equal_to_the_context_is_accepted(attack: World) -> None:
    out = build_graph().invoke(
        {"question": "Which planet is the largest?", "tenant": ALPHA}, context={"tenant": ALPHA}
    )
    assert out["answer"] and leaks(json.dumps(out, default=str), attack.bravo_ids) == []


def test_session_input_tenant_override_writes_nothing(attack: World) -> None:
    session = Session(attack.settings)
    with pytest.raises(InvalidQuestionError):
        session.ask("What is Zorblatine?", thread_id="alpha-new", context=Context(tenant=ALPHA), tenant=BRAVO)
    assert session.history("alpha-new", tenant=ALPHA) == {}


# --- documents: questions, search text, filters ---------------------------------------------------
def test_ask_about_bravos_documents_gets_nothing_of_them(attack: World) -> None:
    result = cli("ask", "What is Zorblatine and where is it mined?", "--tenant", ALPHA, "--json")
    assert result.exit_code == 0, result.output
    assert leaks(result.stdout + result.stderr, attack.bravo_ids) == []


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_search_text_of_bravos_documents(attack: World, mode: str) -> None:
    result = cli("search", "Zorblatine mineral valley hum", "--tenant", ALPHA, "--mode", mode, "--json")
    assert result.exit_code == 0, result.output
    assert leaks(result.stdout + result.stderr, attack.bravo_ids) == []


@pytest.mark.parametrize(
    ("filters", "exit_code"),
    [
        # `tenant` is no filter field (retrieval/filters.py): refused as bad input, however it is nested
        ({"tenant": BRAVO}, EXIT_BAD_INPUT),
        ({"$or": [{"tenant": BRAVO}, {"doc_type": "md"}]}, EXIT_BAD_INPUT),
        ({"tenant": {"$ne": ALPHA}}, EXIT_BAD_INPUT),
        # valid filters run, inside alpha's documents only
        ({"doc_type": {"$in": ["md", "txt"]}}, 0),
        ({"title": "Zorblatine"}, 0),
    ],
)
@pytest.mark.parametrize("command", ["search", "ask"])
def test_filters_cannot_reach_bravo(
    attack: World, filters: dict[str, Any], exit_code: int, command: str
) -> None:
    result = cli(command, "Zorblatine", "--tenant", ALPHA, "--filter", json.dumps(filters), "--json")
    assert result.exit_code == exit_code, result.output
    assert "Traceback" not in result.output + result.stderr
    assert leaks(result.stdout + result.stderr, attack.bravo_ids) == []
