"""core.langgraph_compat: each private LangGraph / LangChain name the engine relies on still does what the
engine relies on it for, so an upgrade that removes or changes one fails here (an import error, or the
behaviour gone), not in a run. Each check also runs the case without the private name where that can be
done, so the test shows the name is what makes the difference."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict
from uuid import UUID, uuid4

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from core.langgraph_compat import (
    CONFIG_KEY_DURABILITY,
    CONFIG_KEY_RUNTIME,
    StreamingCallbackHandler,
    chroma_collection,
    openai_sdk_httpx,
)


class Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def _two_step_graph(checkpointer: InMemorySaver) -> Any:
    builder = StateGraph(Steps)
    builder.add_node("first", lambda state: {"steps": ["first"]})
    builder.add_node("second", lambda state: {"steps": ["second"]})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=checkpointer)


def _checkpoints_saved(graph: Any) -> int:
    config: RunnableConfig = {"configurable": {"thread_id": str(uuid4())}}
    graph.invoke({"steps": []}, config)
    return len(list(graph.get_state_history(config)))


def test_the_durability_key_in_a_graphs_config_sets_its_durability() -> None:
    """persistence.checkpointer.with_durability: "exit" under the key saves only the final checkpoint; the
    default ("async") saves one per step."""
    graph = _two_step_graph(InMemorySaver())
    per_step = _checkpoints_saved(graph)
    at_exit = _checkpoints_saved(graph.with_config({"configurable": {CONFIG_KEY_DURABILITY: "exit"}}))
    assert per_step >= 3  # input, first, second
    assert at_exit == 1


class RuntimeSeenBySaver(InMemorySaver):
    """Records what a run hands its saver under CONFIG_KEY_RUNTIME (persistence.saver_mixins reads it)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def get_tuple(self, config: RunnableConfig) -> Any:
        self.seen.append((config.get("configurable") or {}).get(CONFIG_KEY_RUNTIME))
        return super().get_tuple(config)


def test_a_run_hands_its_saver_the_runtime_with_its_context() -> None:
    saver = RuntimeSeenBySaver()
    builder = StateGraph(Steps, context_schema=dict)
    builder.add_node("only", lambda state: {"steps": ["only"]})
    builder.add_edge(START, "only")
    graph = builder.compile(checkpointer=saver)
    graph.invoke({"steps": []}, {"configurable": {"thread_id": "t"}}, context={"tenant": "acme"})
    runtimes = [runtime for runtime in saver.seen if runtime is not None]
    assert runtimes, "the saver was never handed the run's Runtime"
    assert runtimes[0].context == {"tenant": "acme"}
    saver.seen.clear()
    saver.get_tuple({"configurable": {"thread_id": "t"}})  # outside a run: no runtime
    assert saver.seen == [None]


class TokenRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, *, run_id: UUID, **kwargs: Any) -> None:
        self.tokens.append(token)


class StreamingTokenRecorder(TokenRecorder, StreamingCallbackHandler[Any]):
    """What graphs.runner.TokenHandler is: a handler marked as streaming."""


@pytest.mark.parametrize(
    ("handler_class", "streams"), [(StreamingTokenRecorder, True), (TokenRecorder, False)]
)
def test_a_streaming_handler_makes_invoke_stream_the_tokens(handler_class: type, streams: bool) -> None:
    handler = handler_class()
    model = GenericFakeChatModel(messages=iter([AIMessage(content="an answer in tokens")]))
    reply = model.invoke("question", config={"callbacks": [handler]})
    assert reply.content == "an answer in tokens"
    assert ("".join(handler.tokens) == "an answer in tokens") is streams
    assert bool(handler.tokens) is streams


def test_the_sdk_httpx_builds_limits_the_openai_client_takes() -> None:
    """models.factory's loop-safe client: limits from the SDK's own httpx flavour, and a client of it."""
    import openai

    sdk_httpx = openai_sdk_httpx()
    client = openai.DefaultAsyncHttpxClient(limits=sdk_httpx.Limits(max_keepalive_connections=0))
    assert isinstance(client, sdk_httpx.AsyncClient)


def test_the_chroma_collection_under_a_store_reads_and_writes_its_vectors() -> None:
    chromadb = pytest.importorskip("chromadb")
    from langchain_chroma import Chroma

    client = chromadb.EphemeralClient()
    name = f"compat_{uuid4().hex[:8]}"
    store = Chroma(collection_name=name, client=client)
    collection = chroma_collection(store)
    assert collection.name == name
    collection.upsert(ids=["a"], embeddings=[[1.0, 0.0]], documents=["text"])
    assert client.get_collection(collection.name).count() == 1
    found = collection.query(query_embeddings=[[1.0, 0.0]], n_results=1, include=["distances"])
    assert found["ids"] == [["a"]]
    assert found["documents"] is None  # only what was asked for: the reason the engine goes below the store
