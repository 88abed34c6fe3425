"""Conversation scoping of retrieval: strict by default, a cross-conversation share only when asked for.

Why: the conversational memory keeps one conversation's memories out of another's answers. The
share of results taken from other conversations is an explicit option (Context.cross_conversation_share),
0 by default, so a conversation id alone must never surface another conversation's documents.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodes.resources import Resources, use_resources
from nodes.retrieve import outside_conversation_k, retrieve, scoped_search
from retrieval.indexing import index_event
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from state.context import Context
from state.graph_state import RetrieveTask
from state.schemas import SearchQuery
from tests.conftest import runtime

#: Every event mentions the comet, so without scoping every conversation's events would match.
EVENTS = {
    "c1": ["The comet Halley was discussed on Monday.", "The comet tail points away from the Sun."],
    "c2": ["The comet Encke returns every three years.", "A comet is made of ice and dust."],
    "": ["A comet glossary entry with no conversation."],
}
QUESTION = "What did we say about the comet?"


@pytest.fixture
def comet_kb(kb: KnowledgeBase) -> KnowledgeBase:
    """Events of two conversations and one without a conversation, in one tenant."""
    for conversation, texts in EVENTS.items():
        for text in texts:
            index_event(
                kb, text, tenant="default", collection="default", metadata={"conversation_id": conversation}
            )
    return kb


def search(kb: KnowledgeBase, context: Context, conversation_id: str) -> list[Any]:
    return scoped_search(
        Searcher(kb),
        QUESTION,
        QUESTION,
        context=context,
        tenant="default",
        filters=None,
        conversation_id=conversation_id,
    )


def test_the_default_share_is_zero() -> None:
    assert Context().cross_conversation_share == 0.0


def test_a_conversation_id_alone_returns_only_that_conversations_documents(comet_kb: KnowledgeBase) -> None:
    hits = search(comet_kb, Context(top_k=5), "c1")
    assert sorted(hit.text for hit in hits) == sorted(EVENTS["c1"])
    assert {hit.metadata["conversation_id"] for hit in hits} == {"c1"}


def test_without_a_conversation_id_every_document_of_the_tenant_can_match(comet_kb: KnowledgeBase) -> None:
    hits = search(comet_kb, Context(top_k=5), "")
    assert {hit.metadata["conversation_id"] for hit in hits} == {"c1", "c2", ""}


def test_a_positive_share_adds_a_minority_from_other_conversations(comet_kb: KnowledgeBase) -> None:
    hits = search(comet_kb, Context(top_k=5, cross_conversation_share=0.2), "c1")
    inside = [hit for hit in hits if hit.metadata["conversation_id"] == "c1"]
    outside = [hit for hit in hits if hit.metadata["conversation_id"] != "c1"]
    assert sorted(hit.text for hit in inside) == sorted(EVENTS["c1"])
    assert len(outside) == 1  # ceil(5 * 0.2)


def test_an_unknown_conversation_finds_nothing(comet_kb: KnowledgeBase) -> None:
    assert search(comet_kb, Context(top_k=5), "c9") == []


@pytest.mark.parametrize(
    ("top_k", "share", "expected"),
    [(5, 0.0, 0), (5, 0.2, 1), (5, 0.01, 1), (10, 0.25, 3), (5, 1.0, 4), (1, 0.5, 0)],
)
def test_outside_share_rounds_up_and_never_takes_all_of_k(top_k: int, share: float, expected: int) -> None:
    assert outside_conversation_k(top_k, share) == expected


def test_the_retrieve_node_applies_the_strict_default(comet_kb: KnowledgeBase) -> None:
    task = RetrieveTask(
        query=SearchQuery(text=QUESTION, dense_text=QUESTION, purpose="original"),
        tenant="default",
        filters={},
        conversation_id="c2",
        wants_details=False,
    )
    with use_resources(Resources(comet_kb.settings, knowledge_base=comet_kb)):
        update = retrieve(task, runtime(top_k=5))
    assert sorted(doc["text"] for doc in update["documents"]) == sorted(EVENTS["c2"])
    assert {doc["metadata"]["conversation_id"] for doc in update["documents"]} == {"c2"}
