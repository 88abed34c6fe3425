"""Fit an answer prompt into the model's window: fixed part, memories, numbered sources, history, generation
reserve.

The prompt's sections, in seed 000's order: system, memories, history, sources, question (the memories are
appended to the system message, the sources and the question make the last human message). The rules (seed
systems 1 and 2, plus seed 000's memories), in order of priority:
1. The fixed part (system prompt + the question with its framing) is always kept.
1b. Recalled memories (nodes.memory_recall) get at most memory_share * (window - reserve - fixed) tokens,
   before anything else, in the given order (best first); a memory that does not fit is cut when at least
   MIN_USEFUL_MEMORY_TOKENS of it fit, else skipped. They are numbered after the sources ([n + 1]...), so
   one marker syntax cites both; what the memories take is no longer available below.
1c. The director's events (nodes.director_recall, only when the conversation stalled) get at most
   director_share * (window - reserve - fixed - memories) tokens, this conversation's first, unnumbered
   (background, not sources: retrieval.director_section), appended after the memories; what they take is
   no longer available below.
2. Retrieved context gets at most min(context_budget, context_share * (window - reserve - fixed - memories))
   tokens.
   Documents are added in the given order; the FIRST document is truncated, never dropped, when it alone
   exceeds the limit (a cut best passage beats no passage); a later document that does not fit is truncated
   when at least MIN_USEFUL_DOCUMENT_TOKENS of it fit, else dropped (a later, shorter one may still fit).
   A truncated passage ends with TRUNCATION_MARKER (counted in the budget), so the model knows the text
   goes on and does not take the cut for the passage's end. Near-duplicate passages of different files
   (token-set Jaccard >= `duplicate_similarity`, retrieval.near_duplicates) go in once, as the better
   scored of them, before anything is numbered: every label still names the passage it shows.
3. History gets everything that remains after the context (seed 1: the context is budgeted first, the
   history fills the rest), newest turn first, whole turns only; so a question with little evidence keeps
   more of the conversation, and a long conversation never squeezes the evidence. Token counts of the
   parts are not exactly additive (tokens can merge where texts join), so if the assembled prompt is over
   window - reserve by a few tokens, the oldest kept turns are dropped before anything else.
4. If the total still exceeds window - reserve (the question alone is too long), the prompt falls back to
   the system prompt and the question alone, `fallback=True`, and a WARNING is logged (the answer is written
   without its sources, memories and history).
All counts use retrieval.tokens (cl100k_base), plus MESSAGE_OVERHEAD_TOKENS per chat message.

A source's header names its file, page (when known), section (the chunk's heading, else its chapter) and
retrieval score: `[2] (File: setup.md, Page: 3, Section: Install, Score: 0.82)`, so the model can tell the
passages apart and weigh them; header fields are document data, so they are cleaned of brackets and line
breaks (a header must stay one line that strip_source_headers can recognise) and cut to HEADER_FIELD_CHARS.

`prompt_info` says what went in: the counts above, `history_kept` of `history_total` turns, and `sections`,
one {name, tokens, text} per section in prompt order (text cut to `section_chars` characters, since
prompt_info is checkpointed every turn); the sections' tokens plus `overhead_tokens` make `total_tokens`,
give or take a token where texts join.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, trim_messages

from prompts.answer import ANSWER_USER_TEMPLATE_EN, MEMORY_SECTION_EN
from prompts.director import DIRECTOR_EN, DirectorTexts
from retrieval.director_section import pack_director
from retrieval.injection import neutralize
from retrieval.near_duplicates import drop_near_duplicates
from retrieval.tokens import count_tokens, truncate_to_tokens
from state.schemas import RetrievedDoc

logger = logging.getLogger(__name__)

#: Tokens a chat template adds around each message (role markers, separators), as OpenAI counts them.
MESSAGE_OVERHEAD_TOKENS = 4
#: A later document is truncated into the remaining room only when at least this many of its text tokens fit.
MIN_USEFUL_DOCUMENT_TOKENS = 64
#: A later memory is cut into the remaining room only when at least this many of its tokens fit.
MIN_USEFUL_MEMORY_TOKENS = 16
#: Section names of `prompt_info["sections"]`, in prompt order (seed 000's budget order).
SECTION_NAMES = ("system", "memories", "director", "history", "sources", "question")
#: Between two source blocks.
SOURCE_SEPARATOR = "\n\n"
#: Truncation may land mid-character; re-encoding can then exceed the cut by a token or two. Retries of the
#: cut, each shorter by the overshoot, before giving up on a document.
MAX_TRUNCATION_RETRIES = 8
#: What ends a passage cut to fit the budget (after its last kept token), counted in the budget.
TRUNCATION_MARKER = " […truncated]"
#: Characters of a section name in a source header (longer ones are cut with an ellipsis).
HEADER_FIELD_CHARS = 80
#: A source header line copied into an answer by a weak model ("[1] (File: a.md, Page: 2)").
#: The label goes with it only at the start of a line (elsewhere "[1]" may be a real citation).
_HEADER_ECHO = re.compile(r"(?m)^[ \t]*\[\d+\][ \t]*\(File: [^)\n]*\)[ \t]*|[ \t]*\(File: [^)\n]*\)[ \t]*")
#: The truncation marker copied into an answer.
_MARKER_ECHO = re.compile(r"[ \t]*\[…truncated\]")
#: What a header field may not hold: brackets would end the header early, line breaks would split it.
_HEADER_UNSAFE = re.compile(r"[()\[\]\s]+")
_SPACE_RUN = re.compile(r"[ \t]{2,}")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+(?=\n|[.,;:!?。，；：！？])")
_HUMAN_ROLES = frozenset({"human", "user"})
_AI_ROLES = frozenset({"ai", "assistant"})


@dataclass(frozen=True)
class BudgetedPrompt:
    """A prompt that fits the window, what went into it, and the accounting (`prompt_info`)."""

    messages: list[BaseMessage]
    """System message, history turns (oldest first), then the human message with sources and question."""
    used_documents: list[RetrievedDoc]
    """The documents in the prompt, in label order: source [n] is used_documents[n - 1]."""
    prompt_info: dict[str, Any]
    used_memories: list[RetrievedDoc] = field(default_factory=list)
    """The memories in the prompt, numbered after the documents: [len(used_documents) + i] is
    used_memories[i - 1]."""


def header_field(value: object, limit: int = HEADER_FIELD_CHARS) -> str:
    """A metadata value fit for a header: brackets and whitespace runs become one space, cut to `limit`
    characters with an ellipsis ("" for a missing value)."""
    return clipped(_HEADER_UNSAFE.sub(" ", str(value or "")).strip(), limit)


def format_score(score: float) -> str:
    """A retrieval score in three significant digits (0.82, 0.0164 for a fused rank score)."""
    return f"{score:.3g}"


def source_header(label: int, doc: RetrievedDoc) -> str:
    """`[n] (File: name, Page: p, Section: s, Score: x)`: the page only when it is known (> 0), the section
    (heading, else chapter) only when the chunk has one, the score always (the search's, as ranked)."""
    name = PurePath(doc.get("source") or "").name or doc.get("title") or "unknown"
    fields = [f"File: {header_field(name)}"]
    page = doc.get("page") or 0
    if page > 0:
        fields.append(f"Page: {page}")
    metadata = doc.get("metadata") or {}
    section = header_field(metadata.get("section") or metadata.get("chapter"))
    if section:
        fields.append(f"Section: {section}")
    fields.append(f"Score: {format_score(float(doc.get('score') or 0.0))}")
    return f"[{label}] ({', '.join(fields)})"


def strip_source_headers(text: str) -> str:
    """`text` without copies of source header lines or truncation markers (weak models echo them into their
    answers)."""
    cleaned = _MARKER_ECHO.sub("", _HEADER_ECHO.sub(" ", text))
    return _SPACE_BEFORE_PUNCT.sub("", _SPACE_RUN.sub(" ", cleaned)).strip()


def format_source(label: int, doc: RetrievedDoc, text: str | None = None) -> str:
    """The block of one source: its header line, then its text (or the given truncated text), neutralised:
    a passage is untrusted data inside the prompt's fence, so look-alikes of the fence, chat role markers and
    source headers in it are defanged (retrieval.injection.neutralize) before it is counted and packed."""
    return f"{source_header(label, doc)}\n{neutralize(doc['text'] if text is None else text)}"


def format_memory(label: int, doc: RetrievedDoc, text: str | None = None) -> str:
    """The line of one recalled memory: `[n] (memory 12, preference) text`, neutralised like a source (a
    memory is data the caller wrote, not an instruction to the model)."""
    kind = doc["metadata"].get("memory_kind") or "note"
    body = neutralize(doc["text"] if text is None else text)
    return f"[{label}] ({doc.get('title') or 'memory'}, {kind}) {body}"


Formatter = Callable[[int, RetrievedDoc, "str | None"], str]


def _with_truncated_block(
    label: int,
    doc: RetrievedDoc,
    prefix: str,
    limit: int,
    min_text_tokens: int,
    block: Formatter = format_source,
    marker: str = "",
) -> str | None:
    """`prefix` plus the block of `doc` with its text cut to fit `limit` tokens, then `marker`; None when
    fewer than `min_text_tokens` of the text would fit."""
    allowed = limit - count_tokens(prefix + block(label, doc, "") + marker)
    if allowed < max(1, min_text_tokens):
        return None
    for _ in range(MAX_TRUNCATION_RETRIES):
        text = truncate_to_tokens(doc["text"], allowed).rstrip("\ufffd").rstrip()
        if not text:
            return None
        packed = prefix + block(label, doc, text) + marker
        overshoot = count_tokens(packed) - limit
        if overshoot <= 0:
            return packed
        allowed -= overshoot
        if allowed <= 0:
            return None
    return None


def _pack_documents(documents: list[RetrievedDoc], limit: int) -> tuple[str, list[RetrievedDoc], int]:
    """Numbered source blocks within `limit` tokens: (text, used documents, how many were truncated)."""
    packed = ""
    used: list[RetrievedDoc] = []
    truncated = 0
    for doc in documents:
        label = len(used) + 1
        prefix = packed + SOURCE_SEPARATOR if packed else ""
        whole = prefix + format_source(label, doc)
        if count_tokens(whole) <= limit:
            packed, used = whole, [*used, doc]
            continue
        if not used:
            cut = _with_truncated_block(label, doc, "", limit, 1, marker=TRUNCATION_MARKER)
            if cut is None:  # not even the header fits: no context at all (the caller falls back)
                break
        else:
            cut = _with_truncated_block(
                label, doc, prefix, limit, MIN_USEFUL_DOCUMENT_TOKENS, marker=TRUNCATION_MARKER
            )
            if cut is None:
                continue
        packed, used, truncated = cut, [*used, doc], truncated + 1
    return packed, used, truncated


def _pack_memories(
    memories: list[RetrievedDoc], first_label: int, template: str, limit: int
) -> tuple[str, list[RetrievedDoc]]:
    """The memory section (`template` around the memory lines, labels from `first_label`) within `limit`
    tokens, and the memories in it; ("", []) when none fits."""
    if not memories or limit <= 0:
        return "", []
    frame = count_tokens(template.format(memories=""))
    packed = ""
    used: list[RetrievedDoc] = []
    for doc in memories:
        label = first_label + len(used)
        prefix = packed + "\n" if packed else ""
        whole = prefix + format_memory(label, doc)
        room = limit - frame
        if count_tokens(whole) > room:
            cut = _with_truncated_block(label, doc, prefix, room, MIN_USEFUL_MEMORY_TOKENS, format_memory)
            if cut is None:
                continue
            whole = cut
        packed, used = whole, [*used, doc]
    return (template.format(memories=packed), used) if used else ("", [])


def _history_turns(history: list[tuple[str, str]]) -> list[list[BaseMessage]]:
    """Group history into turns (a human message with the replies after it), oldest first."""
    turns: list[list[BaseMessage]] = []
    for role, text in history:
        role = role.lower()
        if role in _HUMAN_ROLES:
            turns.append([HumanMessage(text)])
        elif role in _AI_ROLES:
            if not turns:
                turns.append([])
            turns[-1].append(AIMessage(text))
    return [turn for turn in turns if turn]


def _message_tokens(messages: list[BaseMessage]) -> int:
    return sum(count_tokens(message.text) + MESSAGE_OVERHEAD_TOKENS for message in messages)


def _pack_history(history: list[tuple[str, str]], limit: int) -> list[list[BaseMessage]]:
    """Whole turns, newest first, while they fit in `limit`; returned oldest first.

    trim_messages keeps the longest run of newest messages that fits, and `start_on="human"` cuts it back to
    a turn's start: with a counter that adds up per message, that is the longest run of whole turns that
    fits. It is asked only when the history does not fit whole, since `start_on` would also drop a first
    turn that has no question (an answer whose question is older than the history given)."""
    turns = _history_turns(history)
    messages = _flatten(turns)
    if _message_tokens(messages) <= limit:
        return turns
    kept = trim_messages(messages, max_tokens=limit, token_counter=_message_tokens, start_on="human")
    return turns[len(turns) - sum(isinstance(message, HumanMessage) for message in kept) :]


def _flatten(turns: list[list[BaseMessage]]) -> list[BaseMessage]:
    return [message for turn in turns for message in turn]


def clipped(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis (prompt_info's section texts)."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…" if limit > 0 else ""


def _section(name: str, tokens: int, text: str, limit: int) -> dict[str, Any]:
    return {"name": name, "tokens": tokens, "text": clipped(text, limit)}


def build_answer_prompt(
    *,
    system: str,
    question: str,
    documents: list[RetrievedDoc],
    history: list[tuple[str, str]],
    window: int,
    reserve: int,
    context_budget: int,
    context_share: float,
    user_template: str = ANSWER_USER_TEMPLATE_EN,
    memories: list[RetrievedDoc] | None = None,
    memory_share: float = 0.0,
    memory_template: str = MEMORY_SECTION_EN,
    section_chars: int = 300,
    duplicate_similarity: float = 0.0,
    director: list[RetrievedDoc] | None = None,
    director_share: float = 0.0,
    director_texts: DirectorTexts = DIRECTOR_EN,
) -> BudgetedPrompt:
    """Budget an answer prompt by the module's rules. `history` is (role, text) pairs, newest last;
    `user_template` frames the sources and the question (`{sources}`, `{question}`); `memories` (best first)
    go into `memory_template` (`{memories}`) after the system prompt. Without documents the human message is
    the bare question (no-retrieval path); memories are still given then, numbered from 1.
    `duplicate_similarity` (RAG_SOURCE_DUPLICATE_SIMILARITY; 0 = off) merges near-duplicate passages of
    different files into the better scored one before numbering. `director`: the director's events (this
    conversation's first), in their own section after the memories (`director_texts` frame it)."""
    given = len(documents)
    documents = drop_near_duplicates(documents, duplicate_similarity)
    framed = bool(documents)
    memories = memories or []
    question_part = user_template.format(sources="", question=question) if framed else question
    fixed = count_tokens(system) + count_tokens(question_part) + 2 * MESSAGE_OVERHEAD_TOKENS
    available = max(0, window - reserve - fixed)
    # Memories first (seed 000's order), labelled as if every document were used: the labels of the final
    # section are never longer, so what is counted here is what the section can take.
    memory_limit = math.floor(memory_share * available) if memories else 0
    memory_section, used_memories = _pack_memories(
        memories, len(documents) + 1, memory_template, memory_limit
    )
    memory_tokens = count_tokens(memory_section)
    after_memories = max(0, available - memory_tokens)
    director_limit = math.floor(director_share * after_memories) if director else 0
    director_section, used_director = pack_director(director or [], director_limit, director_texts)
    director_tokens = count_tokens(director_section)
    rest = max(0, after_memories - director_tokens)
    context_limit = min(context_budget, math.floor(context_share * rest)) if framed else 0
    sources_text, used, truncated = _pack_documents(documents, context_limit) if framed else ("", [], 0)
    if used_memories:  # the memories' final numbers follow the sources actually used
        memory_section, used_memories = _pack_memories(memories, len(used) + 1, memory_template, memory_limit)
    context_tokens = count_tokens(sources_text)
    history_limit = max(0, rest - context_tokens)
    all_turns = _history_turns(history)
    turns = _pack_history(history, history_limit)
    human = user_template.format(sources=sources_text, question=question) if used else question
    system_text = system + memory_section + director_section

    def assemble() -> list[BaseMessage]:
        return [SystemMessage(system_text), *_flatten(turns), HumanMessage(human)]

    messages = assemble()
    total = _message_tokens(messages)
    while turns and total > window - reserve:  # the parts' counts overshot by a merge: oldest turn goes
        turns = turns[1:]
        messages = assemble()
        total = _message_tokens(messages)
    history_messages = _flatten(turns)
    # No room for even the first source's header, or the fixed part alone is over the window: fall back.
    fallback = (framed and not used) or total > window - reserve
    if fallback:
        logger.warning(
            "answer prompt force-truncated: %s; answering from the system prompt and the question alone "
            "(%d tokens, window %d - reserve %d)",
            "no source fits the context budget" if framed and not used else "the question alone is too long",
            total,
            window,
            reserve,
        )
        messages = [SystemMessage(system), HumanMessage(question)]
        used, truncated, context_tokens, history_messages, turns = [], 0, 0, [], []
        memory_section, used_memories, memory_tokens, sources_text = "", [], 0, ""
        director_section, used_director, director_tokens = "", [], 0
        question_part = question
        total = _message_tokens(messages)
    history_text = "\n".join(f"{message.type}: {message.text}" for message in history_messages)
    sections = [
        _section("system", count_tokens(system), system, section_chars),
        _section("memories", memory_tokens, memory_section.strip(), section_chars),
        _section("director", director_tokens, director_section.strip(), section_chars),
        _section("history", sum(count_tokens(m.text) for m in history_messages), history_text, section_chars),
        _section("sources", context_tokens, sources_text, section_chars),
        _section("question", count_tokens(question_part), question_part, section_chars),
    ]
    info: dict[str, Any] = {
        "window": window,
        "reserve": reserve,
        "fixed_tokens": fixed,
        "memory_tokens": memory_tokens,
        "memory_limit": memory_limit,
        "memories_used": len(used_memories),
        "director_tokens": director_tokens,
        "director_limit": director_limit,
        "director_events_used": len(used_director),
        "context_tokens": context_tokens,
        "context_limit": context_limit,
        "history_tokens": _message_tokens(history_messages),
        "history_limit": history_limit,
        "history_kept": len(turns),
        "history_total": len(all_turns),
        "total_tokens": total,
        "overhead_tokens": MESSAGE_OVERHEAD_TOKENS * len(messages),
        "documents_used": len(used),
        "documents_truncated": truncated,
        "documents_duplicate": given - len(documents),
        "fallback": fallback,
        "sections": sections,
    }
    return BudgetedPrompt(
        messages=messages, used_documents=used, prompt_info=info, used_memories=used_memories
    )
