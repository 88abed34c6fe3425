"""Packing an answer prompt's parts into a token limit (the limits are retrieval.prompt_budget's): numbered
source blocks and memory lines in the given order, a block that does not fit cut when at least
MIN_USEFUL_*_TOKENS of it fit (the first document always), else left out; history in whole turns, newest
first. Counts use retrieval.tokens plus MESSAGE_OVERHEAD_TOKENS per chat message.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from retrieval.source_blocks import (
    SOURCE_SEPARATOR,
    TRUNCATION_MARKER,
    Formatter,
    format_memory,
    format_source,
)
from retrieval.tokens import count_tokens, truncate_to_tokens
from state.schemas import RetrievedDoc

#: Tokens a chat template adds around each message (role markers, separators), as OpenAI counts them.
MESSAGE_OVERHEAD_TOKENS = 4
#: A later document is truncated into the remaining room only when at least this many of its text tokens fit.
MIN_USEFUL_DOCUMENT_TOKENS = 64
#: A later memory is cut into the remaining room only when at least this many of its tokens fit.
MIN_USEFUL_MEMORY_TOKENS = 16
#: Retries of a cut that re-encodes over its room (mid-character), each shorter by the overshoot.
MAX_TRUNCATION_RETRIES = 8
_HUMAN_ROLES = frozenset({"human", "user"})
_AI_ROLES = frozenset({"ai", "assistant"})


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


def pack_documents(documents: list[RetrievedDoc], limit: int) -> tuple[str, list[RetrievedDoc], int]:
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


def pack_memories(
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


def group_turns(history: list[tuple[str, str]]) -> list[list[BaseMessage]]:
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


def message_tokens(messages: list[BaseMessage]) -> int:
    """Tokens of `messages` in a chat prompt: each text's count plus MESSAGE_OVERHEAD_TOKENS."""
    return sum(count_tokens(message.text) + MESSAGE_OVERHEAD_TOKENS for message in messages)


def pack_history(history: list[tuple[str, str]], limit: int) -> list[list[BaseMessage]]:
    """Whole turns, newest first, while they fit in `limit`; returned oldest first (trim_messages with
    `start_on="human"`, asked only when the history does not fit whole)."""
    turns = group_turns(history)
    messages = flatten_turns(turns)
    if message_tokens(messages) <= limit:
        return turns
    kept = trim_messages(messages, max_tokens=limit, token_counter=message_tokens, start_on="human")
    return turns[len(turns) - sum(isinstance(message, HumanMessage) for message in kept) :]


def flatten_turns(turns: list[list[BaseMessage]]) -> list[BaseMessage]:
    """The messages of `turns`, in order (what goes into the prompt)."""
    return [message for turn in turns for message in turn]
