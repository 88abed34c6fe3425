"""The LangGraph SDK against `langgraph dev`, started and stopped by the test: a thread, a streamed run whose
`custom` stream carries the graph's own events (nodes.events), the thread's state, a follow-up turn — and the
REST API of service/api mounted by langgraph.json's `http.app` on the same server.

The server runs in another process, so its models are a fake OpenAI-compatible endpoint (tests.fake_openai)
chosen by configuration, exactly as a deployment would point at a real one.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from tests.conftest import REPO_ROOT, isolated_settings, write_corpus
from tests.fake_openai import FakeOpenAIServer
from tests.helpers.api_server import free_port
from tests.helpers.langgraph_dev import COPY_IGNORE, environment_without_settings, langgraph_dev

pytestmark = pytest.mark.slow

REPLY = "Jupiter is the largest planet in the Solar System [1]."
#: What the engine answers to REPLY: the short answer on its own line first, then the cited sentence.
ANSWER = "Jupiter\n\nJupiter is the largest planet in the Solar System [1]."
QUESTION = "What is the largest planet in the Solar System?"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """`langgraph dev` over an indexed corpus, its models behind the fake endpoint; yields its base URL."""
    with FakeOpenAIServer(REPLY, free_port()) as fake:
        models = {
            "RAG_EMBEDDING_PROVIDER": "openai",
            "RAG_EMBEDDING_BASE_URL": fake.base_url,
            "RAG_EMBEDDING_API_KEY": "test",
            "RAG_LLM_PROVIDER": "openai",
            "RAG_LLM_BASE_URL": fake.base_url,
            "RAG_LLM_API_KEY": "test",
            "RAG_LLM_MODEL": "fake",
        }
        data_dir = tmp_path / "data"
        settings = isolated_settings(
            tmp_path,
            data_dir=data_dir,
            **{key.removeprefix("RAG_").lower(): value for key, value in models.items()},
        )
        files = write_corpus(
            tmp_path / "corpus",
            {
                "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System.",
                "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees.",
            },
        )
        kb = KnowledgeBase.open(settings)
        assert ingest_paths(kb, list(files.values())).count("indexed") == 2
        kb.close()

        project = tmp_path / "project"
        shutil.copytree(REPO_ROOT, project, ignore=COPY_IGNORE)
        env = (
            environment_without_settings()
            | models
            | {
                "RAG_DATA_DIR": str(data_dir),
                "RAG_ANALYZER": "heuristic",
                "RAG_GRADER": "score",
                "RAG_MAX_ITERATIONS": "1",
            }
        )
        with langgraph_dev(project, env, tmp_path / "server.log") as base:
            yield base


def test_sdk_thread_run_custom_events_and_state(server: str) -> None:
    client = get_sync_client(url=server)
    thread = client.threads.create()
    custom: list[dict[str, Any]] = []
    for part in client.runs.stream(
        thread["thread_id"], "rag", input={"question": QUESTION}, stream_mode=["custom", "values"]
    ):
        assert part.event != "error", part.data
        if part.event == "custom":
            custom.append(part.data)
    names = [event["event"] for event in custom]
    assert names[0] == "query_rewritten" and names[-1] == "generation_complete"
    assert names.index("documents_retrieved") < names.index("generation_start")
    complete = custom[-1]["data"]
    assert complete["answer"] == ANSWER and complete["sources"][0]["source"].endswith("jupiter.md")

    state = client.threads.get_state(thread["thread_id"])
    values = state["values"]
    assert values["answer"] == ANSWER and values["sources"][0]["source"].endswith("jupiter.md")
    assert [message["type"] for message in values["messages"]] == ["human", "ai"]

    client.runs.wait(thread["thread_id"], "rag", input={"question": "How hot is oolong tea brewed?"})
    history = client.threads.get_history(thread["thread_id"], limit=50)
    assert len(history) > 2
    latest = client.threads.get_state(thread["thread_id"])["values"]
    assert [message["type"] for message in latest["messages"]] == ["human", "ai", "human", "ai"]


def test_the_rest_api_is_mounted_on_the_same_server(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        assert client.get("/health").json()["status"] == "ok"
        assert client.get("/ok").json()["ok"] is True  # the LangGraph API is still there
        reply = client.post("/api/v1/rag/generate", json={"query": QUESTION})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["answer"] == ANSWER and body["sources"][0]["source"].endswith("jupiter.md")
        assert body["metadata"]["model"] == "fake"
        health = client.get("/api/v1/rag/health").json()
        assert health == {"status": "up"}, health  # no key: up or down only
