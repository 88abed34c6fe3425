"""Concurrent turns on one thread: 8 processes (the real CLI) and 8 threads (one Session) ask at once.

Before the per-thread lock, overlapping turns started from the same checkpoint: turns were lost, answers
landed after the wrong question and follow-ups were rewritten with another turn's history. Now every turn is
serialized, so the stored conversation must hold every question exactly once, each followed by its own
answer, and each turn's contextualize prompt must show exactly the turns stored before it.

Models are fakes (tests/helpers/fake_rag.py: contextualize returns the question and records the history it
was shown; analysis says no retrieval is needed, for arithmetic questions the heuristic skips too; the answer
repeats its question), so turns are fast and the test measures only the ordering. The graph, the SQLite
checkpointer, the lock and, for processes, the CLI are real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from config.settings import Settings
from graphs.runner import Session
from nodes.resources import use_resources
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context
from tests.conftest import REPO_ROOT
from tests.fakes import fake_resources
from tests.helpers.fake_rag import answer_for, turn_model

TURNS = 8
FRUITS = ("kiwi", "mango", "papaya", "quince", "lychee", "guava", "durian", "feijoa")
TENANT = "alpha"
HELPER = REPO_ROOT / "tests" / "helpers" / "fake_rag.py"
#: Turns of history contextualize shows (Context.history_turns default).
HISTORY_TURNS = Context().history_turns


def question(fruit: str) -> str:
    """A distinct question per turn that needs no documents: arithmetic, so the heuristic analysis agrees
    with the fake model's "no retrieval" (nodes/analyze.py retrieves unless both say no)."""
    return f"What is {FRUITS.index(fruit) + 1} + {len(fruit)}?"


def check_thread(messages: list[tuple[str, str]], records: list[dict[str, Any]]) -> None:
    """Every question stored once with its own answer right after it; each turn saw exactly the turns
    stored before it as its history."""
    asked = [question(fruit) for fruit in FRUITS[:TURNS]]
    assert len(messages) == 2 * TURNS, messages
    humans = [text for kind, text in messages[0::2]]
    assert [kind for kind, _ in messages] == ["human", "ai"] * TURNS, messages
    assert sorted(humans) == sorted(asked)  # each exactly once, none lost, none duplicated
    for index in range(TURNS):
        assert messages[2 * index + 1][1] == answer_for(humans[index]), messages[2 * index : 2 * index + 2]
    # The first stored turn had no history (no contextualize call); every later one saw its predecessors.
    assert len(records) == TURNS - 1, records
    by_question = {str(record["question"]): record["history_questions"] for record in records}
    assert set(by_question) == set(humans[1:])
    for index in range(1, TURNS):
        expected = humans[max(0, index - HISTORY_TURNS) : index]
        assert by_question[humans[index]] == expected, (humans[index], by_question[humans[index]], expected)


def stored_messages(settings: Settings, thread_id: str) -> list[tuple[str, str]]:
    values = Session(settings).history(thread_id, tenant=TENANT)
    return [(message.type, str(message.content)) for message in values.get("messages", [])]


def test_eight_threads_of_one_process_ask_on_one_thread(settings: Settings, kb: KnowledgeBase) -> None:
    records: list[dict[str, Any]] = []
    model = turn_model(records)
    resources = fake_resources(kb, model, settings=settings, strength="strong")
    session = Session(settings)

    def turn(fruit: str) -> dict[str, Any]:
        return session.ask(question(fruit), thread_id="shared", context=Context(tenant=TENANT))

    with use_resources(resources), ThreadPoolExecutor(TURNS) as pool:
        results = list(pool.map(turn, FRUITS[:TURNS]))
    for fruit, result in zip(FRUITS, results, strict=False):
        assert result["standalone_question"] == question(fruit)  # not rewritten with another turn
        assert result["answer"] == answer_for(question(fruit))
    check_thread(stored_messages(settings, "shared"), records)


def test_eight_processes_ask_on_one_thread(settings: Settings, tmp_path: Path) -> None:
    record_file = tmp_path / "contextualize.jsonl"
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAG_")}
    env.update({"RAG_DATA_DIR": str(settings.data_dir), "FAKE_RAG_RECORD": str(record_file)})
    processes = {
        fruit: subprocess.Popen(
            [
                sys.executable,
                str(HELPER),
                "ask",
                question(fruit),
                "--thread",
                "shared",
                "--tenant",
                TENANT,
                "--json",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for fruit in FRUITS[:TURNS]
    }
    outputs = {fruit: process.communicate(timeout=600) for fruit, process in processes.items()}
    for fruit, (stdout, stderr) in outputs.items():
        assert processes[fruit].returncode == 0, stderr[-3000:]
        result = json.loads(stdout)
        assert result["standalone_question"] == question(fruit)
        assert result["answer"] == answer_for(question(fruit))
    records = [json.loads(line) for line in record_file.read_text(encoding="utf-8").splitlines()]
    check_thread(stored_messages(settings, "shared"), records)
