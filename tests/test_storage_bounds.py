"""Storage bounds of conversations: the reset placeholder never leaks, checkpoint bytes per turn stay under
the target, and the checkpointer prunes (the LangGraph server's saver included).

Why: every graph step used to write a full checkpoint (12-18 per turn, 130-370 KB per turn), streamed
updates carried the string placeholder "__reset__", and the server warned that its saver could not prune.
The runs use the fake models (tests.fakes) over a small corpus.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from config.settings import load_settings
from graphs.rag import build_graph
from nodes.resources import Resources, use_resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from tests.conftest import FAKE_MODEL_KEY, write_corpus
from tests.fakes import HashEmbeddings, TaskChatModel

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
    resources = Resources(
        corpus_kb.settings,
        knowledge_base=corpus_kb,
        generator=fake,
        grader=fake,
        strengths={"generate": "weak", "grade": "weak"},
    )
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
