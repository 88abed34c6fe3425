"""The seed contract's routes over a real server, driven by a client built from the seed's own classes
(tests/helpers/seed001.py: QueryRequest / QueryResponse / SourceInfo / CitationInfo as the seed writes them,
RAGRequest / RAGResponse and the stream events from its field lists and stream examples): /api/v1/rag/query
in its three modes, /query-stream, /generate (with and without `stream`), /generate/stream, /batch, the
errors a client sees (422 naming the field, 401 without a key), and the engine's own switches, conversations,
search and tenants on the same routes.

Why the seed's classes: every body and every stream event must be readable by the client the seed
describes; a field of another type, a missing one or an event type it does not know fails the validation.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage, SystemMessage
from pydantic import BaseModel

from config.settings import Settings
from graphs.runner import Session
from nodes.resources import Resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher, SearchResult
from service.api.app import create_app
from service.api.engine import RunSpec
from service.api.seed_runs import seed_response
from service.api.seed_schemas import QueryRequest as EngineQueryRequest
from state.context import Context
from tests.conftest import write_corpus
from tests.fakes import StreamingTaskModel, TaskChatModel
from tests.helpers import seed001
from tests.helpers.api_server import serve_app
from tests.helpers.calibrators import scripted
from tests.helpers.seed001 import QueryRequest, QueryResponse, RAGRequest

REPLY = "Jupiter is the largest planet in the Solar System [1]."
QUESTION = "What is the largest planet in the Solar System?"
CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. It has 95 known moons.",
    "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees for three minutes.",
}
#: The seed's stream orders: the opening events once each, then the answer's pieces, then the closing ones.
QUERY_STREAM_ORDER = ["query_rewritten", "documents_retrieved", "generation_start"]
GENERATE_STREAM_ORDER = ["context"]
#: Seconds a blocked model call waits for the test to release it (a test that forgot to).
HOLD_LIMIT_S = 60


class SeedApi:
    """A running server, its seed client, the raw HTTP client, resources and fake model."""

    def __init__(
        self, client: httpx.Client, resources: Resources, model: TaskChatModel, app: FastAPI
    ) -> None:
        self.client, self.resources, self.model, self.app = client, resources, model, app
        self.seed = seed001.SeedClient(client)

    def query(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return self.client.post("/api/v1/rag/query", json=body, **kwargs)

    def search(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return self.client.post("/api/v1/search", json=body, **kwargs)


@pytest.fixture
def seed_api(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> Iterator[Callable[..., SeedApi]]:
    """`seed_api(model=None, strength="weak", **settings)`: a uvicorn server over the corpus, fake models."""
    with ExitStack() as servers:

        def start(model: TaskChatModel | None = None, strength: str = "weak", **overrides: Any) -> SeedApi:
            model = model or StreamingTaskModel(replies={"generate": REPLY})
            resources = install(model, strength=strength)
            resources.knowledge_base = make_kb(resources.settings)
            files = write_corpus(tmp_path / "corpus", CORPUS)
            ingest_paths(resources.knowledge_base, list(files.values()))
            app = create_app(resources.settings.model_copy(update=overrides))
            return SeedApi(servers.enter_context(serve_app(app)), resources, model, app)

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


def types_of(events: list[BaseModel]) -> list[str]:
    return [str(event.type) for event in events]


def assert_stream_order(types: list[str], opening: list[str], piece: str, closing: list[str]) -> None:
    """The opening events once each in order, one or more pieces of the answer, the closing events."""
    pieces = len(types) - len(opening) - len(closing)
    assert pieces >= 1 and types == [*opening, *[piece] * pieces, *closing], types


def assert_cites_jupiter(response: QueryResponse) -> None:
    """The answer cites the Jupiter passage as [1], in sources and citations alike."""
    (citation,) = response.citations
    assert citation.citation_num == 1 and 0.0 <= citation.confidence <= 1.0
    first = response.sources[0]
    assert first.citation_id == "[1]" and first.id == citation.source_id
    assert first.source.endswith("jupiter.md") and "95 known moons" in first.content


# --- /query: the three modes


@pytest.mark.parametrize("mode", ["simple", "advanced", "precise"])
def test_each_mode_answers_a_query_response(
    seed_api: Callable[..., SeedApi], searches: list[dict[str, Any]], mode: str
) -> None:
    api = seed_api()
    response = api.seed.query(QueryRequest(query=QUESTION, mode=mode, top_k=6, temperature=0.2))
    assert response.query == QUESTION and "Jupiter is the largest planet" in response.answer
    assert response.retrieved_count >= 1 and response.generation_time > 0
    assert_cites_jupiter(response)
    searched = {call["query"] for call in searches}
    # The searched question: the question itself, or the first rewrite the search ran.
    assert response.rewritten_query in searched
    if mode != "advanced":
        assert response.rewritten_query == QUESTION  # the weak model's simple question is not rewritten
    assert response.metadata["mode"] == mode and response.metadata["temperature"] == 0.2
    assert response.metadata["conversation_id"]  # a new conversation, named for the follow-up


def test_every_answer_route_carries_the_answers_calibrated_judgement(
    seed_api: Callable[..., SeedApi],
) -> None:
    api = seed_api()
    body = api.query({"query": QUESTION}).json()
    assert body["band"] in ("confident", "tentative") and body["metadata"]["not_found_reason"] == ""
    confidence = body["metadata"]["confidence"]
    assert confidence is None or 0.0 <= confidence <= 1.0
    # every citation carries the answer's calibrated confidence, not a per-citation figure
    assert [citation["confidence"] for citation in body["citations"]] == [confidence or 0.0]
    streamed = api.seed.stream("/api/v1/rag/query-stream", QueryRequest(query=QUESTION))
    complete = json.loads(streamed[-2])
    assert complete["type"] == "generation_complete" and complete["band"] == body["band"]
    events = api.seed.stream("/api/v1/rag/generate/stream", RAGRequest(query=QUESTION))
    done = json.loads(events[-1])
    assert done["type"] == "done" and done["band"] == body["band"] and done["not_found_reason"] == ""
    assert done["confidence"] is None or 0.0 <= done["confidence"] <= 1.0


def test_a_query_response_holds_the_judgement_of_its_run(settings: Settings) -> None:
    """CitationInfo.confidence is the answer's calibrated confidence (the engine's own per-citation
    figure, term support, is not what the seed's field means); `band` says what the engine made of it."""
    request = EngineQueryRequest(query=QUESTION)
    result = {
        "answer": "Not sure — the closest the documents come is: Jupiter has 95 known moons [1]",
        "band": "tentative",
        "confidence": 0.4163,
        "citations": [{"marker": 1, "chunk_id": "c1", "confidence": 0.9}],
        "sources": [{"chunk_id": "c1", "text": "Jupiter has 95 known moons.", "source": "/d/jupiter.md"}],
    }
    spec = RunSpec(QUESTION, "t1", Context())
    body = seed_response(request, spec, result, [], 1.0, settings)
    assert [citation["confidence"] for citation in body["citations"]] == [0.416]
    assert body["band"] == "tentative" and body["metadata"]["confidence"] == 0.416
    declined = {"answer": "Not found.", "not_found": True, "band": "not_found", "confidence": None,
                "not_found_reason": "nothing was retrieved"}  # fmt: skip
    body = seed_response(request, spec, declined, [], 1.0, settings)
    assert body["band"] == "not_found" and body["citations"] == []
    assert body["metadata"]["not_found_reason"] == "nothing was retrieved"
    assert body["metadata"]["confidence"] is None


def test_include_sources_false_leaves_sources_out(seed_api: Callable[..., SeedApi]) -> None:
    response = seed_api().seed.query(QueryRequest(query=QUESTION, include_sources=False))
    assert response.sources == [] and response.citations  # the answer still cites


# --- errors a seed client sees


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
    seed_api: Callable[..., SeedApi], payload: dict[str, Any], field: str
) -> None:
    api = seed_api()
    reply = api.query(payload)
    assert reply.status_code == 422, reply.text
    assert reply.json()["field"] == field
    assert api.model.calls == []


@pytest.mark.parametrize(
    ("path", "payload", "field"),
    [
        ("/api/v1/rag/query-stream", {"query": QUESTION, "top_k": 21}, "top_k"),
        ("/api/v1/rag/generate", {"query": QUESTION, "top_k": 51}, "top_k"),
        ("/api/v1/rag/generate", {"query": QUESTION, "rewrite_method": "magic"}, "rewrite_method"),
        ("/api/v1/rag/generate", {"query": QUESTION, "stream": "sometimes"}, "stream"),
        ("/api/v1/rag/generate/stream", {"query": ""}, "query"),
        (
            "/api/v1/rag/generate/stream",
            {"query": QUESTION, "include_citations": "maybe"},
            "include_citations",
        ),
        ("/api/v1/rag/batch", {"queries": [QUESTION] * 51}, "queries"),
        ("/api/v1/rag/batch", {"queries": []}, "queries"),
    ],
)
def test_a_bad_body_is_422_on_every_route(
    seed_api: Callable[..., SeedApi], path: str, payload: dict[str, Any], field: str
) -> None:
    api = seed_api()
    reply = api.client.post(path, json=payload)
    assert reply.status_code == 422, reply.text
    assert reply.json()["field"] == field
    assert api.model.calls == []


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/api/v1/rag/query", QueryRequest(query=QUESTION).model_dump()),
        ("/api/v1/rag/query-stream", QueryRequest(query=QUESTION).model_dump()),
        ("/api/v1/rag/generate", RAGRequest(query=QUESTION).model_dump()),
        ("/api/v1/rag/generate/stream", RAGRequest(query=QUESTION).model_dump()),
        ("/api/v1/rag/batch", {"queries": [QUESTION]}),
    ],
)
def test_without_a_key_every_route_is_401(
    seed_api: Callable[..., SeedApi], path: str, payload: dict[str, Any]
) -> None:
    api = seed_api(api_keys="key-a:default")
    assert api.client.post(path, json=payload).status_code == 401
    assert api.client.post(path, json={**payload, "top_k": 99}).status_code == 401  # the key comes first
    assert api.client.post(path, json=payload, headers={"X-API-Key": "wrong"}).status_code == 401
    assert api.model.calls == []


# --- conversation_id: the seed's conversation -------------------------------------------------------------


def test_a_follow_up_in_a_conversation_sees_the_previous_turn(seed_api: Callable[..., SeedApi]) -> None:
    api = seed_api()
    first = api.seed.query(QueryRequest(query=QUESTION, conversation_id="conv-1"))
    assert first.metadata["conversation_id"] == "conv-1"
    follow_up = api.seed.query(QueryRequest(query="How many moons does it have?", conversation_id="conv-1"))
    # Read as a retrieval scope (documents tagged conv-1), the follow-up would find nothing on this corpus.
    assert follow_up.metadata["not_found"] is False and follow_up.retrieved_count >= 1
    assert follow_up.rewritten_query.startswith("How many moons does it have?")
    assert "Jupiter" in follow_up.rewritten_query or "Solar" in follow_up.rewritten_query
    last_prompt = api.model.prompts("generate")[-1]
    assert any(QUESTION in str(message.content) for message in last_prompt), "the history reaches the prompt"
    messages = Session(api.resources.settings).history("conv-1")["messages"]
    assert [message.type for message in messages] == ["human", "ai", "human", "ai"]


def test_without_a_conversation_each_query_starts_a_new_one(seed_api: Callable[..., SeedApi]) -> None:
    api = seed_api()
    one = api.seed.query(QueryRequest(query=QUESTION)).metadata["conversation_id"]
    two = api.seed.query(QueryRequest(query=QUESTION)).metadata["conversation_id"]
    assert one != two


# --- modes change retrieval -------------------------------------------------------------------------------


def test_simple_mode_is_the_standard_hybrid_search(
    seed_api: Callable[..., SeedApi], searches: list[dict[str, Any]]
) -> None:
    api = seed_api()
    assert api.query({"query": QUESTION, "mode": "simple", "top_k": 6}).status_code == 200
    assert searches and all(call["k"] == 6 and call["weights"] is None for call in searches)
    assert all(call["mode"] == "hybrid" for call in searches)


def test_precise_mode_weights_dense_0_8_and_bm25_0_2(
    seed_api: Callable[..., SeedApi], searches: list[dict[str, Any]]
) -> None:
    api = seed_api()
    body = api.query({"query": QUESTION, "mode": "precise", "top_k": 6}).json()
    assert searches and all(call["weights"] == (0.8, 0.2) and call["k"] == 6 for call in searches)
    assert body["metadata"]["retrieval"]["weights"] == {"dense": 0.8, "bm25": 0.2}


def test_advanced_mode_searches_three_queries_with_a_third_of_top_k_each(
    seed_api: Callable[..., SeedApi], searches: list[dict[str, Any]]
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


def test_switches_reach_the_run_and_the_response_says_which_ran(seed_api: Callable[..., SeedApi]) -> None:
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


def test_switches_off(seed_api: Callable[..., SeedApi]) -> None:
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
    # Each source keeps its label (the answer just does not cite it).
    assert [source["citation_id"] for source in body["sources"]] == [
        f"[{n}]" for n in range(1, len(body["sources"]) + 1)
    ]


def test_a_self_rag_revision_reports_each_grade(seed_api: Callable[..., SeedApi], calibrator: Any) -> None:
    """The (LLM) grader calls the first draft ungrounded and the judgement is tentative: the run searches
    again and writes a second draft, which is confident. The response carries both grades, the first with
    its problems and suggestion."""
    calibrator(scripted(0.5, 0.9))
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


def test_self_rag_off_makes_no_grading_call(seed_api: Callable[..., SeedApi]) -> None:
    model = StreamingTaskModel(replies={"generate": REPLY, "grade_answer": "{}"})
    api = seed_api(model, strength="strong")
    body = api.query({"query": QUESTION, "enable_self_rag": False}).json()
    assert body["metadata"]["features"]["self_rag"]["iterations"] == []
    assert api.model.prompts("grade_answer") == [] and len(api.model.prompts("generate")) == 1


# --- /query-stream ----------------------------------------------------------------------------------------


def test_the_query_stream_is_the_seeds_example_in_order(seed_api: Callable[..., SeedApi]) -> None:
    api = seed_api()
    request = QueryRequest(query=QUESTION, conversation_id="s-1", top_k=3)
    payloads = api.seed.stream("/api/v1/rag/query-stream", request)
    assert payloads[-1] == seed001.QUERY_STREAM_END
    events = seed001.read_events(payloads[:-1], seed001.QUERY_STREAM_EVENTS)
    assert_stream_order(types_of(events), QUERY_STREAM_ORDER, "token", ["generation_complete"])
    rewritten, retrieved, complete = events[0], events[1], events[-1]
    assert isinstance(rewritten, seed001.QueryRewrittenEvent) and rewritten.content == QUESTION
    assert isinstance(retrieved, seed001.DocumentsRetrievedEvent) and retrieved.count >= 1
    tokens = [event for event in events if isinstance(event, seed001.TokenEvent)]
    assert "".join(token.content for token in tokens) == REPLY
    assert isinstance(complete, seed001.GenerationCompleteEvent)
    (citation,) = complete.citations
    assert citation.citation_num == 1 and complete.sources[0].citation_id == "[1]"
    assert complete.sources[0].id == citation.source_id and complete.sources[0].source.endswith("jupiter.md")
    # The rest of the QueryResponse rides along (a client needs the conversation for its follow-up).
    response = QueryResponse.model_validate(json.loads(payloads[-2]))
    assert response.metadata["conversation_id"] == "s-1" and response.retrieved_count == retrieved.count


def test_query_with_stream_true_answers_as_the_query_stream(seed_api: Callable[..., SeedApi]) -> None:
    api = seed_api()
    with api.client.stream("POST", "/api/v1/rag/query", json={"query": QUESTION, "stream": True}) as reply:
        assert reply.status_code == 200
        payloads = seed001.data_lines(reply)
    assert payloads[-1] == seed001.QUERY_STREAM_END
    events = seed001.read_events(payloads[:-1], seed001.QUERY_STREAM_EVENTS)
    assert_stream_order(types_of(events), QUERY_STREAM_ORDER, "token", ["generation_complete"])


class Blocked:
    """A model reply that blocks until released (a call that outlives the server's model limit)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def __call__(self, _messages: list[BaseMessage]) -> str:
        self.released.wait(HOLD_LIMIT_S)
        return REPLY


@pytest.fixture
def blocked() -> Iterator[Blocked]:
    held = Blocked()
    yield held
    held.released.set()


def test_a_failed_query_stream_sends_error_then_done(
    seed_api: Callable[..., SeedApi], blocked: Blocked
) -> None:
    api = seed_api(StreamingTaskModel(replies={"generate": blocked}), api_model_timeout_s=0.3)
    events, last = api.seed.query_stream(QueryRequest(query=QUESTION))
    assert last == seed001.QUERY_STREAM_END
    types = types_of(events)
    assert types[-1] == "error" and "generation_complete" not in types and "token" not in types
    error = events[-1]
    assert isinstance(error, seed001.ErrorEvent) and "RAG_API_MODEL_TIMEOUT_S" in error.message


# --- /generate and /generate/stream


@pytest.mark.parametrize("rewrite_method", ["multi", "hyde", "none"])
def test_generate_answers_the_seeds_rag_request_with_a_rag_response(
    seed_api: Callable[..., SeedApi], rewrite_method: str
) -> None:
    api = seed_api()
    request = RAGRequest(query=QUESTION, rewrite_method=rewrite_method, top_k=5)  # `stream: false` sent
    response = api.seed.generate(request)
    assert "Jupiter is the largest planet" in response.answer
    (citation,) = response.citations
    assert citation.source_id == 1 and citation.chunk_id and citation.filename == "jupiter.md"
    assert "95 known moons" in citation.content and citation.document_id
    metadata = response.metadata
    assert metadata.chunks_found >= 1 and metadata.model == api.resources.settings.llm_model
    assert metadata.total_time > 0 and metadata.generate_time > 0 and metadata.retrieve_time > 0
    # Answers are written one after another, inside the request (searches may run side by side).
    assert metadata.generate_time <= metadata.total_time and metadata.rewrite_time >= 0
    usage = metadata.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > 0


def test_generate_without_citations(seed_api: Callable[..., SeedApi]) -> None:
    response = seed_api().seed.generate(RAGRequest(query=QUESTION, include_citations=False))
    assert response.citations == [] and "[1]" not in response.answer


@pytest.mark.parametrize(
    ("path", "extra"),
    [("/api/v1/rag/generate/stream", {}), ("/api/v1/rag/generate", {"stream": True})],
)
def test_the_generate_stream_is_context_chunks_citations_done(
    seed_api: Callable[..., SeedApi], path: str, extra: dict[str, Any]
) -> None:
    api = seed_api()
    events = api.seed.generate_stream(RAGRequest(query=QUESTION, **extra), path=path)
    assert_stream_order(types_of(events), GENERATE_STREAM_ORDER, "chunk", ["citations", "done"])
    context, citations = events[0], events[-2]
    assert isinstance(context, seed001.ContextEvent) and context.chunks_count >= 1
    chunks = [event for event in events if isinstance(event, seed001.ChunkEvent)]
    assert "".join(chunk.content for chunk in chunks) == REPLY
    assert isinstance(citations, seed001.CitationsEvent)
    (citation,) = citations.citations
    assert citation.source_id == 1 and citation.filename == "jupiter.md"


def test_a_failed_generate_stream_ends_with_an_error_event(
    seed_api: Callable[..., SeedApi], blocked: Blocked
) -> None:
    api = seed_api(StreamingTaskModel(replies={"generate": blocked}), api_model_timeout_s=0.3)
    events = api.seed.generate_stream(RAGRequest(query=QUESTION))
    assert types_of(events)[-1] == "error" and "chunk" not in types_of(events)
    error = events[-1]
    assert isinstance(error, seed001.ErrorEvent) and "RAG_API_MODEL_TIMEOUT_S" in error.message


def test_the_engines_own_events_are_their_own_route(seed_api: Callable[..., SeedApi]) -> None:
    """/generate/events streams the run's events by SSE name (not the seed's format)."""
    api = seed_api()
    names = []
    with api.client.stream("POST", "/api/v1/rag/generate/events", json={"query": QUESTION}) as reply:
        assert reply.status_code == 200
        names = [line.split(":", 1)[1].strip() for line in reply.iter_lines() if line.startswith("event:")]
    assert names[0] == "query_rewritten" and names[-2:] == ["generation_complete", "done"]


# --- batch ------------------------------------------------------------------------------------------------


def test_batch_takes_the_seeds_body(seed_api: Callable[..., SeedApi]) -> None:
    api = seed_api()
    body = seed001.BatchRAGRequest(queries=[QUESTION, "How long is oolong tea brewed?"]).model_dump()
    reply = api.client.post("/api/v1/rag/batch", json=body)
    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    first, second = (QueryResponse.model_validate(result) for result in results)
    assert first.query == QUESTION and first.citations and first.sources[0].citation_id == "[1]"
    assert second.query == "How long is oolong tea brewed?"


def test_batch_items_are_query_requests_each_validated_alone(seed_api: Callable[..., SeedApi]) -> None:
    api = seed_api()
    items = [QueryRequest(query=QUESTION, mode="precise").model_dump(), {"query": ""}]
    body = api.client.post("/api/v1/rag/batch", json={"queries": items}).json()
    assert (body["succeeded"], body["failed"]) == (1, 1)
    good, bad = body["results"]
    assert QueryResponse.model_validate(good).metadata["mode"] == "precise"
    assert bad["status"] == 422 and bad["field"] == "query"


def test_batch_bounds_and_bodies(seed_api: Callable[..., SeedApi]) -> None:
    api = seed_api()
    post = api.client.post
    assert post("/api/v1/rag/batch", json={"queries": [QUESTION] * 50}).status_code == 200
    both = {"queries": [QUESTION], "requests": [{"query": QUESTION}]}
    assert post("/api/v1/rag/batch", json=both).status_code == 422
    today = post("/api/v1/rag/batch", json={"requests": [{"query": QUESTION}]}).json()
    assert today["results"][0]["ok"] and "short_answer" in today["results"][0]  # the engine's own shape


# --- /api/v1/search ----------------------------------------------------------------------------------------


def test_search_returns_ranked_passages(seed_api: Callable[..., SeedApi]) -> None:
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


def test_search_filters_and_modes(seed_api: Callable[..., SeedApi], searches: list[dict[str, Any]]) -> None:
    api = seed_api()
    body = api.search({"query": "planet tea", "filters": {"title": "Tea"}, "top_k": 5}).json()
    assert [result["title"] for result in body["results"]] == ["Tea"]
    api.search({"query": "planet", "mode": "precise"})
    api.search({"query": "planet", "mode": "bm25"})
    assert searches[-2]["weights"] == (0.8, 0.2) and searches[-1]["mode"] == "bm25"
    assert api.search({"query": "planet", "filters": {"tenant": "x"}}).status_code == 422
    assert api.search({"query": "planet", "top_k": 21}).status_code == 422


def test_search_rerank_uses_one_batched_model_call(seed_api: Callable[..., SeedApi]) -> None:
    model = StreamingTaskModel(replies={"generate": REPLY, "rerank": "[1] 1\n[2] 9"})
    api = seed_api(model)
    fused = api.search({"query": "planet tea", "top_k": 2}).json()["results"]
    reranked = api.search({"query": "planet tea", "top_k": 2, "rerank": True}).json()
    assert reranked["rerank"]["ran"] is True and len(model.calls) == 1
    assert [result["id"] for result in reranked["results"]] == [fused[1]["id"], fused[0]["id"]]
    assert reranked["results"][0]["fused_rank"] == 2 and "rerank_ms" in reranked["timings_ms"]


def test_search_rerank_garbage_keeps_the_fused_order(seed_api: Callable[..., SeedApi]) -> None:
    api = seed_api(StreamingTaskModel(replies={"rerank": "I cannot rank these."}))
    fused = api.search({"query": "planet tea", "top_k": 2}).json()["results"]
    reranked = api.search({"query": "planet tea", "top_k": 2, "rerank": True}).json()
    assert reranked["rerank"]["ran"] is False and "scored 0 of" in reranked["rerank"]["reason"]
    assert [r["id"] for r in reranked["results"]] == [r["id"] for r in fused]


# --- tenants ----------------------------------------------------------------------------------------------


def test_another_tenants_key_gets_nothing_of_the_first_tenant(seed_api: Callable[..., SeedApi]) -> None:
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
    assert QueryResponse.model_validate(batch["results"][0]).retrieved_count == 0
