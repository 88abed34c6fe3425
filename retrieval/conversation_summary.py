"""Conversation memory in the store: every turn of a thread as a detail event, with summaries above them.

Why two levels (seed 5): a question about a past conversation ("what did we decide about X?") matches a
short summary best, while "how exactly..." questions need the turns themselves. The retrieve node already
expands a retrieved summary chunk into the detail chunks of the same document ("deep search",
nodes/retrieve.py), so the layout here is what makes that work:
- one source per thread, `conversation:<thread_id>`: summarizing the thread again replaces all of its chunks
  in one catalog transaction (nothing duplicated, nothing stale), and an unchanged thread is skipped;
- the turns are cut into blocks of `summary_block_turns`; each block is one document (`doc_id`
  `conversation:<thread_id>:<block>`) holding one summary chunk (`level=summary`) and one detail chunk per
  turn (`level=detail`), each indexed as a single unchunked event; the shared doc_id is the parent link;
- every chunk carries `conversation_id` (retrieval scopes to it), `thread_id` and its turn range (custom
  metadata keys `turn_first`, `turn_last`), and `doc_type=event`.
The summary is extractive (the user's questions and the answer sentence that best matches each) unless a
summarizer is given: a strong model writes it, and an unusable reply falls back to the extractive one.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from config.settings import Settings
from core.types import LoadedDocument, MetadataValue, Section
from models.structured import with_max_tokens
from persistence.checkpointer import PruningSqliteSaver, checkpoint_location, checkpointer_for
from persistence.database import postgres_url
from persistence.threads import check_thread_access, stored_thread_id, thread_owner
from persistence.vector_store import validate_collection_name
from prompts.summary import SUMMARY_PROMPT, SUMMARY_SYSTEM
from retrieval.answer_text import best_sentences, is_garbage
from retrieval.ingest import index_documents
from retrieval.knowledge_base import KnowledgeBase
from retrieval.tokens import count_tokens, truncate_to_tokens

logger = logging.getLogger(__name__)

#: Levels of the two-level memory; the values nodes/retrieve.py expands (summary -> details).
SUMMARY_LEVEL = "summary"
DETAIL_LEVEL = "detail"
#: Tokens of one question in the extractive summary (a pasted document must not crowd out the others).
EXTRACT_QUESTION_TOKENS = 40
#: Tokens of the answer sentence taken per turn by the extractive summary.
EXTRACT_ANSWER_TOKENS = 50
#: Words asked of a model summary per summary token (a word is about 1.3 tokens in English).
WORDS_PER_TOKEN = 0.7

SummaryStatus = Literal["indexed", "skipped"]
#: A model-written summary of a block of turns; None (or garbage) means "use the extractive one".
Summarizer = Callable[[list["ConversationTurn"]], str | None]


class ThreadNotFoundError(ValueError):
    """The thread has no stored conversation to summarize (bad input: exit code 2)."""


@dataclass(frozen=True)
class ConversationTurn:
    """One exchange: the user's message and the assistant's reply (empty while unanswered)."""

    number: int
    question: str
    answer: str

    def text(self) -> str:
        """The detail event's text: numbered, so two identical exchanges are still two chunks."""
        reply = f"\nAssistant: {self.answer}" if self.answer else ""
        return f"Turn {self.number}\nUser: {self.question}{reply}"


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


def turns_from_messages(messages: Sequence[BaseMessage]) -> list[ConversationTurn]:
    """Exchanges of a thread's messages: a human message opens a turn, the AI messages after it answer it
    (tool and system messages are not part of the conversation)."""
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        text = message.text.strip()
        if isinstance(message, HumanMessage) and text:
            turns.append((text, []))
        elif isinstance(message, AIMessage) and text and turns:
            turns[-1][1].append(text)
    return [
        ConversationTurn(number, question, "\n".join(answers))
        for number, (question, answers) in enumerate(turns, start=1)
    ]


def _one_line(text: str, tokens: int) -> str:
    cut = truncate_to_tokens(" ".join(text.split()), tokens).rstrip("\ufffd").strip()
    return cut if count_tokens(cut) >= count_tokens(" ".join(text.split())) else f"{cut}..."


def summary_header(turns: Sequence[ConversationTurn]) -> str:
    """The first words of a summary chunk: which turns it covers."""
    return f"Summary of conversation turns {turns[0].number}-{turns[-1].number}:"


def extractive_summary(turns: Sequence[ConversationTurn], max_tokens: int) -> str:
    """The user's questions, each with the answer sentence that best matches it, within `max_tokens`.

    Why extractive: with the embedded 135M model a written summary invents facts; the questions and the
    answers' own sentences are what later questions will search for anyway."""
    parts = [summary_header(turns)]
    for turn in turns:
        part = f"Asked: {_one_line(turn.question, EXTRACT_QUESTION_TOKENS)}"
        sentences = best_sentences(turn.question, turn.answer, 1) if turn.answer else []
        if sentences:
            part += f" Answer: {_one_line(sentences[0], EXTRACT_ANSWER_TOKENS)}"
        parts.append(part)
    return truncate_to_tokens("\n".join(parts), max_tokens).rstrip("\ufffd").strip()


def model_summarizer(model: BaseChatModel, max_tokens: int, transcript_tokens: int = 3000) -> Summarizer:
    """A Summarizer that asks `model` (strong models only); any failure returns None (extractive then)."""

    def summarize(turns: list[ConversationTurn]) -> str | None:
        transcript = truncate_to_tokens("\n\n".join(turn.text() for turn in turns), transcript_tokens)
        prompt = SUMMARY_PROMPT.format(
            first=turns[0].number,
            last=turns[-1].number,
            transcript=transcript,
            max_words=max(10, int(max_tokens * WORDS_PER_TOKEN)),
        )
        bound = with_max_tokens(model, max_tokens)
        try:
            reply = bound.invoke([SystemMessage(SUMMARY_SYSTEM), HumanMessage(prompt)])
        except Exception as error:  # noqa: BLE001 - a failed call falls back to the extractive summary
            logger.warning("summary model failed (%s); using the extractive summary", error)
            return None
        return reply.text.strip()

    return summarize


def conversation_source(thread_id: str) -> str:
    """The catalog source of a thread's memory (one per thread: re-summarizing replaces it)."""
    return f"conversation:{thread_id}"


def block_doc_id(thread_id: str, block: int) -> str:
    """The document (parent) id shared by a block's summary and its detail chunks."""
    return f"conversation:{thread_id}:{block}"


def _blocks(turns: Sequence[ConversationTurn], size: int) -> list[list[ConversationTurn]]:
    return [list(turns[start : start + size]) for start in range(0, len(turns), size)]


def _block_summary(block: list[ConversationTurn], max_tokens: int, summarize: Summarizer | None) -> str:
    written = summarize(block) if summarize is not None else None
    if written is None or is_garbage(written):
        return extractive_summary(block, max_tokens)
    text = f"{summary_header(block)} {' '.join(written.split())}"
    return truncate_to_tokens(text, max_tokens).rstrip("\ufffd").strip()


def _event(
    source: str, doc_id: str, title: str, text: str, metadata: dict[str, MetadataValue]
) -> LoadedDocument:
    return LoadedDocument(
        source=source,
        title=title,
        doc_type="event",
        sections=[Section(text)],
        doc_id=doc_id,
        unchunked=True,
        metadata={**metadata, "doc_type": "event"},
    )


def index_conversation(
    kb: KnowledgeBase,
    turns: Sequence[ConversationTurn],
    *,
    thread_id: str,
    conversation_id: str,
    tenant: str,
    collection: str | None = None,
    summarize: Summarizer | None = None,
) -> SummaryResult:
    """Write a thread's turns (details) and block summaries into the tenant's store, replacing what the
    thread had there; an unchanged thread is skipped without any model call."""
    settings = kb.settings
    collection = validate_collection_name(collection or settings.memory_collection)
    tenant = validate_collection_name(tenant, "tenant")
    if not thread_id.strip():
        raise ValueError("empty thread id")
    if not conversation_id.strip():
        raise ValueError("empty conversation id")
    if not turns:
        raise ThreadNotFoundError(f"thread {thread_id!r} has no conversation turns to summarize")
    source = conversation_source(thread_id)
    method = "model" if summarize is not None else "extractive"
    digest = hashlib.sha256(
        "\x1f".join(
            [
                kb.index_signature(),
                conversation_id,
                method,
                str(settings.summary_block_turns),
                str(settings.summary_max_tokens),
                *(turn.text() for turn in turns),
            ]
        ).encode("utf-8")
    ).hexdigest()
    blocks = _blocks(turns, settings.summary_block_turns)
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
    known = kb.catalog.document(tenant, collection, source)
    if known is not None and known.file_hash == digest:
        return result
    title = f"Conversation {conversation_id}"
    documents: list[LoadedDocument] = []
    for number, block in enumerate(blocks, start=1):
        doc_id = block_doc_id(thread_id, number)
        common: dict[str, MetadataValue] = {"conversation_id": conversation_id, "thread_id": thread_id}
        span = {"turn_first": block[0].number, "turn_last": block[-1].number}
        summary = _block_summary(block, settings.summary_max_tokens, summarize)
        documents.append(_event(source, doc_id, title, summary, {**common, **span, "level": SUMMARY_LEVEL}))
        for turn in block:
            turn_span = {"turn_first": turn.number, "turn_last": turn.number}
            documents.append(
                _event(source, doc_id, title, turn.text(), {**common, **turn_span, "level": DETAIL_LEVEL})
            )
    index_documents(kb, documents, source=source, source_hash=digest, tenant=tenant, collection=collection)
    result.status = "indexed"
    return result


def thread_values(settings: Settings, thread_id: str) -> dict[str, Any]:
    """The latest stored state of a thread (its channel values), read from the settings' checkpointer
    (the SQLite file, or PostgreSQL when RAG_DATABASE_URL names it)."""
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
) -> SummaryResult:
    """Summarize a stored thread into the tenant's store (`rag summarize`): the conversation id defaults to
    the thread id, the tenant to the configured default. Thread ids are scoped per tenant, so another
    tenant's thread is as unknown as one nobody has (ThreadNotFoundError), and the owner check stays as a
    second line (persistence.threads.ThreadAccessError).
    With `model` (a strong one) the summaries are written by it, else they are extractive."""
    settings = kb.settings
    tenant = tenant or settings.default_tenant
    try:
        values = thread_values(settings, stored_thread_id(checkpoint_location(settings), tenant, thread_id))
    except ThreadNotFoundError:  # named by the caller's id: the stored one is the engine's business
        raise ThreadNotFoundError(f"unknown thread {thread_id!r}") from None
    check_thread_access(thread_id, thread_owner(values), tenant)
    turns = turns_from_messages(values.get("messages") or [])
    summarize = model_summarizer(model, settings.summary_max_tokens) if model is not None else None
    return index_conversation(
        kb,
        turns,
        thread_id=thread_id,
        conversation_id=conversation_id or thread_id,
        tenant=tenant,
        collection=collection,
        summarize=summarize,
    )
