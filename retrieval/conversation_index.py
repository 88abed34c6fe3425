"""Conversation memory in the long-term store: every turn of a thread as a detail event, with summaries above.

Two levels because "what did we decide about X?" matches a short summary best while "how exactly..." needs
the turns ("deep search", retrieval.summary_search). Items live in the LangGraph BaseStore (namespace
("summaries", tenant, conversation), persistence.summary_store), so Studio and the store API see them: per
block of SUMMARY_BLOCK_TURNS turns one `level=summary` item and one `level=detail` item per turn, sharing the
block's `doc_id`. Summarizing again replaces a thread's items; an unchanged thread (its record's digest) is
skipped, and a model-written summary of an unchanged block is reused (its `block_hash`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.language_models import BaseChatModel

from config.settings import Settings
from persistence.checkpointer import PruningSqliteSaver, checkpoint_location, checkpointer_for
from persistence.threads import check_thread_access, stored_thread_id, thread_owner
from persistence.urls import postgres_url
from persistence.vector_store import validate_collection_name
from retrieval.conversation_summary import (
    SUMMARY_MAX_TOKENS,
    ConversationTurn,
    Summarizer,
    block_summary,
    conversation_metadata,
    model_summarizer,
    turns_from_messages,
)

if TYPE_CHECKING:  # the stores' libraries are imported when a summary is written
    from langgraph.store.base import BaseStore

    from persistence.summary_store import ThreadRecord
    from retrieval.knowledge_base import KnowledgeBase

#: Levels of the two-level memory (named here too: the store's module is imported on first use).
SUMMARY_LEVEL = "summary"
DETAIL_LEVEL = "detail"
#: The item field the store embeds (persistence.long_term_store.TEXT_FIELD).
TEXT_FIELD = "text"
#: Start of a memory's digest `turns=<n>:<sha256>` (the catalog's form: a copied thread stays unchanged).
TURNS_HASH_PREFIX = "turns="
#: Collection that conversation summaries and turns go to, apart from the documents' collections.
MEMORY_COLLECTION = "conversations"
#: Turns summarized together: one summary chunk per block of turns (a block is what deep search expands).
SUMMARY_BLOCK_TURNS = 8

SummaryStatus = Literal["indexed", "skipped"]


class ThreadNotFoundError(ValueError):
    """The thread has no stored conversation to summarize (bad input: exit code 2)."""


@dataclass
class SummaryResult:
    """What `index_conversation` wrote (or found unchanged)."""

    thread_id: str
    conversation_id: str
    tenant: str
    collection: str
    source: str
    turns: int
    summaries: int
    details: int
    status: SummaryStatus
    summarizer: Literal["model", "extractive", "none"]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the CLI's `--json`)."""
        return asdict(self)


def conversation_source(thread_id: str) -> str:
    """The `source` a thread's memory items carry (one per thread: re-summarizing replaces its items)."""
    return f"conversation:{thread_id}"


def block_doc_id(thread_id: str, block: int) -> str:
    """The document (parent) id shared by a block's summary and its detail chunks."""
    return f"conversation:{thread_id}:{block}"


def _blocks(turns: Sequence[ConversationTurn], size: int) -> list[list[ConversationTurn]]:
    return [list(turns[start : start + size]) for start in range(0, len(turns), size)]


def _block_hash(block: Sequence[ConversationTurn], method: str, max_tokens: int) -> str:
    """What a block's summary depends on: its turns, the summarizer kind and the summary's size."""
    parts = [method, str(max_tokens), *(turn.text() for turn in block)]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def _reusable_summaries(store: BaseStore, tenant: str, record: ThreadRecord | None) -> dict[str, str]:
    """Summary texts already stored for the thread, by block hash."""
    from persistence.summary_store import thread_items

    if record is None:
        return {}
    return {
        str(item.value["block_hash"]): str(item.value.get(TEXT_FIELD, ""))
        for item in thread_items(store, tenant, record.conversation_id, record.thread_id)
        if item.value.get("level") == SUMMARY_LEVEL and item.value.get("block_hash")
    }


def summarized_turns(kb: KnowledgeBase, thread_id: str, *, tenant: str) -> int:
    """How many turns of the thread its stored memory covers (0 when it has none): one record lookup."""
    from persistence.summary_store import thread_record
    from retrieval.summary_migration import summaries_store

    record = thread_record(summaries_store(kb).store, tenant, thread_id)
    return record.turns if record is not None else 0


def index_conversation(
    kb: KnowledgeBase,
    turns: Sequence[ConversationTurn],
    *,
    thread_id: str,
    conversation_id: str,
    tenant: str,
    collection: str | None = None,
    summarize: Summarizer | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> SummaryResult:
    """Write a thread's turns and block summaries into the tenant's namespace of the long-term store,
    replacing what the thread had there; an unchanged thread is skipped without any model call.
    `metadata`: the conversation's ids (CONVERSATION_METADATA_KEYS), kept on every item."""
    from persistence.summary_store import ThreadRecord, replace_thread, thread_record
    from retrieval.summary_migration import summaries_store

    ids = conversation_metadata(metadata)
    collection = validate_collection_name(collection or MEMORY_COLLECTION)
    tenant = validate_collection_name(tenant, "tenant")
    _check_thread(thread_id, conversation_id, turns)
    source = conversation_source(thread_id)
    method: Literal["model", "extractive"] = "model" if summarize is not None else "extractive"
    digest = _turns_digest(kb, turns, conversation_id=conversation_id, method=method, ids=ids)
    blocks = _blocks(turns, SUMMARY_BLOCK_TURNS)
    result = SummaryResult(
        thread_id=thread_id,
        conversation_id=conversation_id,
        tenant=tenant,
        collection=collection,
        source=source,
        turns=len(turns),
        summaries=len(blocks),
        details=len(turns),
        status="skipped",
        summarizer=method,
    )
    found = summaries_store(kb)
    known = thread_record(found.store, tenant, thread_id)
    if known is not None and known.digest == digest and known.conversation_id == conversation_id:
        return result
    reusable = _reusable_summaries(found.store, tenant, known) if summarize is not None else {}
    entries = _entries(blocks, ids, result, method=method, summarize=summarize, reusable=reusable)
    embeddings = kb.embeddings.for_tenant(tenant)
    record = ThreadRecord(thread_id, conversation_id, len(turns), digest)
    replace_thread(found, tenant, record, entries, embeddings, embeddings.model_key)
    result.status = "indexed"
    return result


def _check_thread(thread_id: str, conversation_id: str, turns: Sequence[ConversationTurn]) -> None:
    """Refuse an empty thread or conversation id (ValueError) and a thread without turns."""
    if not thread_id.strip():
        raise ValueError("empty thread id")
    if not conversation_id.strip():
        raise ValueError("empty conversation id")
    if not turns:
        raise ThreadNotFoundError(f"thread {thread_id!r} has no conversation turns to summarize")


def _turns_digest(
    kb: KnowledgeBase,
    turns: Sequence[ConversationTurn],
    *,
    conversation_id: str,
    method: str,
    ids: Mapping[str, Any],
) -> str:
    """The fingerprint of what a thread's memory is made of: equal means the stored memory is current."""
    content = hashlib.sha256(
        "\x1f".join(
            [
                kb.index_signature(),
                conversation_id,
                method,
                str(SUMMARY_BLOCK_TURNS),
                str(SUMMARY_MAX_TOKENS),
                *(f"{key}={value!r}" for key, value in sorted(ids.items())),
                *(turn.text() for turn in turns),
            ]
        ).encode("utf-8")
    ).hexdigest()
    return f"{TURNS_HASH_PREFIX}{len(turns)}:{content}"


def _entries(
    blocks: list[list[ConversationTurn]],
    ids: Mapping[str, Any],
    result: SummaryResult,
    *,
    method: str,
    summarize: Summarizer | None,
    reusable: Mapping[str, str],
) -> list[tuple[str, dict[str, Any]]]:
    """The store's items of a thread, block by block: the block's summary, then one detail item per turn."""
    from persistence.summary_store import EVENT_DOC_TYPE

    base = {
        **ids,
        "conversation_id": result.conversation_id,
        "thread_id": result.thread_id,
        "tenant": result.tenant,
        "collection": result.collection,
        "source": result.source,
    }
    title = f"Conversation {result.conversation_id}"
    entries: list[tuple[str, dict[str, Any]]] = []
    for number, block in enumerate(blocks, start=1):
        doc_id = block_doc_id(result.thread_id, number)
        common: dict[str, Any] = {**base, "doc_id": doc_id, "title": title, "doc_type": EVENT_DOC_TYPE}
        block_hash = _block_hash(block, method, SUMMARY_MAX_TOKENS)
        summary = reusable.get(block_hash) or block_summary(block, SUMMARY_MAX_TOKENS, summarize)
        span = {"turn_first": block[0].number, "turn_last": block[-1].number}
        summary_value = {
            **common,
            **span,
            TEXT_FIELD: summary,
            "level": SUMMARY_LEVEL,
            "block_hash": block_hash,
        }
        entries.append((f"{doc_id}:{SUMMARY_LEVEL}", summary_value))
        for turn in block:
            turn_span = {"turn_first": turn.number, "turn_last": turn.number}
            detail = {**common, **turn_span, TEXT_FIELD: turn.text(), "level": DETAIL_LEVEL}
            entries.append((f"{doc_id}:{DETAIL_LEVEL}:{turn.number}", detail))
    return entries


def thread_values(settings: Settings, thread_id: str) -> dict[str, Any]:
    """The latest stored state of a thread (its channel values), read from the settings' checkpointer."""
    if postgres_url(settings) is None and not settings.checkpoint_path.exists():
        raise ThreadNotFoundError(f"unknown thread {thread_id!r} (no conversation stored yet)")
    saver = checkpointer_for(settings)
    try:
        stored = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    finally:
        if isinstance(saver, PruningSqliteSaver):  # Postgres savers share the process's pool
            saver.conn.close()
    if stored is None:
        raise ThreadNotFoundError(f"unknown thread {thread_id!r}")
    return dict(stored.checkpoint.get("channel_values") or {})


def summarize_thread(
    kb: KnowledgeBase,
    thread_id: str,
    *,
    conversation_id: str | None = None,
    tenant: str | None = None,
    collection: str | None = None,
    model: BaseChatModel | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> SummaryResult:
    """Summarize a stored thread into the tenant's store (`rag summarize`, the route, the idle sweep); the
    conversation id and ids default to the thread's own. Another tenant's thread is as unknown as one nobody
    has. With `model` the summaries are written by it, else they are extractive."""
    settings = kb.settings
    tenant = tenant or settings.default_tenant
    try:
        values = thread_values(settings, stored_thread_id(checkpoint_location(settings), tenant, thread_id))
    except ThreadNotFoundError:  # named by the caller's id: the stored one is the engine's business
        raise ThreadNotFoundError(f"unknown thread {thread_id!r}") from None
    check_thread_access(thread_id, thread_owner(values), tenant)
    turns = turns_from_messages(values.get("messages") or [])
    summarize = model_summarizer(model, SUMMARY_MAX_TOKENS) if model is not None else None
    ids = {**conversation_metadata(values.get("conversation_metadata")), **conversation_metadata(metadata)}
    return index_conversation(
        kb,
        turns,
        thread_id=thread_id,
        conversation_id=conversation_id or str(values.get("conversation_id") or "") or thread_id,
        tenant=tenant,
        collection=collection,
        summarize=summarize,
        metadata=ids,
    )
