"""Fit an answer prompt into the model's window: fixed part, memories, numbered sources, history, generation
reserve.

The prompt's sections, in the baseline design's order: system, memories, history, sources, question (the
memories are appended to the system message, the sources and the question make the last human message). The
rules (the baseline's and the RAG engine service's budgets, plus the baseline's memories), by priority:
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
3. History gets everything that remains after the context (as in the baseline design: the context is budgeted
   first, the history fills the rest), newest turn first, whole turns only; so a question with little evidence
   keeps more of the conversation, and a long conversation never squeezes the evidence. Token counts of the
   parts are not exactly additive (tokens can merge where texts join), so if the assembled prompt is over
   window - reserve by a few tokens, the oldest kept turns are dropped before anything else.
4. If the total still exceeds window - reserve (the question alone is too long), the prompt falls back to
   the system prompt and the question alone, `fallback=True`, and a WARNING is logged (the answer is written
   without its sources, memories and history).
All counts use retrieval.tokens (cl100k_base), plus MESSAGE_OVERHEAD_TOKENS per chat message.
This module holds the rules and the arithmetic of the limits; filling one limit (the cuts, the
MIN_USEFUL_*_TOKENS thresholds, whole history turns) is retrieval.section_packing, and how a source or a
memory reads in the prompt (its header `[2] (File: setup.md, Page: 3, Section: Install, Score: 0.82)`,
TRUNCATION_MARKER) is retrieval.source_blocks.

`prompt_info` says what went in: the counts above, `history_kept` of `history_total` turns, and `sections`,
one {name, tokens, text} per section in prompt order (text cut to `section_chars` characters, since
prompt_info is checkpointed every turn); the sections' tokens plus `overhead_tokens` make `total_tokens`,
give or take a token where texts join.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from prompts.answer import ANSWER_USER_TEMPLATE_EN, MEMORY_SECTION_EN
from prompts.director import DIRECTOR_EN, DirectorTexts
from retrieval.director_section import pack_director
from retrieval.near_duplicates import drop_near_duplicates
from retrieval.section_packing import (
    MESSAGE_OVERHEAD_TOKENS,
    flatten_turns,
    group_turns,
    message_tokens,
    pack_documents,
    pack_history,
    pack_memories,
)
from retrieval.source_blocks import clipped
from retrieval.tokens import count_tokens
from state.schemas import RetrievedDoc

logger = logging.getLogger(__name__)

#: Share of the answer window left after the fixed part that recalled memories may use (budgeted before
#: sources and history): a few notes, never the room the sources need.
MEMORY_SHARE = 0.15
#: Share of the window left after the fixed part and the memories that the director's events may use
#: (budgeted before sources and history).
DIRECTOR_SHARE = 0.2
#: Characters of each prompt section's text kept in prompt_info (the rest is cut with an ellipsis:
#: prompt_info is stored with every checkpoint).
PROMPT_INFO_SECTION_CHARS = 300
#: Section names of `prompt_info["sections"]`, in prompt order (the baseline design's budget order).
SECTION_NAMES = ("system", "memories", "director", "history", "sources", "question")


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


def _section(name: str, tokens: int, text: str, limit: int) -> dict[str, Any]:
    return {"name": name, "tokens": tokens, "text": clipped(text, limit)}


@dataclass(frozen=True)
class AnswerPromptRequest:
    """What `build_answer_prompt` budgets: the parts of an answer prompt and the limits they share.

    Built by the answer path (nodes.generate) from the run's context and settings; a value object, so a
    caller names each part once and the budgeting reads one argument instead of seventeen."""

    system: str
    """The system prompt, always kept whole (part of the fixed part)."""
    question: str
    """The question, always kept whole (with its framing, the rest of the fixed part)."""
    documents: list[RetrievedDoc]
    """Retrieved passages, best first; empty on the no-retrieval path (the human message is then the bare
    question)."""
    history: list[tuple[str, str]]
    """Earlier turns as (role, text) pairs, newest last; filled newest-first into what the sources leave."""
    window: int
    """The model's context window in tokens."""
    reserve: int
    """Tokens kept free for the answer (the generation reserve)."""
    context_budget: int
    """Most tokens the sources may take (RAG_CONTEXT_BUDGET)."""
    context_share: float
    """Most share of what the fixed part, memories and director's events leave that the sources may take."""
    user_template: str = ANSWER_USER_TEMPLATE_EN
    """Frames the sources and the question (`{sources}`, `{question}`)."""
    memories: list[RetrievedDoc] | None = None
    """Recalled memories, best first, numbered after the sources (from 1 without documents)."""
    memory_share: float = 0.0
    """Most share of what the fixed part leaves that the memories may take (0 = none)."""
    memory_template: str = MEMORY_SECTION_EN
    """Frames the memories (`{memories}`), appended to the system prompt."""
    section_chars: int = 300
    """Characters of each section's text kept in prompt_info's `sections` (it is checkpointed every turn)."""
    duplicate_similarity: float = 0.0
    """Token-set Jaccard at which passages of different files are merged into the better scored one before
    numbering (RAG_SOURCE_DUPLICATE_SIMILARITY; 0 = off)."""
    director: list[RetrievedDoc] | None = None
    """The director's events (this conversation's first), in their own section after the memories."""
    director_share: float = 0.0
    """Most share of what the fixed part and memories leave that the director's events may take."""
    director_texts: DirectorTexts = DIRECTOR_EN
    """Frame the director's section."""


@dataclass
class _Packing:
    """An answer prompt's sections as packed under their limits, and the figures prompt_info reports."""

    given: int
    documents: int
    question_part: str
    fixed: int
    memory_limit: int
    memory_section: str
    used_memories: list[RetrievedDoc]
    memory_tokens: int
    director_limit: int
    director_section: str
    used_director: list[RetrievedDoc]
    director_tokens: int
    context_limit: int
    sources_text: str
    used: list[RetrievedDoc]
    truncated: int
    context_tokens: int
    history_limit: int
    history_total: int
    turns: list[list[BaseMessage]]
    human: str


def build_answer_prompt(request: AnswerPromptRequest) -> BudgetedPrompt:
    """Budget an answer prompt by the module's rules (the fields of `request` say what each part is); fall
    back to the system prompt and the question alone when the rest cannot fit."""
    packing = _pack_sections(request)
    system_text = request.system + packing.memory_section + packing.director_section
    turns = packing.turns

    def assemble() -> list[BaseMessage]:
        return [SystemMessage(system_text), *flatten_turns(turns), HumanMessage(packing.human)]

    window, reserve = request.window, request.reserve
    messages = assemble()
    total = message_tokens(messages)
    while turns and total > window - reserve:  # the parts' counts overshot by a merge: oldest turn goes
        turns = turns[1:]
        messages = assemble()
        total = message_tokens(messages)
    packing.turns = turns
    # No room for even the first source's header, or the fixed part alone is over the window: fall back.
    framed = packing.documents > 0
    fallback = (framed and not packing.used) or total > window - reserve
    if fallback:
        logger.warning(
            "answer prompt force-truncated: %s; answering from the system prompt and the question alone "
            "(%d tokens, window %d - reserve %d)",
            "no source fits the context budget"
            if framed and not packing.used
            else "the question alone is too long",
            total,
            window,
            reserve,
        )
        messages = [SystemMessage(request.system), HumanMessage(request.question)]
        _empty_for_fallback(packing, request.question)
        total = message_tokens(messages)
    info = _prompt_info(request, packing, messages=messages, total=total, fallback=fallback)
    return BudgetedPrompt(
        messages=messages, used_documents=packing.used, prompt_info=info, used_memories=packing.used_memories
    )


def _pack_sections(request: AnswerPromptRequest) -> _Packing:
    """Pack each section under its limit, in the module's order of priority: memories, the director's events,
    sources, then history in what remains."""
    documents = drop_near_duplicates(request.documents, request.duplicate_similarity)
    framed = bool(documents)
    memories = request.memories or []
    director = request.director or []
    question_part = (
        request.user_template.format(sources="", question=request.question) if framed else request.question
    )
    fixed = count_tokens(request.system) + count_tokens(question_part) + 2 * MESSAGE_OVERHEAD_TOKENS
    available = max(0, request.window - request.reserve - fixed)
    # Memories first (the baseline design's order), labelled as if every document were used: the labels of
    # the final section are never longer, so what is counted here is what the section can take.
    memory_limit = math.floor(request.memory_share * available) if memories else 0
    memory_section, used_memories = pack_memories(
        memories, len(documents) + 1, request.memory_template, memory_limit
    )
    memory_tokens = count_tokens(memory_section)
    after_memories = max(0, available - memory_tokens)
    director_limit = math.floor(request.director_share * after_memories) if director else 0
    director_section, used_director = pack_director(director, director_limit, request.director_texts)
    director_tokens = count_tokens(director_section)
    rest = max(0, after_memories - director_tokens)
    context_limit = min(request.context_budget, math.floor(request.context_share * rest)) if framed else 0
    sources_text, used, truncated = pack_documents(documents, context_limit) if framed else ("", [], 0)
    if used_memories:  # the memories' final numbers follow the sources actually used
        memory_section, used_memories = pack_memories(
            memories, len(used) + 1, request.memory_template, memory_limit
        )
    context_tokens = count_tokens(sources_text)
    history_limit = max(0, rest - context_tokens)
    human = (
        request.user_template.format(sources=sources_text, question=request.question)
        if used
        else request.question
    )
    return _Packing(
        given=len(request.documents),
        documents=len(documents),
        question_part=question_part,
        fixed=fixed,
        memory_limit=memory_limit,
        memory_section=memory_section,
        used_memories=used_memories,
        memory_tokens=memory_tokens,
        director_limit=director_limit,
        director_section=director_section,
        used_director=used_director,
        director_tokens=director_tokens,
        context_limit=context_limit,
        sources_text=sources_text,
        used=used,
        truncated=truncated,
        context_tokens=context_tokens,
        history_limit=history_limit,
        history_total=len(group_turns(request.history)),
        turns=pack_history(request.history, history_limit),
        human=human,
    )


def _empty_for_fallback(packing: _Packing, question: str) -> None:
    """The fallback prompt's accounting: no sources, memories, director's events or history; the question is
    the bare question."""
    packing.used, packing.truncated, packing.context_tokens, packing.turns = [], 0, 0, []
    packing.memory_section, packing.used_memories, packing.memory_tokens, packing.sources_text = "", [], 0, ""
    packing.director_section, packing.used_director, packing.director_tokens = "", [], 0
    packing.question_part = question


def _prompt_info(
    request: AnswerPromptRequest,
    packing: _Packing,
    *,
    messages: list[BaseMessage],
    total: int,
    fallback: bool,
) -> dict[str, Any]:
    """prompt_info: the limits, what each section took, and the sections' texts (cut to section_chars)."""
    history_messages = flatten_turns(packing.turns)
    history_text = "\n".join(f"{message.type}: {message.text}" for message in history_messages)
    chars = request.section_chars
    sections = [
        _section("system", count_tokens(request.system), request.system, chars),
        _section("memories", packing.memory_tokens, packing.memory_section.strip(), chars),
        _section("director", packing.director_tokens, packing.director_section.strip(), chars),
        _section("history", sum(count_tokens(m.text) for m in history_messages), history_text, chars),
        _section("sources", packing.context_tokens, packing.sources_text, chars),
        _section("question", count_tokens(packing.question_part), packing.question_part, chars),
    ]
    return {
        "window": request.window,
        "reserve": request.reserve,
        "fixed_tokens": packing.fixed,
        "memory_tokens": packing.memory_tokens,
        "memory_limit": packing.memory_limit,
        "memories_used": len(packing.used_memories),
        "director_tokens": packing.director_tokens,
        "director_limit": packing.director_limit,
        "director_events_used": len(packing.used_director),
        "context_tokens": packing.context_tokens,
        "context_limit": packing.context_limit,
        "history_tokens": message_tokens(history_messages),
        "history_limit": packing.history_limit,
        "history_kept": len(packing.turns),
        "history_total": packing.history_total,
        "total_tokens": total,
        "overhead_tokens": MESSAGE_OVERHEAD_TOKENS * len(messages),
        "documents_used": len(packing.used),
        "documents_truncated": packing.truncated,
        "documents_duplicate": packing.given - packing.documents,
        "fallback": fallback,
        "sections": sections,
    }
