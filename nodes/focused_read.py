"""The focused read: the short answer read again from the one passage that holds the draft's answer.

A small reader reads one short passage far better than several hundred tokens of evidence (measured in
docs/answer-quality.md "The focused read"). Only the short answer on the first line changes; "none", a failed
call, a reply the passage does not hold, an instruction or a planted token keep the draft. The call is
skipped when no outcome could move the draft out of its band (answering.read_gate).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from answering.read_gate import read_can_change_band
from core.text import contains_cjk, split_sentences, strip_references
from nodes.draft_text import is_grounded_short_answer, is_none_answer, truncated_sentence
from nodes.instrumentation import text_call
from nodes.model_draft import unstreamed
from nodes.turn import answer_calibrator, judge_draft
from prompts.answer import FOCUSED_READ_SYSTEM, FOCUSED_READ_USER
from query.signals import question_signals
from retrieval.answer_span import extract_answer
from retrieval.answer_text import (
    answer_parts,
    clean_short_answer,
    compose_answer,
    content_terms,
    ends_properly,
    normalized,
)
from retrieval.citations import extract_markers
from retrieval.injection import carries_planted_token, is_instruction_like, planted_tokens
from retrieval.tokens import count_tokens
from state.answer_record import AnswerRecord
from state.context import Context
from state.graph_state import State
from state.schemas import RetrievedDoc

#: Completion cap of the focused read: a short answer is a few words.
FOCUSED_READ_MAX_TOKENS = 24
#: Tokens of the passage given to the focused read, at most: a short prompt is the point of the read.
FOCUSED_READ_TOKENS = 400
#: `short_answer_source` of a short answer the focused read gave.
SOURCE_FOCUSED_READ = "focused_read"
#: prompt_info key of the focused read's own short answer ("" when it gave none the passage holds).
FOCUSED_READ_ANSWER_KEY = "focused_read_answer"
#: prompt_info key of a skipped read: the band of the draft, which no outcome of the read could change.
FOCUSED_READ_SKIPPED_KEY = "focused_read_skipped"


def settled_judgement(
    state: State, context: Context, draft: str, sources: list[RetrievedDoc], info: dict[str, Any]
) -> AnswerRecord | None:
    """The draft's judged record when no outcome of the read can change its band (the read is then skipped
    and the record stays the draft's judgement), else None."""
    judged = judge_draft(state, context, draft, sources, prompt_info=info)
    return None if read_can_change_band(judged, answer_calibrator(context)) else judged


def focused_passage(short: str, draft: str, sources: list[RetrievedDoc]) -> RetrievedDoc | None:
    """The first source holding the draft's short answer, else the first cited, else the first one."""
    if not sources:
        return None
    wanted = normalized(short)
    for doc in sources:
        if wanted and wanted in normalized(doc["text"]):
            return doc
    for number in extract_markers(draft):
        if 1 <= number <= len(sources):
            return sources[number - 1]
    return sources[0]


def passage_window(text: str, short: str, max_tokens: int) -> str:
    """The passage without instruction-like sentences, cut around the sentence holding `short`."""
    sentences = [sentence for sentence in split_sentences(text) if not is_instruction_like(sentence)]
    joiner = "" if contains_cjk(text) else " "
    whole = joiner.join(sentences)
    if count_tokens(whole) <= max_tokens:
        return whole
    costs = [count_tokens(sentence) for sentence in sentences]  # once each, however long the window grows
    wanted = normalized(short)
    anchor = next((i for i, sentence in enumerate(sentences) if wanted and wanted in normalized(sentence)), 0)
    low, high, used = anchor, anchor + 1, costs[anchor]
    grew = True
    while grew:
        grew = False
        for index in (high, low - 1):  # the next sentence after the window, then the one before it
            if 0 <= index < len(sentences) and not low <= index < high and used + costs[index] <= max_tokens:
                used, low, high, grew = used + costs[index], min(low, index), max(high, index + 1), True
    return truncated_sentence(joiner.join(sentences[low:high]), max_tokens)


def focused_short(reply: str, question: str, passage: RetrievedDoc) -> str:
    """The reply's short answer, or "" when the passage does not hold it or it is unusable."""
    lines = [line for line in reply.strip().splitlines() if line.strip()]
    candidate = clean_short_answer(lines[0]) if lines else ""
    if lines and (not candidate or content_terms(candidate) & content_terms(question)):
        # a sentence, or a phrase restating the question ("Mara Velt founded the glassworks"): its typed span
        span = extract_answer(question, [strip_references(reply if not candidate else candidate)])
        typed = clean_short_answer(span.text) if span is not None else ""
        candidate = typed or candidate
    if not candidate or is_none_answer(candidate) or is_instruction_like(candidate):
        return ""
    if normalized(candidate) in normalized(question):  # the question (or part of it) echoed
        return ""
    if carries_planted_token(candidate, planted_tokens([split_sentences(passage["text"])])):
        return ""
    return candidate if is_grounded_short_answer(candidate, question, [passage]) else ""


def focused_read(
    model: BaseChatModel, question: str, draft: str, sources: list[RetrievedDoc], max_passage_tokens: int
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(draft, accounting, info) with the focused read's short answer, when it gives a usable one."""
    short, explanation = answer_parts(draft)
    passage = focused_passage(short, draft, sources)
    if passage is None or question_signals(question).comparison:  # a comparison needs both passages
        return draft, {}, {}
    text = passage_window(passage["text"], short, max_passage_tokens)
    messages = [
        SystemMessage(FOCUSED_READ_SYSTEM),
        HumanMessage(FOCUSED_READ_USER.format(title=passage["title"], passage=text, question=question)),
    ]
    reply, error, usage = text_call(unstreamed(model), messages, max_tokens=FOCUSED_READ_MAX_TOKENS)
    info: dict[str, Any] = {"focused_read_passage": passage["chunk_id"], "focused_read_reply": reply[:200]}
    if error is not None:
        info["focused_read_error"] = error
        return draft, usage, info
    answer = focused_short(reply, question, passage)
    info[FOCUSED_READ_ANSWER_KEY] = answer
    if not answer or normalized(answer) == normalized(short):
        return draft, usage, info
    info["short_answer_source"] = SOURCE_FOCUSED_READ
    info["draft_short_answer"] = short
    if not explanation and ends_properly(draft):
        explanation = draft.strip()  # a one-sentence draft is its explanation, not a short answer
    return compose_answer(answer, explanation), usage, info
