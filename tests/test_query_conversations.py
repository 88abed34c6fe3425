"""A conversation held through the seed API's POST /api/v1/rag/query is an engine conversation: after
RAG_SUMMARY_EVERY_TURNS turns it summarizes itself into its tenant's store (that conversation only), and
once it stalls (RAG_DIRECTOR_STALL_TURNS) the director gives the answer prompt its events; its questions
still search the whole corpus (the conversation id does not scope /query's retrieval).

Why these tests: /query's conversation used to be only the thread's history, so its conversations never
summarized themselves and never reached the director, unlike the engine's own threads with the same settings.
They run the real HTTP server over the fake models, then read the store and the prompts the model received.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval.auto_summary import summary_worker
from retrieval.conversation_index import SUMMARY_LEVEL, summarized_turns
from retrieval.knowledge_base import KnowledgeBase
from tests.helpers.api_server import serve
from tests.helpers.rag_world import QUESTION, World, world
from tests.helpers.summaries import stored_thread

QUERY = "/api/v1/rag/query"
FLUSH_S = 20.0
#: What the director's section says (prompts.director): the prompt of a stalled turn holds it.
DIRECTOR_HEADING = "The conversation seems stuck"


@pytest.fixture
def served(make_settings: Any, make_kb: Any, tmp_path: Path) -> Iterator[tuple[World, Any]]:
    """The two-document world of tenant 'default', every 2 turns summarized, the director after 3 stalled
    turns, and a real server over it."""
    settings = make_settings(summary_every_turns=2, director_stall_turns=3)
    with world(settings, make_kb(settings), tmp_path) as built, serve(settings) as client:
        yield built, client


def memory_chunks(kb: KnowledgeBase, thread_id: str) -> list[Any]:
    """The items a thread's conversation memory wrote into the long-term store (in chunk form)."""
    return list(stored_thread(kb, "default", thread_id))


def query(client: Any, question: str, conversation_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"query": question}
    if conversation_id:
        body["conversation_id"] = conversation_id
    reply = client.post(QUERY, json=body)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_a_query_conversation_summarizes_itself_and_only_itself(served: tuple[World, Any]) -> None:
    built, client = served
    chunks_before = built.kb.catalog.count_chunks()
    first = query(client, QUESTION, "c1")
    assert "Jupiter" in first["answer"] and first["sources"]  # the whole corpus is searched
    query(client, "How many moons does Jupiter have?", "c1")
    query(client, QUESTION, "c2")  # one turn: not due
    query(client, QUESTION)  # no conversation: never summarized
    query(client, QUESTION)
    assert summary_worker().flush(FLUSH_S)
    chunks = memory_chunks(built.kb, "c1")
    assert summarized_turns(built.kb, "c1", tenant="default") == 2
    assert [chunk.metadata["level"] for chunk in chunks].count(SUMMARY_LEVEL) == 1 and len(chunks) == 3
    assert {chunk.metadata["conversation_id"] for chunk in chunks} == {"c1"}
    assert memory_chunks(built.kb, "c2") == [] and summarized_turns(built.kb, "c2", tenant="default") == 0
    assert built.kb.catalog.count_chunks() == chunks_before  # the memory is in the store, not the catalog


def test_a_stalled_query_conversation_gets_the_director(served: tuple[World, Any]) -> None:
    built, client = served
    replies = [query(client, QUESTION, "c1") for _ in range(2)]
    assert summary_worker().flush(FLUSH_S)  # the conversation's events are in the store now
    replies += [query(client, QUESTION, "c1") for _ in range(2)]  # asked again and again: stalled
    directors = [reply["metadata"]["features"]["director"] for reply in replies]
    assert [director["ran"] for director in directors] == [False, False, False, True]
    assert all(director["enabled"] for director in directors) and directors[3]["events"] > 0
    prompts = ["\n".join(message.text for message in prompt) for prompt in built.model.prompts("generate")]
    assert prompts and DIRECTOR_HEADING in prompts[-1]
    section = prompts[-1].split(DIRECTOR_HEADING, 1)[1]
    assert "Earlier in this conversation" in section and "Summary of conversation turns 1-2" in section
    assert not any(DIRECTOR_HEADING in prompt for prompt in prompts[:-1])


def test_without_a_conversation_the_director_is_off(served: tuple[World, Any]) -> None:
    _built, client = served
    for _ in range(4):
        reply = query(client, QUESTION)
        assert reply["metadata"]["features"]["director"] == {"enabled": False, "ran": False, "events": 0}
