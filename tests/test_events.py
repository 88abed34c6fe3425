"""Custom stream events (nodes.events): the graph itself tells a watcher what it is doing, in order, through
LangGraph's `custom` stream mode — the same events the REST SSE route and the LangGraph server carry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from graphs.rag import build_graph
from nodes.events import emit
from nodes.resources import Resources
from prompts.not_found import NOT_FOUND_ANSWER_EN
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel

ANSWER = "Jupiter is the largest planet in the Solar System [1]."


def custom_events(question: str) -> list[dict[str, Any]]:
    """The custom stream of one run of the agentic graph."""
    return [chunk for chunk in build_graph().stream({"question": question}, stream_mode="custom", context={})]


def test_emit_outside_a_run_does_nothing() -> None:
    emit("generation_start", {"documents": 0})  # no run, no writer: must not raise


def test_emit_reaches_the_custom_stream_of_any_graph() -> None:
    class Box(TypedDict, total=False):
        value: int

    def node(state: Box) -> Box:
        emit("token", {"text": "x"})
        return {"value": 1}

    builder = StateGraph(Box)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    chunks = list(builder.compile().stream({}, stream_mode="custom"))
    assert chunks == [{"event": "token", "data": {"text": "x"}}]


def test_agentic_run_emits_rewrite_retrieval_generation_and_completion_in_order(
    tmp_path: Any,
    install: Callable[..., Resources],
    make_kb: Callable[..., KnowledgeBase],
) -> None:
    model = TaskChatModel(replies={"generate": ANSWER})
    resources = install(model, strength="weak")
    resources.knowledge_base = make_kb(resources.settings)
    files = write_corpus(
        tmp_path / "corpus",
        {
            "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System.",
            "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees.",
        },
    )
    ingest_paths(resources.knowledge_base, list(files.values()))

    events = custom_events("What is the largest planet in the Solar System?")
    names = [event["event"] for event in events]
    assert names[0] == "query_rewritten"
    assert names[-1] == "generation_complete"
    assert names.index("documents_retrieved") < names.index("generation_start")
    assert names.count("generation_complete") == 1
    rewritten = events[0]["data"]
    assert "What is the largest planet in the Solar System?" in rewritten["queries"]
    retrieved = next(event["data"] for event in events if event["event"] == "documents_retrieved")
    assert retrieved["count"] >= 1 and retrieved["decision"] == "generate"
    complete = events[-1]["data"]
    assert complete["answer"].startswith("Jupiter\n\nJupiter is the largest planet")
    assert complete["sources"] and complete["sources"][0]["source"] == "jupiter.md"  # never a server path
    assert "text" not in complete["sources"][0]  # summaries only, not whole passages
    assert [citation["marker"] for citation in complete["citations"]] == [1]


def test_empty_store_ends_with_a_not_found_completion(
    install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> None:
    resources = install(TaskChatModel(replies={"generate": ANSWER}), strength="weak")
    resources.knowledge_base = make_kb(resources.settings)

    events = custom_events("What is the largest planet in the Solar System?")
    names = [event["event"] for event in events]
    assert "generation_start" not in names
    assert names[-1] == "generation_complete"
    assert events[-1]["data"] == {
        "answer": NOT_FOUND_ANSWER_EN,
        "citations": [],
        "sources": [],
        "not_found": True,
        "band": "not_found",
    }
