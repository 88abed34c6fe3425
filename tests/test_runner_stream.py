"""graphs.runner.stream_on_worker on a small graph: tokens of the streamed node arrive while it still runs,
events and tokens in the order the nodes wrote them, other calls kept out of the token stream, a node's error
raised to the consumer, and closing the stream stopping the graph at its next step before it returns."""

from __future__ import annotations

import threading
from typing import Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from graphs.runner import stream_on_worker
from nodes.events import emit
from nodes.model_draft import NO_STREAM_TAG
from state.context import Context

WAIT_S = 10.0


class Flow(TypedDict, total=False):
    question: str
    answer: str
    after: bool


def model(text: str, **kwargs: Any) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content=text)]), **kwargs)


def build(generate: Any, analyze: Any = None, ran: list[str] | None = None) -> Any:
    def after(state: Flow) -> dict[str, Any]:
        (ran if ran is not None else []).append("after")
        return {"after": True}

    graph = StateGraph(Flow)
    graph.add_node("analyze", analyze or (lambda state: {}))
    graph.add_node("generate", generate)
    graph.add_node("after", after)
    graph.add_edge(START, "analyze")
    graph.add_edge("analyze", "generate")
    graph.add_edge("generate", "after")
    graph.add_edge("after", END)
    return graph.compile()


def run(graph: Any, events: bool = True) -> Any:
    return stream_on_worker(graph, {"question": "q"}, {}, Context(), events)  # type: ignore[arg-type]


def drain(stream: Any) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    items: list[tuple[str, Any]] = []
    while True:
        try:
            items.append(next(stream))
        except StopIteration as end:
            return items, end.value


def test_tokens_and_events_come_in_order_and_the_final_state_is_returned() -> None:
    def analyze(state: Flow) -> dict[str, Any]:
        model("not shown").invoke("x")  # another node's model call: not in the token stream
        emit("query_rewritten", {"queries": ["q"]})
        return {}

    def generate(state: Flow) -> dict[str, Any]:
        emit("generation_start", {})
        model("hidden json", tags=[NO_STREAM_TAG]).invoke("x")  # kept out of the stream by its tag
        text = "".join(str(chunk.content) for chunk in model("The answer [1]").stream("x"))
        emit("generation_complete", {"answer": text})
        return {"answer": text}

    items, final = drain(run(build(generate, analyze)))
    assert items == [
        ("event", {"event": "query_rewritten", "data": {"queries": ["q"]}}),
        ("event", {"event": "generation_start", "data": {}}),
        ("token", "The"), ("token", " "), ("token", "answer"), ("token", " "), ("token", "[1]"),
        ("event", {"event": "generation_complete", "data": {"answer": "The answer [1]"}}),
    ]  # fmt: skip
    assert final == {"question": "q", "answer": "The answer [1]", "after": True}
    items, _ = drain(run(build(generate, analyze), events=False))
    assert [kind for kind, _ in items] == ["token"] * 5


def test_tokens_arrive_while_the_node_still_runs() -> None:
    shown = threading.Event()

    def generate(state: Flow) -> dict[str, Any]:
        chunks = model("first second").stream("x")
        first = next(chunks)
        # the consumer must have the first token before the node goes on (not at the node's end)
        assert shown.wait(WAIT_S), "the first token was not delivered while the node ran"
        return {"answer": str(first.content) + "".join(str(chunk.content) for chunk in chunks)}

    stream = run(build(generate))
    assert next(stream) == ("token", "first")
    shown.set()
    items, final = drain(stream)
    assert items == [("token", " "), ("token", "second")] and final["answer"] == "first second"


def test_a_nodes_error_reaches_the_consumer() -> None:
    def generate(state: Flow) -> dict[str, Any]:
        raise LookupError("no model")

    with pytest.raises(LookupError, match="no model"):
        drain(run(build(generate)))


def test_closing_the_stream_stops_the_graph_and_waits_for_it() -> None:
    release = threading.Event()
    finished: list[str] = []
    workers: list[threading.Thread] = []

    def generate(state: Flow) -> dict[str, Any]:
        workers.append(threading.current_thread())
        emit("generation_start", {})
        release.wait(WAIT_S)
        finished.append("generate")
        return {"answer": "a"}

    stream = run(build(generate, ran=finished))
    assert next(stream) == ("event", {"event": "generation_start", "data": {}})
    closer = threading.Thread(target=stream.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # close waits for the running node
    release.set()
    closer.join(WAIT_S)
    assert not closer.is_alive() and finished == ["generate"]
    assert not workers[0].is_alive()  # the graph's thread has ended: no step after the close
