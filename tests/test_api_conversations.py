"""Conversation memory over HTTP: /rag/generate takes the conversation's ids, a conversation
summarizes itself every RAG_SUMMARY_EVERY_TURNS turns, POST /api/v1/conversations/{thread_id}/summarize
writes it now, and the API server sweeps idle conversations.

Driven through a real uvicorn server (tests.helpers.api_server) with API keys, as a client sees it: another
tenant's thread is as unknown as one nobody has (404, never its contents), and bad ids are one 422 line naming
the field.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.settings import Settings
from persistence.database import get_database
from retrieval import conversation_index
from retrieval.auto_summary import summary_worker
from retrieval.conversation_index import summarized_turns
from retrieval.knowledge_base import KnowledgeBase
from service.api import routes_conversations
from service.api.runtime import ApiState
from tests.helpers.api_server import serve
from tests.helpers.rag_world import QUESTION, World, world
from tests.helpers.summaries import stored_thread

KEYS = "key-acme:acme,key-globex:globex"
ACME = {"X-API-Key": "key-acme"}
GLOBEX = {"X-API-Key": "key-globex"}
FLUSH_S = 20.0


@pytest.fixture
def env(make_settings: Any, make_kb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """Two tenants' documents, the fake model, conversations summarized every 2 turns (blocks of 2), keys."""
    monkeypatch.setattr(conversation_index, "SUMMARY_BLOCK_TURNS", 2)
    settings: Settings = make_settings(summary_every_turns=2, api_keys=KEYS)
    kb = make_kb(settings)
    with world(settings, kb, tmp_path, tenants=("acme", "globex")) as built:
        yield built
    assert summary_worker().flush(FLUSH_S)


def memory(kb: KnowledgeBase, tenant: str, thread_id: str) -> list[Any]:
    """The stored items of a thread's memory (the long-term store's, in chunk form)."""
    return list(stored_thread(kb, tenant, thread_id))


def generate(client: Any, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    reply = client.post("/api/v1/rag/generate", json={"query": QUESTION, **body}, headers=headers)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_conversations_summarize_themselves_and_on_request(env: World) -> None:
    kb = env.kb
    with serve(env.settings) as client:
        turn = {"thread_id": "t1", "conversation_id": "c1"}
        generate(client, ACME, **turn, conversation_metadata={"character_id": "hero"})
        generate(client, ACME, **turn)
        assert summary_worker().flush(FLUSH_S)
        chunks = memory(kb, "acme", "t1")
        assert len(chunks) == 3 and {c.metadata["character_id"] for c in chunks} == {"hero"}  # automatic

        reply = client.post("/api/v1/conversations/t1/summarize", json={"related_plot_id": 7}, headers=ACME)
        assert reply.status_code == 200, reply.text
        result = reply.json()
        assert (result["status"], result["tenant"], result["turns"], result["conversation_id"]) == (
            "indexed",
            "acme",
            2,
            "c1",
        )
        for chunk in memory(kb, "acme", "t1"):
            assert (chunk.metadata["character_id"], chunk.metadata["related_plot_id"]) == ("hero", 7)
        # no body: every default; a route's ids were for that write, the thread's own ids stay
        again = client.post("/api/v1/conversations/t1/summarize", headers=ACME)
        assert again.status_code == 200 and again.json()["status"] == "indexed"
        kept = memory(kb, "acme", "t1")
        assert {c.metadata["character_id"] for c in kept} == {"hero"}
        assert all("related_plot_id" not in c.metadata for c in kept)


def test_another_tenant_cannot_summarize_or_probe_a_thread(env: World) -> None:
    kb = env.kb
    with serve(env.settings) as client:
        generate(client, ACME, thread_id="t1", conversation_id="c1")
        before = summarized_turns(kb, "t1", tenant="acme")
        probes = [
            client.post("/api/v1/conversations/t1/summarize", headers=GLOBEX),
            client.post("/api/v1/conversations/nobody/summarize", headers=GLOBEX),
            client.post("/api/v1/conversations/nobody/summarize", headers=ACME),
        ]
        assert [probe.status_code for probe in probes] == [404, 404, 404]
        assert probes[0].json()["message"] == "unknown thread 't1'"  # exactly as for an id nobody has
        assert "acme" not in probes[0].text
        assert memory(kb, "globex", "t1") == [] and summarized_turns(kb, "t1", tenant="acme") == before
        forged = client.post("/api/v1/conversations/t1/summarize", json={"tenant_id": "acme"}, headers=GLOBEX)
        assert forged.status_code == 403
        assert client.post("/api/v1/conversations/t1/summarize").status_code == 401
        assert summarized_turns(kb, "t1", tenant="acme") == before  # nothing written by the refusals


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/conversations/t1/summarize", {"character_id": "line\nbreak"}, "character_id"),
        ("/api/v1/conversations/t1/summarize", {"level": "summary"}, "level"),
        ("/api/v1/conversations/bad%20id/summarize", {}, "thread_id"),
        ("/api/v1/rag/generate", {"query": QUESTION, "conversation_metadata": {"level": 1}}, None),
    ],
)
def test_bad_ids_are_one_422_line(env: World, path: str, body: dict[str, Any], field: str | None) -> None:
    with serve(env.settings) as client:
        reply = client.post(path, json=body, headers=ACME)
    assert reply.status_code == 422, reply.text
    message = reply.json()["message"]
    assert "\n" not in message and "Traceback" not in message
    assert (field or "conversation_metadata") in message


def test_the_server_sweeps_idle_conversations(env: World, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = env.kb
    settings = env.settings.model_copy(update={"summary_every_turns": 0, "summary_idle_s": 1.0})
    monkeypatch.setattr(env.resources, "settings", settings)
    with serve(settings) as client:
        generate(client, ACME, thread_id="t1", conversation_id="c1")
        generate(client, GLOBEX, thread_id="t2")  # no conversation id: never summarized automatically
    assert summary_worker().flush(FLUSH_S) and memory(kb, "acme", "t1") == []
    state = ApiState(settings=settings, engine=None, metrics=None, keys={})  # type: ignore[arg-type]
    monkeypatch.setattr(routes_conversations, "SUMMARY_SWEEP_S", 1.0)

    async def sweep_a_while() -> None:
        task = asyncio.create_task(routes_conversations.idle_sweeper(state))
        deadline = time.monotonic() + 15
        while not memory(kb, "acme", "t1") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        task.cancel()

    asyncio.run(sweep_a_while())
    assert summarized_turns(kb, "t1", tenant="acme") == 1
    assert memory(kb, "globex", "t2") == [] and get_database(settings) is not None
