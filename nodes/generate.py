"""generate: write a draft answer from the graded passages (or compressed evidence), within the token budget.

The prompt (retrieval.prompt_budget) asks for "Answer: <short answer>" then "Explanation: <sentence> [n]";
recalled memories and the director's events get their own sections, numbered after the sources. With
`answerer="auto"` a short answer not found in the passages is replaced by the extractive one, and the focused
read runs only when it can change the answer's band (answering.read_gate). A failed, garbage or echoing reply
falls back to the extractive draft (never raises; without sources, a short apology).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langgraph.runtime import Runtime

from answering.judge import CANDIDATES_KEY, READER_DECLINED_KEY, SHORT_LOGPROBS_KEY
from models.confidence import answer_logprobs
from nodes.director_recall import director_events
from nodes.draft_text import explained_short_answer, is_grounded_short_answer
from nodes.events import emit
from nodes.extractive import SOURCE_MODEL_EXPLANATION, extractive_answer, extractive_short
from nodes.focused_read import (
    FOCUSED_READ_ANSWER_KEY,
    FOCUSED_READ_SKIPPED_KEY,
    FOCUSED_READ_TOKENS,
    focused_read,
    settled_judgement,
)
from nodes.instrumentation import TokenLogprobs, guarded_text_call, merge_updates, timed, with_temperature
from nodes.memory_recall import memory_sources
from nodes.model_draft import json_schema_draft, model_draft, uses_json_schema, with_stop
from nodes.resources import get_resources
from nodes.turn import answer_documents, answer_mode, conversation_history, current_question, language_of
from prompts.answer import (
    ANSWER_STOP_SEQUENCES,
    ANSWER_SYSTEM_PROMPTS,
    ANSWER_USER_TEMPLATES,
    MEMORY_SECTIONS,
    NO_RETRIEVAL_SYSTEMS,
    OPERATOR_INSTRUCTIONS,
    REVISION_NOTES,
    REVISION_PROBLEMS,
    REVISION_SUGGESTIONS,
)
from prompts.director import DIRECTOR_SECTIONS
from retrieval.answer_span import extract_answer
from retrieval.answer_text import answer_parts, is_garbage, is_not_found_answer, strip_preamble
from retrieval.prompt_budget import (
    DIRECTOR_SHARE,
    MEMORY_SHARE,
    PROMPT_INFO_SECTION_CHARS,
    AnswerPromptRequest,
    build_answer_prompt,
)
from retrieval.source_blocks import strip_source_headers
from state.answer_record import AnswerRecord
from state.context import Context, run_context
from state.graph_state import State
from state.schemas import RetrievedDoc

logger = logging.getLogger(__name__)

#: Actions of grade_answer after which this node runs again (the revision note is then added).
_REVISING_ACTIONS = frozenset({"regenerate", "retrieve"})


def _system_prompt(state: State, context: Context, language: str, with_documents: bool) -> str:
    extra = OPERATOR_INSTRUCTIONS.format(instructions=context.system_prompt) if context.system_prompt else ""
    if not with_documents:
        return NO_RETRIEVAL_SYSTEMS[language] + extra
    system = ANSWER_SYSTEM_PROMPTS[(answer_mode(context.mode), language)]
    revising = state.get("generation_rounds", 0) > 0 and state.get("next_action") in _REVISING_ACTIONS
    return (system + revision_note(state, language) if revising else system) + extra


def revision_note(state: State, language: str) -> str:
    """The note of a revised answer: the grader's problems and suggestions (`answer_grade`), one line each."""
    grade = state.get("answer_grade") or {}
    note = REVISION_NOTES[language]
    for key, templates in (("problems", REVISION_PROBLEMS), ("suggestions", REVISION_SUGGESTIONS)):
        if items := grade.get(key):
            note += templates[language].format(**{key: "\n".join(f"- {item}" for item in items)})
    return note


def whole_chunks(sources: list[RetrievedDoc], documents: list[RetrievedDoc]) -> list[RetrievedDoc]:
    """The sources as whole chunks, keeping a compressed source's sentence offsets so citations point in."""
    full = {doc["chunk_id"]: doc for doc in documents}
    expanded: list[RetrievedDoc] = []
    for doc in sources:
        spans = doc["metadata"].get("evidence_spans")
        whole = full.get(doc["chunk_id"])
        if spans is None or whole is None:
            expanded.append(doc)
            continue
        expanded.append({**whole, "metadata": {**whole["metadata"], "evidence_spans": spans}})
    return expanded


#: prompt_info keys that compress_evidence wrote and generate keeps.
EVIDENCE_INFO_KEYS = (
    "evidence_tokens_before",
    "evidence_tokens_after",
    "evidence_sentences",
    "bridge_entities",
)


def evidence_info(state: State) -> dict[str, Any]:
    """What compress_evidence recorded in `prompt_info` this turn."""
    info = state.get("prompt_info") or {}
    return {key: info[key] for key in EVIDENCE_INFO_KEYS if key in info} if state.get("evidence") else {}


def answer_token_cap(state: State, context: Context) -> int:
    """Completion cap of the answer call: `answer_max_tokens` for the simple template, else the reserve."""
    if answer_mode(context.mode) == "simple":
        return min(context.answer_max_tokens, context.generation_reserve)
    return context.generation_reserve


@timed("generate")
def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Draft an answer from the selected passages (or without any on the no-retrieval path)."""
    context = run_context(runtime)
    question = current_question(state)
    language = language_of(question)
    documents = state.get("evidence") or answer_documents(state, context)
    memories = state.get("recalled_memories") or []
    director = director_events(state, context, question, getattr(runtime, "store", None))
    # Memories answer like sources when retrieval ran and they are all the evidence there is.
    sourced = bool(documents) or (bool(memories) and state.get("retrieval_rounds", 0) > 0)
    system = _system_prompt(state, context, language, sourced)
    request = _prompt_request(state, context, system, question, language, documents, memories, director)
    prompt = build_answer_prompt(request)
    used = prompt.used_documents or documents
    info = {
        **evidence_info(state),
        **prompt.prompt_info,
        "generation_fallback": None,
        "short_answer_source": None,
    }
    answerer = context.answerer if used else "model"
    if answerer == "extractive":
        info["short_answer_source"] = "extractive"
        text, sources = extractive_answer(question, used, language, context.generation_reserve)
        return _draft_update(text, sources, info, director)
    model = with_temperature(get_resources().model("generate", context), context.temperature)
    emit(
        "generation_start",
        {"documents": len(prompt.used_documents), "round": state.get("generation_rounds", 0) + 1},
    )
    raw, error, usage, token_logprobs = _model_reply(state, context, model, prompt.messages, sourced, info)
    # Whole chunks in the same order, so the markers still match and grading sees the whole chunk.
    sources = whole_chunks(prompt.used_documents, state.get("documents") or [])
    sources += memory_sources(raw, len(prompt.used_documents), prompt.used_memories)
    text, short = model_draft(raw, system, question, language, sources)
    _note_reply(info, short, token_logprobs)
    text, sources = _vetted_draft(
        text,
        sources,
        _Draft(raw=raw, short=short, error=error, answerer=answerer),
        question=question,
        language=language,
        used=used,
        memories=prompt.used_memories,
        context=context,
        info=info,
    )
    info[CANDIDATES_KEY] = _candidates(question, text, short, used, info)
    read_usage: dict[str, Any] = {}
    record: AnswerRecord | None = None
    if context.focused_read and info["generation_fallback"] is None and not is_not_found_answer(text):
        passages = sources[: len(prompt.used_documents)]  # the retrieved chunks, not the memories after
        text, read_usage, record = _read_again(state, context, model, question, text, sources, passages, info)
    return merge_updates(_draft_update(text, sources, info, director, record), usage, read_usage)


def _prompt_request(
    state: State,
    context: Context,
    system: str,
    question: str,
    language: str,
    documents: list[RetrievedDoc],
    memories: list[RetrievedDoc],
    director: list[RetrievedDoc],
) -> AnswerPromptRequest:
    """What the answer prompt is budgeted from."""
    return AnswerPromptRequest(
        system=system,
        question=question,
        documents=documents,
        history=conversation_history(state.get("messages") or [], context.history_turns),
        window=context.model_context_tokens,
        reserve=context.generation_reserve,
        context_budget=context.context_token_budget,
        context_share=context.context_share,
        user_template=ANSWER_USER_TEMPLATES[language],
        memories=memories,
        memory_share=MEMORY_SHARE,
        memory_template=MEMORY_SECTIONS[language],
        director=director,
        director_share=DIRECTOR_SHARE,
        director_texts=DIRECTOR_SECTIONS[language],
        section_chars=PROMPT_INFO_SECTION_CHARS,
        duplicate_similarity=get_resources().settings.source_duplicate_similarity,
    )


def _model_reply(
    state: State,
    context: Context,
    model: BaseChatModel,
    messages: list[BaseMessage],
    sourced: bool,
    info: dict[str, Any],
) -> tuple[str, str | None, dict[str, Any], TokenLogprobs | None]:
    """(raw reply, error or None, accounting, token log-probabilities) of the reader's call."""
    token_logprobs: TokenLogprobs | None = None
    if sourced and uses_json_schema(context):
        raw, error, usage = json_schema_draft(model, messages, context.generation_reserve)
    else:
        stopping = with_stop(model, ANSWER_STOP_SEQUENCES) if sourced else model
        reply = guarded_text_call(
            stopping, messages, max_tokens=answer_token_cap(state, context), logprobs=sourced
        )
        raw, error, usage, token_logprobs = reply.text, reply.error, reply.accounting, reply.token_logprobs
        info["stopped_on_loop"] = reply.stopped_on_loop
    return raw, error, usage, token_logprobs


@dataclass(frozen=True)
class _Draft:
    """The reader's reply, its short answer ("" when none), its error and the run's answerer."""

    raw: str
    short: str
    error: str | None
    answerer: str


def _vetted_draft(
    text: str,
    sources: list[RetrievedDoc],
    draft: _Draft,
    *,
    question: str,
    language: str,
    used: list[RetrievedDoc],
    memories: list[RetrievedDoc],
    context: Context,
    info: dict[str, Any],
) -> tuple[str, list[RetrievedDoc]]:
    """(draft, sources) once the reply is judged (an unusable reply becomes extractive; `info` says why)."""
    raw, short, error, answerer = draft.raw, draft.short, draft.error, draft.answerer
    # The reader's "not found" is a signal, not a decision: the other readers still propose a short answer.
    info[READER_DECLINED_KEY] = error is None and bool(sources) and is_not_found_answer(text)
    if info[READER_DECLINED_KEY]:
        info["short_answer_source"] = "extractive"
        text, sources = extractive_answer(question, used, language, context.generation_reserve)
    elif error is not None or is_garbage(text):
        if error is not None:
            reason = f"model error: {error}"
        elif is_garbage(strip_preamble(strip_source_headers(raw))):
            reason = "unusable model output"
        else:
            reason = "model output echoed the prompt or a planted instruction"
        logger.warning("generate: %s; using the extractive fallback", reason)
        info["generation_fallback"] = reason
        info["short_answer_source"] = "extractive"
        text, sources = extractive_answer(question, used, language, context.generation_reserve)
    elif (
        answerer == "auto"
        and not is_not_found_answer(text)
        and not is_grounded_short_answer(short, question, [*used, *memories])
    ):
        text, sources = extractive_short(question, text, sources, used, info, context.generation_reserve)
    if short and info["short_answer_source"] == "model" and text.strip() == short.strip():
        text = explained_short_answer(short, question, sources, context.generation_reserve)
    return text, sources


def _candidates(
    question: str, text: str, short: str, used: list[RetrievedDoc], info: dict[str, Any]
) -> dict[str, str]:
    """The short answers the judgement weighs: the draft's own, the focused read's and the extractive span."""
    extractive_span = extract_answer(question, [doc["text"] for doc in used])
    own = info["short_answer_source"] in ("model", SOURCE_MODEL_EXPLANATION)
    own_short = answer_parts(text)[0] if own else ""
    return {
        "draft": "" if info[READER_DECLINED_KEY] or info["generation_fallback"] else short or own_short,
        "focused_read": "",
        "extractive": extractive_span.text.strip() if extractive_span is not None else "",
    }


def _draft_update(
    text: str,
    sources: list[RetrievedDoc],
    info: dict[str, Any],
    director: list[RetrievedDoc],
    record: AnswerRecord | None = None,
) -> dict[str, Any]:
    """The node's state update; `record`: the draft's judgement when the read gate already made it, so
    grade_answer and cite reuse it instead of judging the same draft again."""
    return {
        "draft": text,
        "sources": sources,
        "prompt_info": info,
        "answer_record": record,
        "generation_rounds": 1,
        "director_events": director,
    }


def _note_reply(info: dict[str, Any], short: str, token_logprobs: TokenLogprobs | None) -> None:
    """Record in `info` the reply's token log-probabilities and who wrote the short answer."""
    info[SHORT_LOGPROBS_KEY] = [round(value, 4) for value in answer_logprobs(token_logprobs, short)]
    info["reply_logprobs"] = [[token, round(value, 4)] for token, value in token_logprobs or []] or None
    if short:
        info["short_answer_source"] = "model"


def _read_again(
    state: State,
    context: Context,
    model: BaseChatModel,
    question: str,
    text: str,
    sources: list[RetrievedDoc],
    passages: list[RetrievedDoc],
    info: dict[str, Any],
) -> tuple[str, dict[str, Any], AnswerRecord | None]:
    """(draft, accounting, record) after the focused read, run only when it can change the draft's band;
    `record` is the draft's judgement when the read was skipped (None when it ran: the draft may differ)."""
    settled = settled_judgement(state, context, text, sources, info)
    if settled is not None:
        info[FOCUSED_READ_SKIPPED_KEY] = settled["band"]
        return text, {}, settled
    text, read_usage, read_info = focused_read(model, question, text, passages, FOCUSED_READ_TOKENS)
    info.update(read_info)
    info[CANDIDATES_KEY]["focused_read"] = read_info.get(FOCUSED_READ_ANSWER_KEY, "")
    return text, read_usage, None
