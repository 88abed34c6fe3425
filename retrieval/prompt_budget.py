"""Fit an answer prompt into the model's window (the baseline design's budget), by priority:
1. The fixed part (system prompt + framed question) is always kept.
2. Memories take at most memory_share of what the fixed part leaves, numbered after the sources; then the
   director's events (unnumbered background) at most director_share of what remains.
3. Sources take at most min(context_budget, context_share * rest); the first is cut, never dropped, and
   near-duplicates of different files go in once (retrieval.near_duplicates).
4. History fills what the sources leave, newest whole turns first (a long conversation never squeezes the
   evidence); a few tokens over after assembly drop the oldest kept turns.
5. Still too long: the system prompt and the question alone, `fallback=True`, logged as a WARNING.
Filling one limit is retrieval.section_packing; how a source reads is retrieval.source_blocks. `prompt_info`
records the limits, what each section took and its text cut to `section_chars` (checkpointed every turn).
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

#: Share of what the fixed part leaves that recalled memories may use: a few notes, never the sources' room.
MEMORY_SHARE = 0.15
#: Share of what the fixed part and the memories leave that the director's events may use.
DIRECTOR_SHARE = 0.2
#: Characters of each prompt section's text kept in prompt_info (stored with every checkpoint).
PROMPT_INFO_SECTION_CHARS = 300


@dataclass(frozen=True)
class BudgetedPrompt:
    """A prompt that fits the window, what went into it, and the accounting (`prompt_info`)."""

    messages: list[BaseMessage]
    used_documents: list[RetrievedDoc]
    """Source [n] is used_documents[n - 1]; memories are numbered after them."""
    prompt_info: dict[str, Any]
    used_memories: list[RetrievedDoc] = field(default_factory=list)


def _section(name: str, tokens: int, text: str, limit: int) -> dict[str, Any]:
    return {"name": name, "tokens": tokens, "text": clipped(text, limit)}


@dataclass(frozen=True)
class AnswerPromptRequest:
    """The parts of an answer prompt (best first; history newest last) and the limits they share."""

    system: str
    question: str
    documents: list[RetrievedDoc]
    history: list[tuple[str, str]]
    window: int
    reserve: int
    context_budget: int
    context_share: float
    user_template: str = ANSWER_USER_TEMPLATE_EN
    memories: list[RetrievedDoc] | None = None
    memory_share: float = 0.0
    memory_template: str = MEMORY_SECTION_EN
    section_chars: int = PROMPT_INFO_SECTION_CHARS
    duplicate_similarity: float = 0.0
    """Token-set Jaccard at which passages of different files merge (RAG_SOURCE_DUPLICATE_SIMILARITY)."""
    director: list[RetrievedDoc] | None = None
    director_share: float = 0.0
    director_texts: DirectorTexts = DIRECTOR_EN


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
    """Budget an answer prompt by the module's rules."""
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
    """Pack each section under its limit, in the module's order of priority."""
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
    """The fallback prompt's accounting: the bare question and nothing else."""
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
