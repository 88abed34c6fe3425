"""Conversation memory across process restarts, and thread housekeeping on the same checkpoint file.

Why a second process: an in-memory checkpointer, or one SQLite connection reused in one process, would pass
even if nothing reached the disk. Here A (the test's own process, its connection then closed) answers a
first question on a thread; process B, a fresh Python process, opens the same SQLite file, asks a follow-up
on that thread, and must see A's turn: in the thread's messages and in the prompt contextualize sends to the
model. Both run the real compiled graph with the fake embeddings and a scripted chat model (tests.fakes), so
no real model is loaded. (A ran in a child process too, which doubled the test's time for no extra check.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphs.rag import build_graph
from nodes.resources import use_resources
from persistence.checkpointer import sqlite_checkpointer
from persistence.threads import delete_thread, list_threads, prune_threads
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context
from tests.conftest import REPO_ROOT, isolated_settings, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel, fake_resources
from tests.helpers.graph_turns import answer_turns

CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. "
    "Jupiter has 95 known moons; Ganymede is its largest moon.",
    "mars.md": "# Mars\n\nMars is the fourth planet from the Sun. Olympus Mons is its tallest volcano.",
    "tea.md": "# Oolong tea\n\nOolong is a partly oxidised tea from Fujian.",
}
FIRST = "What is the largest planet in the Solar System?"
FIRST_ANSWER = "Jupiter is the largest planet in the Solar System [1]."
FOLLOW_UP = "What about its moons?"
STANDALONE = "How many moons does Jupiter have?"
FOLLOW_UP_ANSWER = "Jupiter has 95 known moons [1]."
THIRD = "Which moon of Jupiter is the largest?"
THIRD_ANSWER = "Ganymede is the largest moon of Jupiter [1]."
THREAD = "planets"
OTHER_THREAD = "smalltalk"

#: Run by process B: answer the spec's turns (tests.helpers.graph_turns), print what happened.
SCRIPT = """
import json
import sys

spec = json.loads(open(sys.argv[1], encoding="utf-8").read())
sys.path.insert(0, spec["repo"])

from tests.helpers.graph_turns import answer_turns

print(json.dumps(answer_turns(spec)))
"""


def run_process(tmp_path: Path, name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Run SCRIPT in a fresh Python process with `spec`; return the turns it reports."""
    script = tmp_path / "ask_turns.py"
    script.write_text(SCRIPT, encoding="utf-8")
    spec_path = tmp_path / f"{name}.json"
    spec_path.write_text(json.dumps({**spec, "repo": str(REPO_ROOT)}), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAG_")}
    result = subprocess.run(
        [sys.executable, str(script), str(spec_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, f"process {name} failed:\n{result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A asks FIRST on THREAD here; process B says hello on OTHER_THREAD, then follows up on THREAD.

    Module-scoped because the turns (and the process) are the slow part; the first test only reads their
    reports, the second then works on the checkpoint file they left."""
    tmp_path = tmp_path_factory.mktemp("graph-memory")
    write_corpus(tmp_path / "corpus", CORPUS)
    common = {
        "data_dir": str(tmp_path / "rag"),
        "corpus": str(tmp_path / "corpus"),
        "checkpoint": str(tmp_path / "ckpt.sqlite"),
    }
    with pytest.MonkeyPatch.context() as isolated:  # as the child gets it: no RAG_* variable, its own folder
        for name in [name for name in os.environ if name.startswith("RAG_")]:
            isolated.delenv(name)
        isolated.chdir(tmp_path)
        turns_a = answer_turns(
            {
                **common,
                "strengths": {"generate": "weak", "grade": "weak"},
                "replies": {"generate": FIRST_ANSWER},
                "turns": [[THREAD, FIRST]],
            }
        )
    process_b = run_process(
        tmp_path,
        "b",
        {
            **common,
            # A strong generator has contextualize rewrite the follow-up with the (scripted) model.
            "strengths": {"generate": "strong", "grade": "weak"},
            "replies": {"contextualize": STANDALONE, "generate": FOLLOW_UP_ANSWER, "chat": "Hi there!"},
            "turns": [[OTHER_THREAD, "Hello!"], [THREAD, FOLLOW_UP]],
        },
    )
    return {"a": turns_a, "b": process_b, "checkpoint": tmp_path / "ckpt.sqlite", "root": tmp_path}


def test_follow_up_in_a_new_process_sees_the_first_turn(conversation: dict[str, Any]) -> None:
    (first,) = conversation["a"]
    greeting, follow_up = conversation["b"]

    assert first["answer"] == FIRST_ANSWER
    assert first["messages"] == [["human", FIRST], ["ai", FIRST_ANSWER]]
    # A thread of its own: the greeting sees no history, so contextualize is not even asked.
    assert greeting["messages"] == [["human", "Hello!"], ["ai", "Hi there!"]]
    assert "contextualize" not in greeting["tasks"]
    # The follow-up thread holds process A's turn plus this one: 4 messages after 2 turns.
    assert follow_up["messages"] == [
        ["human", FIRST],
        ["ai", FIRST_ANSWER],
        ["human", FOLLOW_UP],
        ["ai", FOLLOW_UP_ANSWER],
    ]
    # contextualize was shown process A's turn and its rewrite became the standalone question.
    (prompt,) = follow_up["contextualize_prompts"]
    assert f"User: {FIRST}" in prompt and f"Assistant: {FIRST_ANSWER}" in prompt
    assert prompt.rstrip().split("Last message: ")[1].startswith(FOLLOW_UP)
    assert follow_up["standalone_question"] == STANDALONE
    assert follow_up["answer"] == FOLLOW_UP_ANSWER


def test_threads_list_prune_and_delete_on_the_checkpoint_file(conversation: dict[str, Any]) -> None:
    path: Path = conversation["checkpoint"]
    threads = list_threads(path)
    assert [summary.thread_id for summary in threads] == [THREAD, OTHER_THREAD]  # most recent first
    before = {summary.thread_id: summary for summary in threads}
    # One checkpoint per turn (RAG_CHECKPOINT_DURABILITY=exit): two turns on THREAD, one on OTHER_THREAD.
    assert before[THREAD].checkpoints > before[OTHER_THREAD].checkpoints >= 1

    removed = prune_threads(path, keep=1)
    assert removed == {"threads_removed": 1, "checkpoints_removed": before[THREAD].checkpoints - 1}
    (kept,) = list_threads(path)
    assert (kept.thread_id, kept.checkpoints) == (THREAD, 1)
    assert kept.latest_checkpoint_id == before[THREAD].latest_checkpoint_id

    # The pruned thread still loads, and the conversation can go on from it.
    root: Path = conversation["root"]
    graph = build_graph(sqlite_checkpointer(path=path))
    config = {"configurable": {"thread_id": THREAD}}
    values = graph.get_state(config).values
    assert [message.content for message in values["messages"]] == [
        FIRST,
        FIRST_ANSWER,
        FOLLOW_UP,
        FOLLOW_UP_ANSWER,
    ]
    assert values["answer"] == FOLLOW_UP_ANSWER
    assert graph.get_state({"configurable": {"thread_id": OTHER_THREAD}}).values == {}

    kb = KnowledgeBase(isolated_settings(root), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    model = TaskChatModel(replies={"generate": THIRD_ANSWER})
    try:
        resources = fake_resources(kb, model)
        with use_resources(resources):
            out = graph.invoke({"question": THIRD}, config=config, context=Context(top_k=2, answerer="model"))
    finally:
        kb.close()
    assert len(out["messages"]) == 6 and out["messages"][-1].content == THIRD_ANSWER
    assert out["retrieval_rounds"] == 1 and out["llm_calls"] == 1  # counters of this turn only

    assert delete_thread(path, THREAD) is True
    assert list_threads(path) == []
    assert graph.get_state(config).values == {}
    assert delete_thread(path, THREAD) is False
