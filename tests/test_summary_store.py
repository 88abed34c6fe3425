"""Conversation summaries and director events in the long-term store (persistence/summary_store.py): where
they are written, that tenants and conversations never read each other's, the one-time copy of the
knowledge base's old rows, and deep search / director recall reading the store with the fake embeddings.

Why these tests: the store's namespaces are the only wall between tenants and conversations, so each read
is checked against another tenant's items planted with the very words asked; the copy must keep every id
and text exactly once, whatever is run twice.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langgraph.store.base import BaseStore

from config.settings import Settings
from core.types import LoadedDocument, Section
from persistence.long_term_store import (
    DIRECTOR,
    SUMMARIES,
    all_items,
    close_long_term_stores,
    long_term_store,
    namespace,
)
from persistence.store_search import STORE_PAGE
from persistence.summary_store import director_scope, summary_scope, thread_record
from retrieval.conversation_index import (
    DETAIL_LEVEL,
    MEMORY_COLLECTION,
    SUMMARY_LEVEL,
    conversation_source,
    index_conversation,
    summarized_turns,
)
from retrieval.conversation_summary import ConversationTurn
from retrieval.director import director_search
from retrieval.indexing import index_documents, index_event
from retrieval.knowledge_base import KnowledgeBase
from retrieval.summary_migration import MARKER_KEY, copy_legacy_summaries, summaries_store
from retrieval.summary_search import conversation_summaries

KEY_TURNS = [
    ConversationTurn(1, "Where did the hero hide the silver key?", "Under the third stone of the bridge."),
    ConversationTurn(2, "Who guards the bridge?", "An old ferryman named Odo."),
    ConversationTurn(3, "What does Odo want?", "A song about the sea."),
]
SECRET = "GLOBEX-SECRET"


@pytest.fixture
def kb(settings: Settings, make_kb: object) -> Iterator[KnowledgeBase]:
    built = make_kb(settings)  # type: ignore[operator]
    yield built
    close_long_term_stores()


def items(store: BaseStore, scope: tuple[str, ...]) -> list[object]:
    return all_items(store, scope, page=STORE_PAGE)


# --- writes -----------------------------------------------------------------------------------------------


def test_a_summary_goes_to_the_conversations_namespace_and_not_the_catalog(kb: KnowledgeBase) -> None:
    result = index_conversation(kb, KEY_TURNS, thread_id="t1", conversation_id="c1", tenant="acme")
    assert (result.status, result.summaries, result.details) == ("indexed", 1, 3)
    store = long_term_store(kb.settings).store
    stored = items(store, summary_scope("acme", "c1"))
    levels = sorted(item.value["level"] for item in stored)  # type: ignore[attr-defined]
    assert levels == [DETAIL_LEVEL, DETAIL_LEVEL, DETAIL_LEVEL, SUMMARY_LEVEL]
    assert {item.value["thread_id"] for item in stored} == {"t1"}  # type: ignore[attr-defined]
    assert kb.catalog.document("acme", MEMORY_COLLECTION, conversation_source("t1")) is None
    assert summarized_turns(kb, "t1", tenant="acme") == 3 and summarized_turns(kb, "t1", tenant="globex") == 0
    again = index_conversation(kb, KEY_TURNS, thread_id="t1", conversation_id="c1", tenant="acme")
    assert again.status == "skipped" and len(items(store, summary_scope("acme", "c1"))) == 4


def test_deleting_a_conversation_deletes_its_summaries_only(kb: KnowledgeBase) -> None:
    from retrieval.deletion import delete_content

    index_conversation(kb, KEY_TURNS, thread_id="t1", conversation_id="c1", tenant="acme")
    index_conversation(kb, KEY_TURNS, thread_id="t2", conversation_id="c2", tenant="acme")
    index_conversation(kb, KEY_TURNS, thread_id="t1", conversation_id="c1", tenant="globex")
    store = long_term_store(kb.settings).store
    delete_content(kb, "acme", conversation_id="c1")
    assert items(store, summary_scope("acme", "c1")) == []
    assert len(items(store, summary_scope("acme", "c2"))) == 4
    assert len(items(store, summary_scope("globex", "c1"))) == 4


def test_a_thread_moved_to_another_conversation_leaves_nothing_behind(kb: KnowledgeBase) -> None:
    index_conversation(kb, KEY_TURNS, thread_id="t1", conversation_id="c1", tenant="acme")
    index_conversation(kb, KEY_TURNS[:2], thread_id="t1", conversation_id="c2", tenant="acme")
    store = long_term_store(kb.settings).store
    assert items(store, summary_scope("acme", "c1")) == []
    assert len(items(store, summary_scope("acme", "c2"))) == 3
    record = thread_record(store, "acme", "t1")
    assert record is not None and (record.conversation_id, record.turns) == ("c2", 2)


# --- deep search: the conversation's own summaries, then details --------------------------------------------


def test_deep_search_reads_the_conversations_summaries_and_their_details(kb: KnowledgeBase) -> None:
    index_conversation(kb, KEY_TURNS, thread_id="t1", conversation_id="c1", tenant="acme")
    other = [ConversationTurn(1, f"{SECRET} where did the hero hide the silver key?", f"{SECRET} vault.")]
    index_conversation(kb, other, thread_id="t9", conversation_id="c1", tenant="globex")
    index_conversation(kb, other, thread_id="t2", conversation_id="c2", tenant="acme")
    question = "How exactly did the hero hide the silver key?"
    plain = conversation_summaries(kb, question, tenant="acme", conversation_id="c1", k=2)
    assert [hit.metadata["level"] for hit in plain] == [SUMMARY_LEVEL]
    deep = conversation_summaries(
        kb, question, tenant="acme", conversation_id="c1", k=2, details_per_summary=2
    )
    assert [hit.metadata["level"] for hit in deep] == [SUMMARY_LEVEL, DETAIL_LEVEL, DETAIL_LEVEL]
    assert all(hit.metadata["doc_id"] == "conversation:t1:1" for hit in deep)
    assert "Under the third stone" in " ".join(hit.text for hit in deep)
    assert not any(SECRET in hit.text for hit in deep)  # another tenant's, another conversation's
    assert conversation_summaries(kb, question, tenant="acme", conversation_id="c9", k=2) == []
    assert conversation_summaries(kb, question, tenant="acme", conversation_id="", k=2) == []


# --- the director ------------------------------------------------------------------------------------------


def test_the_director_reads_this_conversation_then_the_tenants_others(kb: KnowledgeBase) -> None:
    index_conversation(kb, KEY_TURNS, thread_id="t1", conversation_id="c1", tenant="acme")
    for n in range(3):
        index_event(
            kb,
            f"In c2 part {n}: the hero hid a silver key in chest {n}.",
            tenant="acme",
            collection="events",
            metadata={"conversation_id": "c2"},
        )
    index_event(kb, "Unfiled: the hero hid the silver key somewhere.", tenant="acme", collection="events")
    for conversation_id in ("c1", "c2"):
        index_event(
            kb,
            f"{SECRET} {conversation_id}: the hero hid the silver key in the vault.",
            tenant="globex",
            collection="events",
            metadata={"conversation_id": conversation_id},
        )
    store = long_term_store(kb.settings).store
    assert len(items(store, director_scope("acme", "c2"))) == 3
    found = director_search(
        kb,
        "Where did the hero hide the silver key?",
        tenant="acme",
        conversation_id="c1",
        conversation_k=10,
        other_k=2,
    )
    assert len(found.conversation) == 4 and {h.metadata["conversation_id"] for h in found.conversation} == {
        "c1"
    }
    assert len(found.others) == 2 and {h.metadata["conversation_id"] for h in found.others} == {"c2"}
    every = found.conversation + found.others
    assert not any(SECRET in hit.text or "Unfiled" in hit.text for hit in every)
    narrowed = director_search(
        kb,
        "silver key",
        tenant="acme",
        conversation_id="c1",
        conversation_k=10,
        other_k=5,
        filters={"turn_first": {"$gte": 2}},  # the caller's filters narrow both searches
    )
    assert sorted(h.metadata["turn_first"] for h in narrowed.conversation) == [2, 3]
    assert narrowed.others == []
    assert (
        director_search(
            kb, "silver key", tenant="acme", conversation_id="", conversation_k=5, other_k=5
        ).conversation
        == []
    )


# --- the one-time copy of the knowledge base's rows -----------------------------------------------------


def plant_legacy(kb: KnowledgeBase) -> dict[str, str]:
    """The catalog's old layout: a summarized thread in the memory collection and a conversation event;
    returns {chunk id: text} as stored."""
    source = conversation_source("t1")
    common = {"conversation_id": "c1", "thread_id": "t1", "doc_type": "event"}
    documents = [
        LoadedDocument(
            source=source,
            title="Conversation c1",
            doc_type="event",
            sections=[Section(text)],
            doc_id="conversation:t1:1",
            unchunked=True,
            metadata={**common, "level": level, "turn_first": 1, "turn_last": last},
        )
        for text, level, last in (
            ("Summary of conversation turns 1-2: the silver key.", SUMMARY_LEVEL, 2),
            ("Turn 1\nUser: Where is the key?\nAssistant: Under the stone.", DETAIL_LEVEL, 1),
            ("Turn 2\nUser: Who guards it?\nAssistant: Odo.", DETAIL_LEVEL, 2),
        )
    ]
    collection = MEMORY_COLLECTION
    index_documents(
        kb, documents, source=source, source_hash="turns=2:abc", tenant="acme", collection=collection
    )
    event = LoadedDocument(
        source="event:0123456789abcdef",
        title="",
        doc_type="event",
        sections=[Section("The gate opened.")],
        doc_id="event:0123456789abcdef",
        unchunked=True,
        metadata={"conversation_id": "c1", "doc_type": "event"},
    )
    index_documents(kb, [event], source=event.source, source_hash="h", tenant="acme", collection="events")
    stored = kb.catalog.source_chunks("acme", collection, source) + kb.catalog.source_chunks(
        "acme", "events", event.source
    )
    return {chunk.chunk_id: chunk.text for chunk in stored}


def test_old_rows_are_copied_once_with_their_ids_and_texts(kb: KnowledgeBase, settings: Settings) -> None:
    planted = plant_legacy(kb)
    assert len(planted) == 4
    store = long_term_store(settings).store
    assert copy_legacy_summaries(kb, store) == 4
    summaries = {item.key: item.value["text"] for item in items(store, summary_scope("acme", "c1"))}  # type: ignore[attr-defined]
    events = {item.key: item.value["text"] for item in items(store, director_scope("acme", "c1"))}  # type: ignore[attr-defined]
    assert {**summaries, **events} == planted and len(summaries) == 3 and len(events) == 1
    record = thread_record(store, "acme", "t1")
    assert record is not None and (record.conversation_id, record.turns) == ("c1", 2)
    # the summaries leave the knowledge base; the event stays a document there
    assert kb.catalog.document("acme", MEMORY_COLLECTION, conversation_source("t1")) is None
    assert kb.catalog.document("acme", "events", "event:0123456789abcdef") is not None
    assert copy_legacy_summaries(kb, store) == 0  # the marker: a second run writes nothing
    assert len(items(store, summary_scope("acme", "c1"))) == 3
    assert summarized_turns(kb, "t1", tenant="acme") == 2


def test_a_copy_cut_short_is_resumed_without_duplicates(kb: KnowledgeBase, settings: Settings) -> None:
    planted = plant_legacy(kb)
    store = long_term_store(settings).store
    copy_legacy_summaries(kb, store)
    store.delete(("rag_migrations",), MARKER_KEY)  # as if the process died before the marker
    event_key = next(iter(items(store, director_scope("acme", "c1")))).key  # type: ignore[attr-defined]
    store.delete(director_scope("acme", "c1"), event_key)
    assert copy_legacy_summaries(kb, store) == 1  # only what was missing
    every = items(store, namespace(SUMMARIES, "acme")) + items(store, namespace(DIRECTOR, "acme"))
    keys = [item.key for item in every if item.value.get("doc_type") == "event"]  # type: ignore[attr-defined]
    assert sorted(keys) == sorted(planted)


def test_the_store_opener_copies_before_the_first_read(kb: KnowledgeBase, settings: Settings) -> None:
    plant_legacy(kb)
    hits = conversation_summaries(
        kb, "Where is the key?", tenant="acme", conversation_id="c1", k=1, details_per_summary=1
    )
    assert [hit.metadata["level"] for hit in hits] == [SUMMARY_LEVEL, DETAIL_LEVEL]
    assert summaries_store(kb).store.get(("rag_migrations",), MARKER_KEY) is not None
    assert conversation_summaries(kb, "Where is the key?", tenant="globex", conversation_id="c1", k=1) == []
