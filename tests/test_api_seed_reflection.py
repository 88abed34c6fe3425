"""The notes assistant's reflection switches over a real server, sent by a client written from its design:
camelCase `enableReflection`, `maxReflectionRounds`, `enableQueryRewriting`, `enableHyDE`, `retryStrategy`
on /api/v1/rag/query, and `metadata.features` saying which ran, each round's 1-10 score and suggestions,
and each retry.

Why: a notes-assistant client sends its own field names (a 422 "extra field" before) and reads its reflector's
form (score 1-10, under 7 needs improvement, suggestions that the next round uses).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import SystemMessage

from answering.calibrator import Thresholds
from nodes.resources import Resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher, SearchResult
from service.api.app import create_app
from tests.conftest import write_corpus
from tests.fakes import StreamingTaskModel, TaskChatModel
from tests.helpers.api_server import serve_app
from tests.helpers.calibrators import scripted

QUESTION = "What is the largest planet in the Solar System?"
REPLY = "Jupiter is the largest planet in the Solar System [1]."
CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. It has 95 known moons.",
    "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees for three minutes.",
}
SUGGESTION = "Say which source names the largest planet"
#: The grader's two replies, on the 1-10 scale a weak grader uses: the first needs improvement, with a
#: suggestion; the second passes.
GRADES = [
    json.dumps(
        {
            "grounded": False,
            "answers_question": False,
            "relevance": 3,
            "accuracy": 2,
            "completeness": 3,
            "clarity": 8,
            "suggestions": [SUGGESTION],
        }
    ),
    json.dumps(
        {
            "grounded": True,
            "answers_question": True,
            "relevance": 9,
            "accuracy": 10,
            "completeness": 9,
            "clarity": 9,
        }
    ),
]


@pytest.fixture
def serve(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> Iterator[Callable[[TaskChatModel, str], tuple[httpx.Client, TaskChatModel]]]:
    """`serve(model, strength)`: a uvicorn server over the corpus with fake models."""
    with ExitStack() as servers:

        def start(model: TaskChatModel, strength: str) -> tuple[httpx.Client, TaskChatModel]:
            resources = install(model, strength=strength)
            resources.knowledge_base = make_kb(resources.settings)
            ingest_paths(resources.knowledge_base, list(write_corpus(tmp_path / "corpus", CORPUS).values()))
            return servers.enter_context(serve_app(create_app(resources.settings))), model

        yield start


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(query, k) of every search the engine runs, in order."""
    calls: list[tuple[str, int]] = []
    original = Searcher.search

    def recording(self: Searcher, query: str, **kwargs: Any) -> SearchResult:
        calls.append((query, kwargs["k"]))
        return original(self, query, **kwargs)

    monkeypatch.setattr(Searcher, "search", recording)
    return calls


def test_camel_case_switches_run_the_reflector_and_the_response_reports_each_round(
    serve: Callable[..., tuple[httpx.Client, TaskChatModel]], searches: list[tuple[str, int]], calibrator: Any
) -> None:
    # the round's score is the judgement's: tentative, then confident from 0.8 (min_score 8 on the 1-10 scale)
    calibrator(scripted(0.5, 0.9, thresholds=Thresholds(confident=0.8, floor=0.3)))
    client, model = serve(StreamingTaskModel(replies={"generate": REPLY, "grade_answer": GRADES}), "strong")
    reply = client.post(
        "/api/v1/rag/query",
        json={
            "query": QUESTION,
            "top_k": 3,
            "enableReflection": True,
            "maxReflectionRounds": 2,
            "enableQueryRewriting": False,
            "enableHyDE": False,
            "retryStrategy": "expand",
        },
    )
    assert reply.status_code == 200, reply.text
    metadata = reply.json()["metadata"]
    features = metadata["features"]
    reflection = features["reflection"]
    assert {
        key: reflection[key] for key in ("enabled", "ran", "max_rounds", "min_score", "retry_strategy")
    } == {
        "enabled": True,
        "ran": True,
        "max_rounds": 2,
        "min_score": 8.0,
        "retry_strategy": "expand",
    }
    first, last = reflection["rounds"]
    assert first["score"] < 8 and first["needs_improvement"] is True and first["action"] == "retrieve"
    assert first["suggestions"][0] == SUGGESTION
    assert last["score"] >= 8 and last["needs_improvement"] is False and last["action"] == "accept"
    # expand: the retry searched the same question again, twice as deep; nothing was rewritten
    assert [k for query, k in searches if query == QUESTION] == [3, 6]
    assert {query for query, _ in searches} == {QUESTION}
    assert reflection["retries"] == [{"round": 2, "strategy": "expand", "depth": 2, "queries": [QUESTION]}]
    assert features["query_rewriting"] == {"enabled": False, "ran": False}
    assert features["hyde"]["ran"] is False and metadata["strategy"] == "DIRECT"
    # the suggestion reached the second answer's prompt
    second = model.prompts("generate")[-1]
    system = next(str(message.content) for message in second if isinstance(message, SystemMessage))
    assert f"- {SUGGESTION}" in system


def test_reflection_off_and_rewriting_on_are_reported(
    serve: Callable[..., tuple[httpx.Client, TaskChatModel]],
) -> None:
    client, model = serve(StreamingTaskModel(replies={"generate": REPLY}), "weak")
    body = {"query": QUESTION, "mode": "advanced", "enableReflection": False, "enable_query_rewriting": True}
    reply = client.post("/api/v1/rag/query", json=body)
    assert reply.status_code == 200, reply.text
    features = reply.json()["metadata"]["features"]
    assert features["query_rewriting"] == {
        "enabled": True,
        "ran": True,
    }  # advanced: the question + 2 rewrites
    assert features["reflection"]["enabled"] is False and features["reflection"]["rounds"] == []
    assert model.prompts("grade_answer") == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("retryStrategy", "deeper"),
        ("maxReflectionRounds", 0),
        ("maxReflectionRounds", 11),
        ("enableHyDE", "maybe"),
    ],
)
def test_a_bad_seed_003_field_is_a_422_naming_it(
    serve: Callable[..., tuple[httpx.Client, TaskChatModel]], field: str, value: Any
) -> None:
    client, model = serve(StreamingTaskModel(replies={"generate": REPLY}), "weak")
    reply = client.post("/api/v1/rag/query", json={"query": QUESTION, field: value})
    assert reply.status_code == 422
    error = reply.json()
    assert error["field"] == field and field in error["message"] and "\n" not in error["message"]
    assert model.prompts("generate") == []
