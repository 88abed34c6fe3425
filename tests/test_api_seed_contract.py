"""Seed 001's API contract ("API 详解", docs/api-seed.md), driven over a real server by a client written from
the contract alone: /api/v1/rag/query, /query-stream, /batch with {"queries": [...]}, /api/v1/search.

Why: a client written from the seed got 404 (no such routes) and 422 (other field names) before, and its
`conversation_id` follow-ups found nothing (the engine read it as a retrieval scope). Each test names what
a seed client relies on: statuses, field names and types, the SSE sequence, conversation history, modes that
change retrieval, per-request switches, and tenant isolation through these routes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import SystemMessage

from graphs.runner import Session
from nodes.resources import Resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher, SearchResult
from service.api.app import create_app
from tests.conftest import write_corpus
from tests.fakes import StreamingTaskModel, TaskChatModel
from tests.helpers.api_server import serve_app

REPLY = "Jupiter is the largest planet in the Solar System [1]."
QUESTION = "What is the largest planet in the Solar System?"
CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. It has 95 known moons.",
    "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees for three minutes.",
}
SOURCE_FIELDS = {"id": str, "title": str, "content": str, "score": float, "source": str}
RESPONSE_FIELDS = {
    "answer": str,
    "sources": list,
    "query": str,
    "retrieved_count": int,
    "generation_time": float,
    "citations": list,
    "metadata": dict,
}


class SeedClient:
    """A client of the seed's contract: its routes and bodies, nothing of the engine's own API."""

    def __init__(
        self, client: httpx.Client, resources: Resources, model: TaskChatModel, app: FastAPI
    ) -> None:
        self.client, self.resources, self.model, self.app = client, resources, model, app

    def query(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return self.client.post("/api/v1/rag/query", json=body, **kwargs)

    def search(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return self.client.post("/api/v1/search", json=body, **kwargs)

    def stream(self, path: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
        """The (event, data) pairs of an SSE answer."""
        events: list[tuple[str, Any]] = []
        with self.client.stream("POST", path, json=body) as reply:
            assert reply.status_code == 200, reply.read()
            assert reply.headers["content-type"].startswith("text/event-stream")
            name = None
            for line in reply.iter_lines():
                if line.startswith("event:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and name:
                    events.append((name, json.loads(line.split(":", 1)[1].strip())))
                    name = None
        return events


@pytest.fixture
def seed_api(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> Iterator[Callable[..., SeedClient]]:
    """`seed_api(model=None, strength="weak", **settings)`: a uvicorn server over the corpus, fake models."""
    with ExitStack() as servers:

        def start(model: TaskChatModel | None = None, strength: str = "weak", **overrides: Any) -> SeedClient:
            model = model or StreamingTaskModel(replies={"generate": REPLY})
            resources = install(model, strength=strength)
            resources.knowledge_base = make_kb(resources.settings)
            files = write_corpus(tmp_path / "corpus", CORPUS)
            ingest_paths(resources.knowledge_base, list(files.values()))
            app = create_app(resources.settings.model_copy(update=overrides))
            return SeedClient(servers.enter_context(serve_app(app)), resources, model, app)

        yield start


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every Searcher.search call's query and parameters (k, mode, weights, filters), in order."""
    calls: list[dict[str, Any]] = []
    original = Searcher.search

    def recording(self: Searcher, query: str, **kwargs: Any) -> SearchResult:
        calls.append({"query": query, **kwargs})
        return original(self, query, **kwargs)

    monkeypatch.setattr(Searcher, "search", recording)
    return calls


def assert_query_response(body: dict[str, Any]) -> None:
    """The QueryResponse's fields, with the contract's types."""
    for name, kind in RESPONSE_FIELDS.items():
        assert isinstance(body[name], kind), (name, body[name])
    assert body["rewritten_query"] is None or isinstance(body["rewritten_query"], str)
    for source in body["sources"]:
        for name, kind in SOURCE_FIELDS.items():
            assert isinstance(source[name], kind), (name, source)
        assert source["citation_id"] is None or isinstance(source["citation_id"], int)
    for citation in body["citations"]:
        assert isinstance(citation["citation_num"], int) and isinstance(citation["source_id"], str)
        assert isinstance(citation["confidence"], float)


# --- /query -------------------------------------------------------------------------------------------------


def test_query_answers_with_the_seed_response(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api()
    reply = api.query({"query": QUESTION, "top_k": 3, "mode": "simple", "temperature": 0.2})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert_query_response(body)
    assert body["query"] == QUESTION and "Jupiter is the largest planet" in body["answer"]
    assert body["retrieved_count"] >= 1 and body["generation_time"] > 0
    (citation,) = body["citations"]
    assert citation["citation_num"] == 1
    assert body["sources"][0]["citation_id"] == 1 and body["sources"][0]["id"] == citation["source_id"]
    assert (
        body["sources"][0]["source"].endswith("jupiter.md")
        and "95 known moons" in body["sources"][0]["content"]
    )
    assert body["metadata"]["conversation_id"]  # a new conversation, named for the follow-up
    assert body["metadata"]["mode"] == "simple" and body["metadata"]["temperature"] == 0.2


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "x" * 2001}, "query"),
        ({"query": QUESTION, "top_k": 0}, "top_k"),
        ({"query": QUESTION, "top_k": 21}, "top_k"),
        ({"query": QUESTION, "temperature": 2.5}, "temperature"),
        ({"query": QUESTION, "temperature": -0.1}, "temperature"),
        ({"query": QUESTION, "mode": "auto"}, "mode"),
        ({"query": QUESTION, "conversation_id": "no spaces allowed"}, "conversation_id"),
        ({"query": QUESTION, "include_sources": "maybe"}, "include_sources"),
        ({"query": QUESTION, "model": "gpt-unknown"}, "model"),
        ({"query": QUESTION, "no_such_field": 1}, "no_such_field"),
    ],
)
def test_out_of_range_fields_are_422_naming_the_field(
    seed_api: Callable[..., SeedClient], payload: dict[str, Any], field: str
) -> None:
    api = seed_api()
    reply = api.query(payload)
    assert reply.status_code == 422, reply.text
    assert reply.json()["field"] == field
    assert api.model.calls == []


def test_include_sources_false_leaves_sources_out(seed_api: Callable[..., SeedClient]) -> None:
    body = seed_api().query({"query": QUESTION, "include_sources": False}).json()
    assert body["sources"] == [] and body["citations"]  # the answer still cites


# --- conversation_id: the seed's conversation -------------------------------------------------------------


def test_a_follow_up_in_a_conversation_sees_the_previous_turn(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api()
    first = api.query({"query": QUESTION, "conversation_id": "conv-1"}).json()
    assert first["metadata"]["conversation_id"] == "conv-1"
    follow_up = api.query({"query": "How many moons does it have?", "conversation_id": "conv-1"}).json()
    # The old meaning (retrieval scoped to documents tagged conv-1) found nothing on this corpus.
    assert follow_up["metadata"]["not_found"] is False and follow_up["retrieved_count"] >= 1
    rewritten = follow_up["rewritten_query"] or ""
    assert rewritten.startswith("How many moons does it have?") and (
        "Jupiter" in rewritten or "Solar" in rewritten
    )
    last_prompt = api.model.prompts("generate")[-1]
    assert any(QUESTION in str(message.content) for message in last_prompt), "the history reaches the prompt"
    messages = Session(api.resources.settings).history("conv-1")["messages"]
    assert [message.type for message in messages] == ["human", "ai", "human", "ai"]


def test_without_a_conversation_each_query_starts_a_new_one(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api()
    one = api.query({"query": QUESTION}).json()["metadata"]["conversation_id"]
    two = api.query({"query": QUESTION}).json()["metadata"]["conversation_id"]
    assert one != two


# --- modes change retrieval -------------------------------------------------------------------------------


def test_simple_mode_is_the_standard_hybrid_search(
    seed_api: Callable[..., SeedClient], searches: list[dict[str, Any]]
) -> None:
    api = seed_api()
    assert api.query({"query": QUESTION, "mode": "simple", "top_k": 6}).status_code == 200
    assert searches and all(call["k"] == 6 and call["weights"] is None for call in searches)
    assert all(call["mode"] == "hybrid" for call in searches)


def test_precise_mode_weights_dense_0_8_and_bm25_0_2(
    seed_api: Callable[..., SeedClient], searches: list[dict[str, Any]]
) -> None:
    api = seed_api()
    body = api.query({"query": QUESTION, "mode": "precise", "top_k": 6}).json()
    assert searches and all(call["weights"] == (0.8, 0.2) and call["k"] == 6 for call in searches)
    assert body["metadata"]["retrieval"]["weights"] == {"dense": 0.8, "bm25": 0.2}


def test_advanced_mode_searches_three_queries_with_a_third_of_top_k_each(
    seed_api: Callable[..., SeedClient], searches: list[dict[str, Any]]
) -> None:
    api = seed_api()
    body = api.query({"query": QUESTION, "mode": "advanced", "top_k": 6}).json()
    first_round = {call["query"] for call in searches}
    assert len(first_round) == 3 and QUESTION in first_round
    assert all(call["k"] == 2 and call["weights"] is None for call in searches)
    assert body["metadata"]["retrieval"]["k_per_query"] == 2
    assert len(body["metadata"]["rewritten_queries"]) == 3
    assert body["metadata"]["not_found"] is False  # merged by chunk id, best first: the answer is found


# --- per-request switches ---------------------------------------------------------------------------------


def test_switches_reach_the_run_and_the_response_says_which_ran(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api()
    body = api.query(
        {
            "query": QUESTION,
            "enable_self_rag": True,
            "enable_hyde": True,
            "enable_citations": True,
            "enable_hallucination_detection": True,
            "system_prompt": "Answer in one line.",
            "model": api.resources.settings.llm_model,
        }
    ).json()
    features = body["metadata"]["features"]
    assert features["hyde"] == {"enabled": True, "ran": True} and body["metadata"]["strategy"] == "HYDE"
    self_rag = features["self_rag"]
    assert self_rag["ran"] is True and self_rag["iterations"]
    for iteration in self_rag["iterations"]:
        assert {"round", "score", "grounded", "action", "problems", "suggestions"} <= set(iteration)
        assert isinstance(iteration["problems"], list) and isinstance(iteration["suggestions"], list)
    assert features["hallucination_detection"]["ran"] is True
    assert isinstance(features["hallucination_detection"]["unsupported_sentences"], list)
    assert features["citations"] == {"enabled": True, "ran": True}
    assert body["metadata"]["model"] == api.resources.settings.llm_model
    system = next(m.content for m in api.model.prompts("generate")[-1] if isinstance(m, SystemMessage))
    assert str(system).endswith("Answer in one line.")


def test_switches_off(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api()
    body = api.query(
        {
            "query": QUESTION,
            "enable_self_rag": False,
            "enable_hyde": False,
            "enable_citations": False,
            "enable_hallucination_detection": False,
        }
    ).json()
    features = body["metadata"]["features"]
    assert features["self_rag"] == {"enabled": False, "ran": False, "iterations": []}
    assert features["hyde"]["ran"] is False and body["metadata"]["strategy"] != "HYDE"
    assert features["hallucination_detection"] == {"enabled": False, "ran": False}
    assert features["citations"]["ran"] is False
    assert body["citations"] == [] and "[1]" not in body["answer"]
    assert all(source["citation_id"] is None for source in body["sources"])


def test_a_self_rag_revision_reports_each_grade(seed_api: Callable[..., SeedClient]) -> None:
    """The (LLM) grader calls the first draft ungrounded: the run searches again and writes a second
    draft, which passes. The response carries both grades, the first with its problems and suggestion."""
    bad = {"grounded": False, "answers_question": False, "relevance": 0.2, "accuracy": 0.1}
    good = {"grounded": True, "answers_question": True, "relevance": 1.0, "accuracy": 1.0}
    grades = [json.dumps({**grade, "completeness": 1.0, "clarity": 1.0}) for grade in (bad, good)]
    model = StreamingTaskModel(replies={"generate": REPLY, "grade_answer": grades})
    api = seed_api(model, strength="strong")
    body = api.query({"query": QUESTION, "enable_self_rag": True}).json()
    iterations = body["metadata"]["features"]["self_rag"]["iterations"]
    assert [iteration["grader"] for iteration in iterations] == ["llm", "llm"], iterations
    first, last = iterations
    assert first["action"] in {"retrieve", "regenerate"} and first["grounded"] is False
    assert first["problems"] and first["suggestions"]
    assert last["action"] == "accept" and last["round"] == first["round"] + 1 and last["suggestions"] == []
    assert len(api.model.prompts("grade_answer")) == 2


def test_self_rag_off_makes_no_grading_call(seed_api: Callable[..., SeedClient]) -> None:
    model = StreamingTaskModel(replies={"generate": REPLY, "grade_answer": "{}"})
    api = seed_api(model, strength="strong")
    body = api.query({"query": QUESTION, "enable_self_rag": False}).json()
    assert body["metadata"]["features"]["self_rag"]["iterations"] == []
    assert api.model.prompts("grade_answer") == [] and len(api.model.prompts("generate")) == 1


# --- streaming --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "extra"), [("/api/v1/rag/query-stream", {}), ("/api/v1/rag/query", {"stream": True})]
)
def test_the_stream_sends_start_tokens_sources_done(
    seed_api: Callable[..., SeedClient], path: str, extra: dict[str, Any]
) -> None:
    api = seed_api()
    events = api.stream(path, {"query": QUESTION, "conversation_id": "s-1", **extra})
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-2:] == ["sources", "done"]
    assert set(names) <= {"start", "token", "draft_replaced", "sources", "done"}
    assert "".join(data["text"] for name, data in events if name == "token") == REPLY
    start, done = events[0][1], events[-1][1]
    assert start["conversation_id"] == "s-1" and start["query"] == QUESTION
    assert_query_response(done)
    assert events[-2][1]["sources"] == done["sources"] and done["metadata"]["conversation_id"] == "s-1"


def test_a_failed_stream_ends_with_an_error_event(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api(api_keys="key-a:default")
    reply = api.client.post("/api/v1/rag/query-stream", json={"query": QUESTION})
    assert reply.status_code == 401  # checked before the stream opens
    reply = api.client.post("/api/v1/rag/query-stream", json={"query": QUESTION, "top_k": 99})
    assert reply.status_code == 401  # the key is checked before the body (service/api/request_guard.py)


# --- batch ------------------------------------------------------------------------------------------------


def test_batch_takes_the_seed_body(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api()
    reply = api.client.post(
        "/api/v1/rag/batch",
        json={"queries": [QUESTION, {"query": QUESTION, "mode": "precise"}, {"query": ""}]},
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["succeeded"], body["failed"]) == (2, 1)
    first, second, bad = body["results"]
    assert_query_response(first) and assert_query_response(second)  # type: ignore[func-returns-value]
    assert second["metadata"]["mode"] == "precise"
    assert bad["status"] == 422 and bad["field"] == "query"


def test_batch_bounds_and_bodies(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api()
    post = api.client.post
    assert post("/api/v1/rag/batch", json={"queries": [QUESTION] * 51}).status_code == 422
    assert post("/api/v1/rag/batch", json={"queries": []}).status_code == 422
    both = {"queries": [QUESTION], "requests": [{"query": QUESTION}]}
    assert post("/api/v1/rag/batch", json=both).status_code == 422
    today = post("/api/v1/rag/batch", json={"requests": [{"query": QUESTION}]}).json()
    assert today["results"][0]["ok"] and "short_answer" in today["results"][0]  # the engine's own shape


# --- /api/v1/search ----------------------------------------------------------------------------------------


def test_search_returns_ranked_passages(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api()
    reply = api.search({"query": "largest planet", "top_k": 2})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["count"] == len(body["results"]) <= 2
    top = body["results"][0]
    assert top["source"].endswith("jupiter.md") and top["rank"] == 1 and isinstance(top["score"], float)
    assert {"id", "title", "content", "score", "source"} <= set(top)
    assert body["rerank"] == {"requested": False, "ran": False, "reason": ""}
    assert api.model.calls == []  # retrieval only


def test_search_filters_and_modes(
    seed_api: Callable[..., SeedClient], searches: list[dict[str, Any]]
) -> None:
    api = seed_api()
    body = api.search({"query": "planet tea", "filters": {"title": "Tea"}, "top_k": 5}).json()
    assert [result["title"] for result in body["results"]] == ["Tea"]
    api.search({"query": "planet", "mode": "precise"})
    api.search({"query": "planet", "mode": "bm25"})
    assert searches[-2]["weights"] == (0.8, 0.2) and searches[-1]["mode"] == "bm25"
    assert api.search({"query": "planet", "filters": {"tenant": "x"}}).status_code == 422
    assert api.search({"query": "planet", "top_k": 21}).status_code == 422


def test_search_rerank_uses_one_batched_model_call(seed_api: Callable[..., SeedClient]) -> None:
    model = StreamingTaskModel(replies={"generate": REPLY, "unknown": "[1] 1\n[2] 9"})
    api = seed_api(model)
    fused = api.search({"query": "planet tea", "top_k": 2}).json()["results"]
    reranked = api.search({"query": "planet tea", "top_k": 2, "rerank": True}).json()
    assert reranked["rerank"]["ran"] is True and len(model.calls) == 1
    assert [result["id"] for result in reranked["results"]] == [fused[1]["id"], fused[0]["id"]]
    assert reranked["results"][0]["fused_rank"] == 2 and "rerank_ms" in reranked["timings_ms"]


def test_search_rerank_garbage_keeps_the_fused_order(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api(StreamingTaskModel(replies={"unknown": "I cannot rank these."}))
    fused = api.search({"query": "planet tea", "top_k": 2}).json()["results"]
    reranked = api.search({"query": "planet tea", "top_k": 2, "rerank": True}).json()
    assert reranked["rerank"]["ran"] is False and "scored 0 of" in reranked["rerank"]["reason"]
    assert [r["id"] for r in reranked["results"]] == [r["id"] for r in fused]


# --- tenants ----------------------------------------------------------------------------------------------


def test_another_tenants_key_gets_nothing_of_the_first_tenant(seed_api: Callable[..., SeedClient]) -> None:
    api = seed_api(api_keys="key-a:default,key-b:globex")
    mine, theirs = {"X-API-Key": "key-a"}, {"X-API-Key": "key-b"}
    first = api.query({"query": QUESTION, "conversation_id": "shared-id"}, headers=mine).json()
    assert first["retrieved_count"] >= 1
    calls_before = len(api.model.calls)
    other = api.query({"query": "What did I ask before?", "conversation_id": "shared-id"}, headers=theirs)
    assert other.status_code == 200, other.text
    body = other.json()
    assert (
        body["retrieved_count"] == 0 and body["sources"] == [] and body["metadata"]["tenant_id"] == "globex"
    )
    later_prompts = [message for _task, messages in api.model.calls[calls_before:] for message in messages]
    assert not any(QUESTION in str(message.content) for message in later_prompts)
    globex = Session(api.resources.settings).history("shared-id", tenant="globex")["messages"]
    assert QUESTION not in [message.content for message in globex]
    assert api.search({"query": "largest planet"}, headers=theirs).json()["results"] == []
    assert api.search({"query": "largest planet", "tenant_id": "default"}, headers=theirs).status_code == 403
    assert api.query({"query": QUESTION, "tenant_id": "default"}, headers=theirs).status_code == 403
    assert api.search({"query": "largest planet"}).status_code == 401
    batch = api.client.post("/api/v1/rag/batch", json={"queries": [QUESTION]}, headers=theirs).json()
    assert batch["results"][0]["retrieved_count"] == 0
