"""The API's request and answer counters (GET /metrics): every response is counted, a 500 included, and a
batch item refused for its input is counted as refused, not as a failed answer (service.api.app's meter,
service.api.metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from nodes.resources import Resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.api.app import create_app
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app

REPLY = "Jupiter is the largest planet in the Solar System [1]."
QUESTION = "What is the largest planet in the Solar System?"
CORPUS = {"jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System."}


@pytest.fixture
def client(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> Iterator[tuple[httpx.Client, Resources]]:
    """A uvicorn server of the API over a one-file corpus, with a fake model that answers REPLY."""
    resources = install(TaskChatModel(replies={"generate": REPLY}), strength="weak")
    resources.knowledge_base = make_kb(resources.settings)
    ingest_paths(resources.knowledge_base, list(write_corpus(tmp_path / "corpus", CORPUS).values()))
    with ExitStack() as stack:
        yield stack.enter_context(serve_app(create_app(resources.settings))), resources


def samples(client: httpx.Client, name: str) -> list[tuple[dict[str, str], float]]:
    """The (labels, value) samples of one metric in the server's /metrics (a connection of its own: the
    server closes the one a 500 went out on)."""
    text = httpx.get(f"{client.base_url}/metrics", timeout=30).text
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def value(client: httpx.Client, name: str, **labels: Any) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    return sum(v for found, v in samples(client, name) if all(found.get(k) == w for k, w in labels.items()))


def test_a_route_that_raises_answers_500_and_is_counted(
    client: tuple[httpx.Client, Resources], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, resources = client

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("catalog exploded")

    monkeypatch.setattr(resources.kb().catalog, "documents", broken)
    reply = api.get("/api/v1/documents")
    assert reply.status_code == 500, reply.text
    assert "catalog exploded" not in reply.text  # one line for the client, the stack in the log
    assert value(api, "rag_requests_total", route="/api/v1/documents", method="GET", status="500") == 1
    assert value(api, "rag_request_latency_seconds_count", route="/api/v1/documents") == 1
    monkeypatch.undo()
    assert httpx.get(f"{api.base_url}/api/v1/documents", timeout=30).status_code == 200
    assert value(api, "rag_requests_total", route="/api/v1/documents", method="GET") == 2


def test_a_batch_item_refused_for_its_input_is_no_failed_answer(
    client: tuple[httpx.Client, Resources],
) -> None:
    api, _ = client
    reply = api.post(
        "/api/v1/rag/batch",
        json={"requests": [{"query": QUESTION}, {"query": QUESTION, "top_k": "many"}]},
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["succeeded"], body["failed"]) == (1, 1)
    assert body["results"][1]["status"] == 422
    assert value(api, "rag_answers_total", outcome="failure") == 0
    assert value(api, "rag_answers_total") == 1  # the one answer given
    assert value(api, "rag_refused_total", route="batch") == 1
    assert value(api, "rag_errors_total", route="batch", kind="ValidationError") == 1
    assert value(api, "rag_requests_total", route="/api/v1/rag/batch", status="200") == 1


def test_a_question_refused_before_its_run_is_no_failed_answer(
    client: tuple[httpx.Client, Resources],
) -> None:
    api, _ = client
    reply = api.post("/api/v1/rag/generate", json={"query": QUESTION, "top_k": 100})
    assert reply.status_code == 422, reply.text
    assert value(api, "rag_answers_total", outcome="failure") == 0
    assert value(api, "rag_requests_total", route="/api/v1/rag/generate", status="422") == 1
