"""Chat mode (`Context.answer_source="chat"`, set by `rag chat`) answers from the conversation when the
store has nothing relevant; RAG mode keeps the honest not-found answer.

Why: a chat turn that refers back to the conversation ("what did I say my colour was?") has no evidence in
the documents, yet the answer is in the history. Ending it at not-found would be wrong for a chat; in RAG
mode (a question about the documents) the not-found answer is the honest one and must stay.
The graph runs for real on an in-memory checkpointer, with fake embeddings and a chat model scripted per
task (tests.fakes): the "chat" task is the answer prompt without sources, "generate" the one with sources.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from graphs.rag import build_graph
from nodes.grade_retrieval import decide_after_retrieval
from nodes.resources import Resources, use_resources
from prompts.not_found import NOT_FOUND_ANSWER_EN
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context
from tests.conftest import isolated_settings, write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel

FIRST = "Remember this: my favourite colour is teal and my cat is called Miso."
FIRST_ANSWER = "Noted, I will remember that."
FOLLOW_UP = "What is my favourite colour?"
FROM_HISTORY = "Your favourite colour is teal."
NO_HISTORY = "I have no record of that."
PLANETS = {"jupiter.md": "# Jupiter\n\nJupiter is the largest planet. It has 95 known moons."}


def answer_from_history(messages: list[BaseMessage]) -> str:
    """What a model would say: the colour when an earlier message of the prompt states it."""
    earlier = " ".join(str(message.content) for message in messages[1:-1])
    return FROM_HISTORY if "teal" in earlier else NO_HISTORY


@pytest.fixture(params=["empty", "irrelevant"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KnowledgeBase]:
    """An empty knowledge base, or one whose only document has nothing to do with the conversation."""
    kb = KnowledgeBase(isolated_settings(tmp_path), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    if request.param == "irrelevant":
        ingest_paths(kb, [write_corpus(tmp_path / "corpus", PLANETS)["jupiter.md"]])
    yield kb
    kb.close()


def converse(kb: KnowledgeBase, model: TaskChatModel, answer_source: str) -> tuple[dict[str, Any], int]:
    """Two turns on one thread; returns the follow-up's output and the model calls made before it."""
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    context = Context(answer_source=answer_source, max_iterations=2)  # type: ignore[arg-type]
    resources = Resources(
        kb.settings, knowledge_base=kb, generator=model, grader=model, strengths={"generate": "weak"}
    )
    with use_resources(resources):
        graph.invoke({"messages": [("human", FIRST)]}, config=config, context=Context())
        before = len(model.calls)
        out = graph.invoke({"question": FOLLOW_UP}, config=config, context=context)
    return out, before


def scripted_model() -> TaskChatModel:
    return TaskChatModel(
        replies={"chat": answer_from_history, "generate": NOT_FOUND_ANSWER_EN},
        fallback=FIRST_ANSWER,
    )


def test_chat_mode_answers_a_follow_up_from_history(store: KnowledgeBase) -> None:
    model = scripted_model()
    out, before = converse(store, model, "chat")

    assert out["answer"] == FROM_HISTORY and out["not_found"] is False
    follow_up_tasks = model.tasks()[before:]
    assert follow_up_tasks.count("chat") == 1 and "generate" not in follow_up_tasks
    prompt = model.prompts("chat")[-1]
    # The last message is the (standalone) question; the earlier ones are the conversation so far.
    assert prompt[-1].type == "human" and str(prompt[-1].content).startswith(FOLLOW_UP)
    assert any("teal" in str(message.content) for message in prompt[1:-1])  # the history was in the prompt
    assert out["citations"] == [] and out["sources"] == []
    assert out["messages"][-1].content == FROM_HISTORY


def test_rag_mode_still_says_not_found(store: KnowledgeBase) -> None:
    model = scripted_model()
    out, before = converse(store, model, "rag")

    assert out["answer"] == NOT_FOUND_ANSWER_EN and out["not_found"] is True
    assert "chat" not in model.tasks()[before:]  # never answered from history alone


def test_decision_with_nothing_retrieved_depends_on_the_mode() -> None:
    state: Any = {"retrieval_rounds": 1}
    chat, rag = Context(answer_source="chat"), Context(answer_source="rag")
    assert decide_after_retrieval(state, chat, found=False, relevant=0) == "generate"
    assert decide_after_retrieval(state, rag, found=False, relevant=0) == "not_found"
    # A store that is down is reported honestly in both modes.
    down: Any = {"retrieval_rounds": 1, "error": "store unreachable"}
    assert decide_after_retrieval(down, chat, found=False, relevant=0) == "not_found"


def test_rag_is_the_default_answer_source() -> None:
    assert Context().answer_source == "rag"
