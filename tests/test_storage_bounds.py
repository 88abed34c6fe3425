"""Storage bounds of conversations: the reset placeholder never leaks, checkpoint bytes per turn stay under
the target, and the checkpointer prunes (the LangGraph server's saver included).

Why: every graph step used to write a full checkpoint (12-18 per turn, 130-370 KB per turn), streamed
updates carried the string placeholder "__reset__", and the server warned that its saver could not prune.
The runs use the fake models (tests.fakes) over a small corpus.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, copy_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_sync_client

from benchmarks.chaos import BYTES_PER_TURN_AT_100_TARGET, BYTES_PER_TURN_TARGET
from config.settings import SettingsError, get_settings, load_settings
from graphs.rag import build_graph
from nodes.resources import Resources, use_resources
from persistence import checkpointer as checkpointer_module
from persistence.checkpointer import (
    async_sqlite_checkpointer,
    prune_parameters,
    server_checkpointer,
    sqlite_checkpointer,
)
from persistence.threads import ThreadAccessError
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from state.graph_state import LEGACY_RESET
from tests.conftest import write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel, fake_resources
from tests.helpers.storage import durability_of
from tests.test_langgraph_sdk import server as sdk_server  # noqa: F401 (the `langgraph dev` fixture)

CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. "
    "Jupiter has 95 known moons; Ganymede is its largest moon. " * 6,
    "mars.md": "# Mars\n\nMars is the fourth planet from the Sun. Mars is red because of iron oxide dust. "
    * 6,
    "saturn.md": "# Saturn\n\nSaturn is the second largest planet; its rings are made of ice and rock. " * 6,
    "venus.md": "# Venus\n\nVenus is the hottest planet; its thick atmosphere traps heat. " * 6,
}
QUESTIONS = [
    "Which planet is the largest?",
    "Why is Mars red?",
    "What are Saturn's rings made of?",
    "Which planet is the hottest?",
    "How many moons does Jupiter have?",
]
#: A grounded answer per question (the fake picks the one whose question is in the prompt).
ANSWERS = {
    QUESTIONS[0]: "Jupiter is the largest planet in the Solar System [1].",
    QUESTIONS[1]: "Mars is red because of iron oxide dust [1].",
    QUESTIONS[2]: "Saturn's rings are made of ice and rock [1].",
    QUESTIONS[3]: "Venus is the hottest planet [1].",
    QUESTIONS[4]: "Jupiter has 95 known moons [1].",
}


def answer(messages: list[Any]) -> str:
    """The answer to the question of the prompt's last message."""
    prompt = str(messages[-1].content)
    return next(text for question, text in reversed(ANSWERS.items()) if question in prompt)


def all_strings(value: Any) -> Iterator[str]:
    """Every string inside a nested update (dict keys and values, lists, dataclass-like objects)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from all_strings(key)
            yield from all_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from all_strings(item)
    elif hasattr(value, "__dict__") or hasattr(value, "__slots__"):
        for name in getattr(value, "__slots__", ()) or vars(value):
            yield from all_strings(getattr(value, name, None))


@pytest.fixture(scope="module")
def corpus_kb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    root = tmp_path_factory.mktemp("storage-bounds")
    write_corpus(root / "corpus", CORPUS)
    kb = KnowledgeBase(
        load_settings(data_dir=root / "rag"), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY
    )
    assert ingest_paths(kb, [root / "corpus"]).count("indexed") == len(CORPUS)
    yield kb
    kb.close()


@pytest.fixture
def model(corpus_kb: KnowledgeBase) -> Iterator[TaskChatModel]:
    fake = TaskChatModel(replies={"generate": answer})
    resources = fake_resources(corpus_kb, fake)
    with use_resources(resources):
        yield fake


# --- the reset placeholder ---------------------------------------------------------------------------------


def test_streamed_updates_never_carry_the_reset_placeholder(model: TaskChatModel) -> None:
    graph = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "stream"}}
    seen_nodes: list[str] = []
    for question in QUESTIONS[:3]:  # later turns reset what earlier turns filled
        for update in graph.stream({"question": question}, config, stream_mode="updates"):
            seen_nodes.extend(update)
            assert "__reset__" not in set(all_strings(update)), update
        state = graph.get_state(config).values
        assert "__reset__" not in set(all_strings(state))
    assert seen_nodes.count("start_turn") == 3 and "cite" in seen_nodes


def test_each_turn_starts_from_reset_counters_and_documents(model: TaskChatModel) -> None:
    """A turn's counters count that turn only: retrieval rounds = the rounds it ran (rewrite + reformulate),
    model calls = the calls it made, and its documents are the ones it retrieved."""
    graph = build_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "counters"}}
    for question in [*QUESTIONS, QUESTIONS[0]]:
        calls_before = len(model.calls)
        nodes: list[str] = []
        retrieved: set[str] = set()
        for update in graph.stream({"question": question}, config, stream_mode="updates"):
            nodes.extend(update)
            for doc in (update.get("retrieve") or {}).get("documents", []):
                retrieved.add(doc["chunk_id"])
        out = graph.get_state(config).values
        assert out["retrieval_rounds"] == nodes.count("rewrite") + nodes.count("reformulate"), question
        assert out["generation_rounds"] == nodes.count("generate"), question
        assert out["llm_calls"] == len(model.calls) - calls_before, question
        assert {doc["chunk_id"] for doc in out["retrieved"]} == retrieved, question
    assert len(out["messages"]) == 2 * (len(QUESTIONS) + 1)


# --- checkpoints per turn (durability) ------------------------------------------------------------------


def checkpoint_rows(path: Path, thread: str) -> tuple[int, int]:
    """(checkpoint rows, write rows) a thread holds in the SQLite checkpoint file."""
    with sqlite3.connect(str(path)) as connection:
        (checkpoints,) = connection.execute(
            "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread,)
        ).fetchone()
        (writes,) = connection.execute(
            "SELECT COUNT(*) FROM writes WHERE thread_id = ?", (thread,)
        ).fetchone()
    return int(checkpoints), int(writes)


def stored_bytes(path: Path, thread: str) -> int:
    """Bytes a thread holds: its checkpoint blobs and metadata plus its pending writes."""
    with sqlite3.connect(str(path)) as connection:
        (checkpoints,) = connection.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints "
            "WHERE thread_id = ?",
            (thread,),
        ).fetchone()
        (writes,) = connection.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?", (thread,)
        ).fetchone()
    return int(checkpoints) + int(writes)


def message_texts(values: dict[str, Any]) -> list[str]:
    return [str(message.content) for message in values.get("messages", [])]


@pytest.fixture
def env_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Set RAG_* variables for the process-wide settings the graph builders read (cache cleared around)."""

    def apply(**variables: str) -> None:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()

    get_settings.cache_clear()
    yield apply
    get_settings.cache_clear()


def test_default_durability_writes_one_checkpoint_per_turn(model: TaskChatModel, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    graph = build_graph(sqlite_checkpointer(path=path, keep=0))
    assert durability_of(graph) == "exit"
    config = {"configurable": {"thread_id": "exit"}}
    for turn, question in enumerate(QUESTIONS[:3], start=1):
        graph.invoke({"question": question}, config)
        assert checkpoint_rows(path, "exit") == (turn, 0), turn
    assert message_texts(graph.get_state(config).values)[::2] == QUESTIONS[:3]


def test_a_callers_durability_wins(model: TaskChatModel, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    graph = build_graph(sqlite_checkpointer(path=path, keep=0))
    updates = list(
        graph.stream({"question": QUESTIONS[0]}, {"configurable": {"thread_id": "own"}}, durability="async")
    )
    checkpoints, writes = checkpoint_rows(path, "own")
    # One checkpoint per step (input, each superstep): at least one per node that ran, never one a turn.
    assert checkpoints >= len(updates) and checkpoints > 1
    assert writes > 0


@pytest.mark.parametrize("durability", ["async", "sync"])
def test_the_durability_setting_applies(
    model: TaskChatModel, tmp_path: Path, env_settings: Callable[..., None], durability: str
) -> None:
    env_settings(RAG_CHECKPOINT_DURABILITY=durability)
    path = tmp_path / "checkpoints.sqlite"
    graph = build_graph(sqlite_checkpointer(path=path, keep=0))
    assert durability_of(graph) == durability
    graph.invoke({"question": QUESTIONS[0]}, {"configurable": {"thread_id": "setting"}})
    assert checkpoint_rows(path, "setting")[0] > 1


def test_a_bad_durability_setting_is_one_clear_error(env_settings: Callable[..., None]) -> None:
    with pytest.raises(SettingsError, match="RAG_CHECKPOINT_DURABILITY"):
        load_settings(checkpoint_durability="sometimes")


def test_bytes_per_turn_at_ten_turns_stay_under_the_target(model: TaskChatModel, tmp_path: Path) -> None:
    """The chaos suite measures this with the real models; here the fake ones guard the default layout."""
    path = tmp_path / "checkpoints.sqlite"
    graph = build_graph(sqlite_checkpointer(path=path, keep=0))
    config = {"configurable": {"thread_id": "ten"}}
    for turn in range(10):
        out = graph.invoke({"question": QUESTIONS[turn % len(QUESTIONS)]}, config)
        assert out["retrieved"], turn
    assert stored_bytes(path, "ten") / 10 <= BYTES_PER_TURN_TARGET
    values = graph.get_state(config).values
    # Each passage is stored once: the turn's passages are in `retrieved`, the working copy is emptied.
    assert values["retrieved"] and values["documents"] == []
    assert len(values["messages"]) == 20


def test_bytes_per_turn_stay_flat_to_turn_one_hundred_by_default(
    model: TaskChatModel, tmp_path: Path
) -> None:
    """Every checkpoint holds the whole conversation, so keeping all of them made each turn cost more than
    the one before (16.4 KB/turn over 10 turns, 32.8 KB at turn 40). With the default
    RAG_CHECKPOINT_KEEP the thread's bytes per turn at turn 100 stay under the target, and the bytes the
    hundredth turn adds are no more than those of the twentieth (plus its own messages' growth)."""
    path = tmp_path / "checkpoints.sqlite"
    graph = build_graph(sqlite_checkpointer(path=path))  # the default keep, from the settings
    config = {"configurable": {"thread_id": "hundred"}}
    added: dict[int, int] = {}
    before = 0
    for turn in range(1, 101):
        graph.invoke({"question": QUESTIONS[turn % len(QUESTIONS)]}, config)
        if turn in (19, 20, 99, 100):
            now = stored_bytes(path, "hundred")
            added[turn], before = now - before, now
    assert before / 100 <= BYTES_PER_TURN_AT_100_TARGET
    assert added[100] <= 1.25 * added[20], added  # flat: keeping all, the 100th added 3x the 20th
    assert len(graph.get_state(config).values["messages"]) == 200  # no turn of the conversation lost


# --- keeping the newest checkpoints ---------------------------------------------------------------------


def test_keep_n_prunes_old_checkpoints_and_their_writes(model: TaskChatModel, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    graph = build_graph(sqlite_checkpointer(path=path, keep=2))
    config = {"configurable": {"thread_id": "kept"}}
    other = {"configurable": {"thread_id": "other"}}
    graph.invoke({"question": QUESTIONS[4]}, other, durability="async")
    other_rows = checkpoint_rows(path, "other")
    turns: list[str] = []
    for question in QUESTIONS[:4]:
        out = graph.invoke({"question": question}, config, durability="async")  # a checkpoint per step
        turns += [question, out["answer"]]
        assert checkpoint_rows(path, "kept")[0] == 2
    with sqlite3.connect(str(path)) as connection:
        kept_ids = {row[0] for row in connection.execute("SELECT checkpoint_id FROM checkpoints")}
        write_ids = {row[0] for row in connection.execute("SELECT checkpoint_id FROM writes")}
    assert write_ids <= kept_ids  # no write of a pruned checkpoint is left behind
    # Pruning is per thread: the other thread lost nothing (it was pruned to 2 by its own save only).
    assert checkpoint_rows(path, "other") == other_rows
    # The thread is whole in its newest checkpoint, and the conversation goes on from it.
    assert message_texts(graph.get_state(config).values) == turns
    out = graph.invoke({"question": QUESTIONS[4]}, config)
    assert message_texts(out) == [*turns, QUESTIONS[4], out["answer"]]
    assert checkpoint_rows(path, "kept")[0] == 2


@pytest.fixture
def strong_model(corpus_kb: KnowledgeBase) -> Iterator[TaskChatModel]:
    """A model strong enough to be asked to contextualize (so its prompt shows what history a turn sees)."""
    fake = TaskChatModel(replies={"generate": answer, "contextualize": QUESTIONS[4]})
    resources = Resources(
        corpus_kb.settings,
        knowledge_base=corpus_kb,
        generator=fake,
        grader=fake,
        strengths={"generate": "strong", "grade": "weak"},
    )
    with use_resources(resources):
        yield fake


def test_a_follow_up_after_pruning_sees_the_earlier_turns(
    strong_model: TaskChatModel, tmp_path: Path
) -> None:
    path = tmp_path / "checkpoints.sqlite"
    graph = build_graph(sqlite_checkpointer(path=path, keep=1))
    config = {"configurable": {"thread_id": "follow-up"}}
    answers = [graph.invoke({"question": q}, config, durability="async")["answer"] for q in QUESTIONS[:2]]
    assert checkpoint_rows(path, "follow-up")[0] == 1
    out = graph.invoke({"question": "And how many moons does it have?"}, config)
    (prompt,) = [str(messages[-1].content) for messages in strong_model.prompts("contextualize")][-1:]
    for question, answer_text in zip(QUESTIONS[:2], answers, strict=True):
        # The history shows each answer on one line (short answer and explanation joined by a space).
        assert f"User: {question}" in prompt and f"Assistant: {' '.join(answer_text.split())}" in prompt
    assert out["standalone_question"] == QUESTIONS[4]
    assert message_texts(out)[::2] == [*QUESTIONS[:2], "And how many moons does it have?"]


def test_prune_keep_latest_and_unknown_strategy(model: TaskChatModel, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    saver = sqlite_checkpointer(path=path, keep=0)
    graph = build_graph(saver)
    for thread in ("a", "b"):
        for question in QUESTIONS[:2]:
            graph.invoke({"question": question}, {"configurable": {"thread_id": thread}})
    assert checkpoint_rows(path, "a")[0] == checkpoint_rows(path, "b")[0] == 2
    before = graph.get_state({"configurable": {"thread_id": "a"}}).values
    saver.prune(["a"], strategy="keep_latest")
    assert checkpoint_rows(path, "a")[0] == 1 and checkpoint_rows(path, "b")[0] == 2
    assert graph.get_state({"configurable": {"thread_id": "a"}}).values == before
    saver.prune(["b"], strategy="delete")
    assert checkpoint_rows(path, "b") == (0, 0)
    with pytest.raises(ValueError, match="unknown prune strategy"):
        saver.prune(["a"], strategy="everything")
    with pytest.raises(ValueError, match="keep must be at least 1"):
        prune_parameters("a", 0)


def test_aprune_keep_latest_and_delete(model: TaskChatModel, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"

    async def run() -> None:
        async with async_sqlite_checkpointer(path=path, keep=0) as saver:
            graph = build_graph(saver)
            for thread in ("a", "b", "c"):
                for question in QUESTIONS[:2]:
                    await graph.ainvoke({"question": question}, {"configurable": {"thread_id": thread}})
            assert [checkpoint_rows(path, thread)[0] for thread in "abc"] == [2, 2, 2]
            before = (await graph.aget_state({"configurable": {"thread_id": "a"}})).values
            await saver.aprune(["a"], strategy="keep_latest")
            assert (await graph.aget_state({"configurable": {"thread_id": "a"}})).values == before
            await saver.aprune(["b"], strategy="delete")
            await saver.aprune(["c"], strategy="delete_all")  # the server adapter's name for it
            assert [checkpoint_rows(path, thread)[0] for thread in "abc"] == [1, 0, 0]
            out = await graph.ainvoke({"question": QUESTIONS[2]}, {"configurable": {"thread_id": "a"}})
            assert message_texts(out)[::2] == QUESTIONS[:3]

    asyncio.run(run())


# --- the LangGraph server's saver -------------------------------------------------------------------------


@pytest.mark.parametrize(("keep", "server_keep", "expected"), [("0", 3, 3), ("5", 3, 5), ("1", 2, 2)])
def test_server_checkpointer_keeps_the_larger_bound(
    model: TaskChatModel,
    tmp_path: Path,
    env_settings: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    keep: str,
    server_keep: int,
    expected: int,
) -> None:
    env_settings(RAG_DATA_DIR=str(tmp_path / "server"), RAG_CHECKPOINT_KEEP=keep)
    monkeypatch.setattr(checkpointer_module, "SERVER_CHECKPOINT_KEEP", server_keep)

    async def run() -> None:
        async with server_checkpointer() as saver:
            assert saver.keep == expected
            # What the LangGraph server checks (langgraph_api's adapter) before warning that storage grows
            # without bound: the saver's own aprune, not BaseCheckpointSaver's.
            assert type(saver).aprune is not BaseCheckpointSaver.aprune
            graph = build_graph(saver)
            config = {"configurable": {"thread_id": "server"}}
            for question in QUESTIONS[:3]:  # the server runs with a checkpoint per step
                await graph.ainvoke({"question": question}, config, durability="async")
            assert checkpoint_rows(tmp_path / "server" / "checkpoints.sqlite", "server")[0] == expected
            assert message_texts((await graph.aget_state(config)).values)[::2] == QUESTIONS[:3]

    asyncio.run(run())


# --- tenants, time travel, old checkpoints ---------------------------------------------------------------


def test_pruning_savers_refuse_another_tenants_replay(model: TaskChatModel, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    config = {"configurable": {"thread_id": "bravo-thread"}}
    graph = build_graph(sqlite_checkpointer(path=path, keep=1))
    answer_text = graph.invoke({"question": QUESTIONS[1]}, config, context={"tenant": "bravo"})["answer"]
    before = checkpoint_rows(path, "bravo-thread")
    with pytest.raises(ThreadAccessError):
        graph.invoke(None, config, context={"tenant": "alpha"})
    with pytest.raises(ThreadAccessError):
        graph.invoke({"question": QUESTIONS[0]}, config, context={"tenant": "alpha"})

    async def run() -> None:
        async with async_sqlite_checkpointer(path=path, keep=1) as saver:
            async_graph = build_graph(saver)
            with pytest.raises(ThreadAccessError):
                await async_graph.ainvoke(None, config, context={"tenant": "alpha"})
            with pytest.raises(ThreadAccessError):
                async for _ in async_graph.astream(
                    {"question": QUESTIONS[0]}, config, context={"tenant": "alpha"}
                ):
                    pass

    asyncio.run(run())
    assert checkpoint_rows(path, "bravo-thread") == before
    assert message_texts(graph.get_state(config).values) == [QUESTIONS[1], answer_text]


def test_time_travel_works_with_keep_zero(model: TaskChatModel, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    graph = build_graph(sqlite_checkpointer(path=path, keep=0))
    config = {"configurable": {"thread_id": "travel"}}
    for question in QUESTIONS[:3]:
        graph.invoke({"question": question}, config)
    history = list(graph.get_state_history(config))
    assert [len(snapshot.values["messages"]) for snapshot in history] == [6, 4, 2]
    first_turn = history[-1].config
    # Replaying the first turn's checkpoint returns that turn's state; asking from it forks the thread.
    first_messages = message_texts(history[-1].values)
    assert first_messages[0] == QUESTIONS[0] and len(first_messages) == 2
    assert message_texts(graph.invoke(None, first_turn)) == first_messages
    forked = graph.invoke({"question": QUESTIONS[4]}, first_turn)
    assert message_texts(forked)[::2] == [QUESTIONS[0], QUESTIONS[4]]
    assert message_texts(graph.get_state(config).values)[::2] == [QUESTIONS[0], QUESTIONS[4]]
    # Nothing was pruned: every turn's checkpoint is still there, and the fork (its branch point and its
    # turn) was added.
    after = {snapshot.config["configurable"]["checkpoint_id"] for snapshot in graph.get_state_history(config)}
    assert {snapshot.config["configurable"]["checkpoint_id"] for snapshot in history} < after
    assert len(after) == len(history) + 2


def legacy_values(values: dict[str, Any]) -> dict[str, Any]:
    """Channel values as the code before Overwrite stored them (its baseline graph and not-found turns):
    the "__reset__" string in reducer fields no node wrote after start_turn, and the working `documents`
    kept next to `retrieved`."""
    legacy = dict(values)
    legacy.update(
        {
            "best_answer": LEGACY_RESET,
            "hops": LEGACY_RESET,
            "usage": LEGACY_RESET,
            "queries_run": LEGACY_RESET,
            "documents": list(values["retrieved"]),
        }
    )
    return legacy


@pytest.mark.parametrize("keep", [0, 1])
def test_a_checkpoint_written_by_the_old_code_still_loads(
    model: TaskChatModel, tmp_path: Path, keep: int
) -> None:
    path = tmp_path / "checkpoints.sqlite"
    saver = sqlite_checkpointer(path=path, keep=keep)
    graph = build_graph(saver)
    config = {"configurable": {"thread_id": "legacy"}}
    first = graph.invoke({"question": QUESTIONS[0]}, config)["answer"]
    latest = saver.get_tuple({"configurable": {"thread_id": "legacy", "checkpoint_ns": ""}})
    assert latest is not None
    old = copy_checkpoint(latest.checkpoint)
    old["id"] = str(uuid6(clock_seq=-2))
    old["channel_values"] = legacy_values(latest.checkpoint["channel_values"])
    saver.put(latest.config, old, latest.metadata, {})
    assert graph.get_state(config).values["best_answer"] == LEGACY_RESET  # the old layout is what is stored

    calls_before = len(model.calls)
    out = graph.invoke({"question": QUESTIONS[1]}, config)
    assert message_texts(out) == [QUESTIONS[0], first, QUESTIONS[1], out["answer"]]
    assert out["llm_calls"] == len(model.calls) - calls_before
    values = graph.get_state(config).values
    assert "__reset__" not in set(all_strings(values))
    assert values["documents"] == [] and values["retrieved"]


# --- the real LangGraph server (slow: `langgraph dev` in a subprocess) ------------------------------------
#: SERVER_CHECKPOINT_KEEP (the server fixture sets no RAG_*CHECKPOINT* variable).
SERVER_KEEP_DEFAULT = 16


@pytest.fixture
def langgraph_dev(request: pytest.FixtureRequest) -> str:
    """The base URL of test_langgraph_sdk's `langgraph dev` (fake OpenAI models, data in tmp_path/data)."""
    return str(request.getfixturevalue("sdk_server"))


@pytest.mark.slow
def test_langgraph_dev_uses_the_pruning_saver_and_stays_bounded(langgraph_dev: str, tmp_path: Path) -> None:
    """Three turns on one server thread: the server saves after every step, the saver keeps the newest
    SERVER_CHECKPOINT_KEEP of them, and the server does not warn that the saver cannot prune."""
    client = get_sync_client(url=langgraph_dev)
    thread_id = client.threads.create()["thread_id"]
    questions = ["What is the largest planet?", "How hot is oolong tea brewed?", "Which planet is largest?"]
    for question in questions:
        result = client.runs.wait(thread_id, "rag", input={"question": question})
        assert "__error__" not in result, result
    path = tmp_path / "data" / "checkpoints.sqlite"
    assert checkpoint_rows(path, thread_id)[0] == SERVER_KEEP_DEFAULT
    state = client.threads.get_state(thread_id)["values"]
    assert [message["content"] for message in state["messages"]][::2] == questions
    log = (tmp_path / "server.log").read_text(encoding="utf-8", errors="replace")
    assert "PruningAsyncSqliteSaver" in log
    assert "missing aprune" not in log and "grow without bound" not in log
