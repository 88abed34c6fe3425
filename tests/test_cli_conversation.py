"""`--conversation-id` on `rag ask` and `rag chat`, and chat mode of `rag chat`, through the real CLI.

Why through the CLI: the option is only useful if it reaches the graph as the input `conversation_id` (which
scopes retrieval) and `rag chat` only answers from history if it sets the chat answer source; both are
wiring that a unit test of the nodes cannot see. The graph and checkpointer are real; the models are fakes
installed as the process resources, over a knowledge base with the fake embeddings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from langchain_core.messages import BaseMessage
from typer.testing import CliRunner

from config.settings import Settings
from nodes.resources import use_resources
from prompts.not_found import NOT_FOUND_ANSWER_EN
from retrieval.indexing import index_event
from retrieval.knowledge_base import KnowledgeBase
from service.cli import app
from tests.fakes import TaskChatModel, fake_resources

EVENTS = {
    "c1": ["The comet Halley was discussed on Monday.", "The comet tail points away from the Sun."],
    "c2": ["The comet Encke returns every three years."],
}
FROM_HISTORY = "You said your name is Ada."


def answer_from_history(messages: list[BaseMessage]) -> str:
    earlier = " ".join(str(message.content) for message in messages[1:-1])
    return FROM_HISTORY if "Ada" in earlier else "I do not know."


@pytest.fixture
def model() -> TaskChatModel:
    return TaskChatModel(
        replies={"generate": "The comet was discussed [1].", "chat": answer_from_history},
        fallback="Hello Ada.",
    )


@pytest.fixture
def events(
    settings: Settings, kb: KnowledgeBase, model: TaskChatModel, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """Events of two conversations indexed; the CLI uses this knowledge base and the fake model."""
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    doc_ids = {
        index_event(kb, text, tenant="default", collection="default", metadata={"conversation_id": c}): c
        for c, texts in EVENTS.items()
        for text in texts
    }
    resources = fake_resources(kb, model, settings=settings)
    with use_resources(resources):
        yield doc_ids


def ask_json(*arguments: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["ask", "What did we say about the comet?", "--json", *arguments])
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("conversation", ["c1", "c2"])
def test_ask_with_a_conversation_id_retrieves_only_that_conversation(
    events: dict[str, str], conversation: str
) -> None:
    out = ask_json("--conversation-id", conversation)
    retrieved = out["retrieved"]
    assert isinstance(retrieved, list) and len(retrieved) == len(EVENTS[conversation])
    assert {events[doc["doc_id"]] for doc in retrieved} == {conversation}


def test_ask_without_a_conversation_id_searches_every_conversation(events: dict[str, str]) -> None:
    out = ask_json()
    assert {events[doc["doc_id"]] for doc in out["retrieved"]} == {"c1", "c2"}  # type: ignore[union-attr]


def test_an_empty_conversation_id_is_refused(events: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["ask", "What about the comet?", "--conversation-id", " "])
    assert result.exit_code == 2 and "--conversation-id is empty" in result.stderr


def test_chat_answers_from_history_where_ask_says_not_found(
    events: dict[str, str], model: TaskChatModel
) -> None:
    """In a conversation without documents (c9), `rag chat` answers the follow-up from the conversation;
    `rag ask` on a thread with the same history answers not-found."""
    turns = "My name is Ada, remember it.\nWhat is my name?\n\n"
    chat = CliRunner().invoke(app, ["chat", "--thread", "t-chat", "--conversation-id", "c9"], input=turns)
    assert chat.exit_code == 0, chat.output + chat.stderr
    assert FROM_HISTORY in chat.stdout and NOT_FOUND_ANSWER_EN not in chat.stdout

    runner = CliRunner()
    first = runner.invoke(
        app, ["ask", "My name is Ada, remember it.", "--thread", "t-ask", "--conversation-id", "c9"]
    )
    assert first.exit_code == 0, first.output + first.stderr
    follow_up = runner.invoke(app, ["ask", "What is my name?", "--thread", "t-ask", "--json"])
    assert follow_up.exit_code == 0, follow_up.output + follow_up.stderr
    out = json.loads(follow_up.stdout)
    assert out["answer"] == NOT_FOUND_ANSWER_EN and out["not_found"] is True  # the thread kept c9's scope
