"""Conversation memory in the long-term store: every turn of a thread as a detail event, with summaries above.

Why two levels (seed 5): a question about a past conversation ("what did we decide about X?") matches a
short summary best, while "how exactly..." questions need the turns themselves. The retrieve node recalls a
conversation's summaries nearest the question and, when the question asks for details, the detail events of
the same block ("deep search", retrieval.summary_search); the director recalls both (retrieval.director).
Where they live (persistence.summary_store): the LangGraph BaseStore, namespace ("summaries", tenant,
conversation), so `langgraph dev`, Studio and a LangGraph server's store API see them:
- the turns are cut into blocks of `summary_block_turns`; each block holds one summary item
  (`level=summary`) and one detail item per turn (`level=detail`), sharing the block's `doc_id`
  (`conversation:<thread_id>:<block>`, the parent link);
- every item carries `conversation_id`, `thread_id`, its turn range (`turn_first`, `turn_last`),
  `doc_type=event`, and the conversation's ids when it was given them (CONVERSATION_METADATA_KEYS:
  `character_id`, `background_id`, `related_plot_id`);
- summarizing the thread again replaces all of its items (nothing duplicated, nothing stale), and an
  unchanged thread is skipped: the thread's record holds the digest it was written from and how many turns
  it covers, read back in one lookup (`summarized_turns`) by the automatic summaries (retrieval.auto_summary).
The summary is extractive (the user's questions and the answer sentence that best matches each) unless a
summarizer is given: a strong model writes it, and an unusable reply falls back to the extractive one. A
model-written summary of a block whose turns did not change is reused (its `block_hash`), so summarizing a
grown thread asks the model about its new block only.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from config.settings import Settings
from core.metadata import int_problem
from core.types import MetadataValue
from models.structured import with_max_tokens
from persistence.checkpointer import PruningSqliteSaver, checkpoint_location, checkpointer_for
from persistence.threads import check_thread_access, stored_thread_id, thread_owner
from persistence.urls import postgres_url
from persistence.vector_store import validate_collection_name
from prompts.summary import SUMMARY_PROMPT, SUMMARY_SYSTEM
from retrieval.answer_text import best_sentences, is_garbage
from retrieval.tokens import count_tokens, truncate_to_tokens

if TYPE_CHECKING:
    # The knowledge base and the long-term store bring the stores' libraries (sqlalchemy, numpy);
    # start_turn imports this module with the graph, so they are imported when a summary is written.
    from langgraph.store.base import BaseStore

    from persistence.long_term_store import LongTermStore
    from persistence.summary_store import ThreadRecord
    from retrieval.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

#: Levels of the two-level memory (persistence.summary_store's values; deep search expands summary ->
#: details). Named here too: this module is imported with the graph, the store's module on first use.
SUMMARY_LEVEL = "summary"
DETAIL_LEVEL = "detail"
#: The item field the store embeds (persistence.long_term_store.TEXT_FIELD).
TEXT_FIELD = "text"
#: Tokens of one question in the extractive summary (a pasted document must not crowd out the others).
EXTRACT_QUESTION_TOKENS = 40
#: Tokens of the answer sentence taken per turn by the extractive summary.
EXTRACT_ANSWER_TOKENS = 50
#: Words asked of a model summary per summary token (a word is about 1.3 tokens in English).
WORDS_PER_TOKEN = 0.7
#: Ids a conversation (or a turn) may be given that its memory chunks keep: seed 5's character and
#: background scoping, and the plot a conversation belongs to.
CONVERSATION_METADATA_KEYS = ("character_id", "background_id", "related_plot_id")
#: Longest id value kept (an id, not a text).
MAX_METADATA_VALUE_CHARS = 128
#: Start of the digest of a conversation's memory: `turns=<n>:<sha256>` (the form the catalog kept, so a
#: thread copied from it is still seen unchanged).
TURNS_HASH_PREFIX = "turns="

SummaryStatus = Literal["indexed", "skipped"]
#: A model-written summary of a block of turns; None (or garbage) means "use the extractive one".
Summarizer = Callable[[list["ConversationTurn"]], str | None]


class ThreadNotFoundError(ValueError):
    """The thread has no stored conversation to summarize (bad input: exit code 2)."""


class InvalidConversationMetadataError(ValueError):
    """A conversation id (character_id, background_id, related_plot_id) that cannot be kept."""


def conversation_metadata(values: Mapping[str, Any] | None) -> dict[str, MetadataValue]:
    """The ids of CONVERSATION_METADATA_KEYS in `values`, checked: a string (printable, at most
    MAX_METADATA_VALUE_CHARS characters) or an integer; None and '' mean "not given" and are left out. Any
    other key, or value, raises InvalidConversationMetadataError naming it (a typo must not vanish
    silently)."""
    kept: dict[str, MetadataValue] = {}
    for key, value in (values or {}).items():
        if key not in CONVERSATION_METADATA_KEYS:
            raise InvalidConversationMetadataError(
                f"conversation metadata key {key!r} is not one of {', '.join(CONVERSATION_METADATA_KEYS)}"
            )
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise InvalidConversationMetadataError(f"{key}: an id is a string or an integer, not {value!r}")
        if isinstance(value, str) and (len(value) > MAX_METADATA_VALUE_CHARS or not value.isprintable()):
            raise InvalidConversationMetadataError(
                f"{key}: at most {MAX_METADATA_VALUE_CHARS} printable characters"
            )
        if isinstance(value, int) and (problem := int_problem(value)) is not None:
            raise InvalidConversationMetadataError(f"{key}: {problem}")
        kept[key] = value
    return kept


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


def _block_summary(block: list[ConversationTurn], max_tokens: int, summarize: Summarizer | None) -> str:
    written = summarize(block) if summarize is not None else None
    if written is None or is_garbage(written):
        return extractive_summary(block, max_tokens)
    text = f"{summary_header(block)} {' '.join(written.split())}"
    return truncate_to_tokens(text, max_tokens).rstrip("\ufffd").strip()


def _reusable_summaries(store: BaseStore, tenant: str, record: ThreadRecord | None) -> dict[str, str]:
    """Summary texts already stored for the thread, by block hash (a model-written one is kept for a block
    whose turns did not change)."""
    from persistence.summary_store import thread_items

    if record is None:
        return {}
    return {
        str(item.value["block_hash"]): str(item.value.get(TEXT_FIELD, ""))
        for item in thread_items(store, tenant, record.conversation_id, record.thread_id)
        if item.value.get("level") == SUMMARY_LEVEL and item.value.get("block_hash")
    }


def summarized_turns(
    kb: KnowledgeBase,
    thread_id: str,
    *,
    tenant: str,
    collection: str | None = None,
    store: BaseStore | LongTermStore | None = None,
) -> int:
    """How many turns of the thread its stored memory covers (0 when it has none): one store lookup, no
    item read. `collection` is accepted for callers of the catalog's layout and ignored."""
    from persistence.summary_store import thread_record
    from retrieval.summary_migration import summaries_store

    found = summaries_store(kb, store)
    record = thread_record(found.store, tenant, thread_id)
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
    store: BaseStore | LongTermStore | None = None,
) -> SummaryResult:
    """Write a thread's turns (details) and block summaries into the tenant's namespace of the long-term
    store (`store`, else the process's), replacing what the thread had there; an unchanged thread is
    skipped without any model call. `metadata`: the conversation's ids (CONVERSATION_METADATA_KEYS), kept on
    every item. `collection` names the memory in the items (`collection`), as the catalog's layout did."""
    from persistence.summary_store import EVENT_DOC_TYPE, ThreadRecord, replace_thread, thread_record
    from retrieval.summary_migration import summaries_store

    settings = kb.settings
    ids = conversation_metadata(metadata)
    collection = validate_collection_name(collection or settings.memory_collection)
    tenant = validate_collection_name(tenant, "tenant")
    if not thread_id.strip():
        raise ValueError("empty thread id")
    if not conversation_id.strip():
        raise ValueError("empty conversation id")
    if not turns:
        raise ThreadNotFoundError(f"thread {thread_id!r} has no conversation turns to summarize")
    source = conversation_source(thread_id)
    method: Literal["model", "extractive"] = "model" if summarize is not None else "extractive"
    content = hashlib.sha256(
        "\x1f".join(
            [
                kb.index_signature(),
                conversation_id,
                method,
                str(settings.summary_block_turns),
                str(settings.summary_max_tokens),
                *(f"{key}={value!r}" for key, value in sorted(ids.items())),
                *(turn.text() for turn in turns),
            ]
        ).encode("utf-8")
    ).hexdigest()
    digest = f"{TURNS_HASH_PREFIX}{len(turns)}:{content}"
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
    found = summaries_store(kb, store)
    known = thread_record(found.store, tenant, thread_id)
    if known is not None and known.digest == digest and known.conversation_id == conversation_id:
        return result
    title = f"Conversation {conversation_id}"
    reusable = _reusable_summaries(found.store, tenant, known) if summarize is not None else {}
    entries: list[tuple[str, dict[str, Any]]] = []
    for number, block in enumerate(blocks, start=1):
        doc_id = block_doc_id(thread_id, number)
        common: dict[str, Any] = {
            **ids,
            "conversation_id": conversation_id,
            "thread_id": thread_id,
            "tenant": tenant,
            "collection": collection,
            "source": source,
            "doc_id": doc_id,
            "title": title,
            "doc_type": EVENT_DOC_TYPE,
        }
        block_hash = _block_hash(block, method, settings.summary_max_tokens)
        summary = reusable.get(block_hash) or _block_summary(block, settings.summary_max_tokens, summarize)
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
    embeddings = kb.embeddings.for_tenant(tenant)
    record = ThreadRecord(thread_id, conversation_id, len(turns), digest)
    replace_thread(found, tenant, record, entries, embeddings, embeddings.model_key)
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
    metadata: Mapping[str, Any] | None = None,
) -> SummaryResult:
    """Summarize a stored thread into the tenant's store (`rag summarize`, the summarize route, the idle
    sweep): the conversation id defaults to the one the thread's turns were given, else the thread id; the
    tenant to the configured default; the ids (`metadata`) to those the thread's turns were given
    (`conversation_metadata`), a given one replacing the thread's. Thread ids are scoped per tenant, so
    another tenant's thread is as unknown as one nobody has (ThreadNotFoundError), and the owner check stays
    as a second line (persistence.threads.ThreadAccessError).
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
