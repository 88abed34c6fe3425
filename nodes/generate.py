"""generate: write a draft answer from the graded passages, within the model's token budget.

The prompt is budgeted by retrieval.prompt_budget (fixed part kept, context capped, history newest-first,
generation reserve), worded by the context's mode (simple / advanced / precise) in the question's language.
The model is called through a guarded stream (nodes.instrumentation.guarded_text_call), so
`stream_mode="messages"` streams its tokens, a looping reply is cut, and the endpoint's token
log-probabilities give the draft's confidence (models.confidence: `draft_confidence`).
The reader gets the compressed evidence (compress_evidence: `evidence`) when there is some, else whole chunks.
The tenant's memories nearest the question (nodes.memory_recall) get their own section after the system
prompt, numbered after the sources; the draft's sources then end with them (`memory:<id>`). When the
conversation has stalled, the director's events (nodes.director_recall) get their own section after them.

Short answer first: the prompt asks for "Answer: <short answer>" then "Explanation: <sentence> [n]" (few-shot,
stop sequences), and the draft is the short answer on its own line, then the explanation
(retrieval.answer_text.compose_answer). A model that gives only the short answer ("Jupiter") gets the
sentence of the sources that states it as its cited explanation (explained_short_answer). With
`answerer="auto"` a short answer that is missing or not found in the passages is replaced by the extractive
answerer's (retrieval.answer_span); `model` keeps the model's; `extractive` calls no model.

Fallback (documented, never raises): when the model fails or returns garbage (empty, punctuation only, or a
phrase looping) or nothing but an echo of its prompt ("The answer to this question is:", a line of its
instructions or revision note, the question) or of an instruction planted in a passage, the draft is
extractive: the typed span and its sentence, or else the sentences of the top source that best overlap the
question, cited [1], never an instruction-like sentence (retrieval.injection). Without sources the fallback
is a short apology (MODEL_FAILED_*).
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.runtime import Runtime

from core.text import contains_cjk, split_sentences
from models.confidence import answer_confidence
from nodes.director_recall import director_events
from nodes.events import emit
from nodes.instrumentation import (
    TokenLogprobs,
    guarded_text_call,
    merge_updates,
    structured_call,
    timed,
    with_temperature,
)
from nodes.memory_recall import memory_sources, recalled_memories
from nodes.resources import get_resources
from prompts.answer import (
    ANSWER_STOP_SEQUENCES,
    ANSWER_SYSTEM_PROMPTS,
    ANSWER_USER_TEMPLATES,
    MEMORY_SECTIONS,
    MODEL_FAILED_EN,
    MODEL_FAILED_ZH,
    NO_RETRIEVAL_SYSTEMS,
    NONE_ANSWERS,
    NOT_FOUND_EN,
    NOT_FOUND_TEXTS,
    NOT_FOUND_VARIANTS,
    NOT_FOUND_ZH,
    OPERATOR_INSTRUCTIONS,
    REVISION_NOTES,
    REVISION_PROBLEMS,
    REVISION_SUGGESTIONS,
)
from prompts.director import DIRECTOR_SECTIONS
from retrieval.answer_span import SpanAnswer, answer_type, choice_options, extract_answer
from retrieval.answer_text import (
    EchoDetector,
    answer_body,
    best_sentences,
    compose_answer,
    content_terms,
    is_garbage,
    is_not_found_answer,
    normalized,
    remove_sentences,
    split_short_answer,
    strip_preamble,
    supporting_sentence,
)
from retrieval.injection import carries_planted_token, is_instruction_like, planted_tokens
from retrieval.prompt_budget import build_answer_prompt, strip_source_headers
from retrieval.tokens import truncate_to_tokens
from state.context import Context, run_context
from state.graph_state import State
from state.schemas import AnswerReply, RetrievedDoc

logger = logging.getLogger(__name__)

#: Sentences of the top source used by the extractive fallback.
FALLBACK_SENTENCES = 2
#: The tag that keeps a model call out of LangGraph's "messages" stream (langgraph.constants.TAG_NOSTREAM):
#: a JSON-schema answer streams as JSON, so its tokens are not shown; the composed answer is.
NO_STREAM_TAG = "nostream"
#: What a JSON-schema answer call that gave no usable object returns (never used as an answer).
EMPTY_REPLY = AnswerReply(answer="", explanation="")
#: Actions of grade_answer after which this node runs again (the revision note is then added).
_REVISING_ACTIONS = frozenset({"regenerate", "retrieve"})


def language_of(question: str) -> str:
    """'zh' when the question has CJK characters, else 'en' (picks prompts and fallback texts)."""
    return "zh" if contains_cjk(question) else "en"


def current_question(state: State) -> str:
    """The standalone question of this turn (falls back to the raw question)."""
    return state.get("standalone_question") or state.get("question") or ""


def select_documents(
    documents: list[RetrievedDoc], relevance_threshold: float, limit: int
) -> list[RetrievedDoc]:
    """Relevant passages by relevance then score; when none is relevant, the `limit` best by score (a weak
    relevance grader must not leave the generator with nothing)."""
    relevant = [doc for doc in documents if doc.get("relevance", -1.0) >= relevance_threshold]
    if relevant:
        return sorted(relevant, key=lambda doc: (doc["relevance"], doc.get("score", 0.0)), reverse=True)
    return sorted(documents, key=lambda doc: doc.get("score", 0.0), reverse=True)[:limit]


def answer_documents(state: State, context: Context) -> list[RetrievedDoc]:
    """The passages an answer is written from (select_documents). Chat mode answers from the conversation
    when no passage is relevant, rather than from the best irrelevant ones (RAG mode keeps them: the model
    may still find the answer, or say it is not there)."""
    unrelated_limit = 0 if context.answer_source == "chat" else context.top_k
    return select_documents(state.get("documents") or [], context.relevance_threshold, unrelated_limit)


def conversation_history(messages: list[AnyMessage], max_turns: int) -> list[tuple[str, str]]:
    """(role, text) of the previous human/AI messages, newest last, at most `max_turns` exchanges.

    The last message is this turn's question when it is a human message, so it is left out.
    """
    previous = messages[:-1] if messages and messages[-1].type == "human" else messages
    turns: list[tuple[str, str]] = [(message.type, message.text.strip()) for message in previous]
    turns = [(role, text) for role, text in turns if role in ("human", "ai") and text]
    return turns[-2 * max_turns :] if max_turns > 0 else []


def extractive_answer(
    question: str, documents: list[RetrievedDoc], language: str, max_tokens: int
) -> tuple[str, list[RetrievedDoc]]:
    """The draft without the model: the typed short answer of the extractive answerer (retrieval.answer_span)
    and the sentence it was read from, cited; when no span fits, the sentences of the first document that
    has usable ones (not instruction-like) that best overlap the question, cited [1]. Without documents the
    apology; when every passage is only planted instructions, the not-found sentence (nothing else to say)."""
    if not documents:
        return (MODEL_FAILED_ZH if language == "zh" else MODEL_FAILED_EN), []
    span = extract_answer(question, [doc["text"] for doc in documents])
    if span is not None and span.text.strip():
        return span_draft(span, documents, max_tokens)
    for doc in documents:
        sentences = best_sentences(question, doc["text"], FALLBACK_SENTENCES)
        joiner = "" if contains_cjk(doc["text"]) else " "  # the source's script, not the question's
        body = truncate_to_tokens(joiner.join(sentences).strip(), max_tokens).rstrip("\ufffd").strip()
        if answer_body(body):
            return f"{body}{joiner}[1]", [doc]
    return (NOT_FOUND_ZH if language == "zh" else NOT_FOUND_EN), []


def span_draft(
    span: SpanAnswer, documents: list[RetrievedDoc], max_tokens: int
) -> tuple[str, list[RetrievedDoc]]:
    """The extractive answerer's draft and its source: the short answer, then the sentence it was read from,
    cited [1] (`span` was read from `documents`)."""
    source = documents[span.passage]
    sentence = truncated_sentence(span.sentence, max_tokens)
    if not answer_body(sentence):
        return span.text, [source]
    return compose_answer(span.text, cited(sentence, 1)), [source]


def truncated_sentence(sentence: str, max_tokens: int) -> str:
    """A source sentence cut to `max_tokens` tokens (no broken character left at the cut)."""
    return truncate_to_tokens(sentence.strip(), max_tokens).rstrip("\ufffd").strip()


def cited(sentence: str, number: int) -> str:
    """`sentence` ending with the citation marker of source `number` (no space before it in Chinese)."""
    joiner = "" if contains_cjk(sentence) else " "
    return f"{sentence}{joiner}[{number}]"


def explained_short_answer(short: str, question: str, sources: list[RetrievedDoc], max_tokens: int) -> str:
    """A bare short answer ("Jupiter", the model gave no explanation) followed by the sentence of the sources
    that states it, cited with that source's number; the short answer alone when no sentence states it."""
    found = supporting_sentence(short, question, [doc["text"] for doc in sources])
    if found is None:
        return short
    index, sentence = found
    return compose_answer(short, cited(truncated_sentence(sentence, max_tokens), index + 1))


def is_grounded_short_answer(short: str, question: str, documents: list[RetrievedDoc]) -> bool:
    """Whether a short answer can be read in the passages: yes/no to a yes/no question, one of the named
    options of a choice question, or else a span whose terms all occur in one passage and are not merely the
    question's own (a model that repeats the question has not answered it)."""
    if not short.strip():
        return False
    kind = answer_type(question)
    if kind == "yes_no":
        return normalized(short) in YES_NO_ANSWERS
    if kind == "choice":
        return any(normalized(option) == normalized(short) for option in choice_options(question) or ())
    terms = content_terms(short)
    if not terms:
        return any(normalized(short) in normalized(doc["text"]) for doc in documents)
    if terms <= content_terms(question):
        return False
    return any(terms <= content_terms(doc["text"]) for doc in documents)


#: Normalised short answers that answer a yes/no question.
YES_NO_ANSWERS = frozenset({"yes", "no", "是", "不是", "否", "对", "不对"})


def _extractive_short(
    question: str,
    text: str,
    sources: list[RetrievedDoc],
    used: list[RetrievedDoc],
    info: dict[str, Any],
    max_tokens: int,
) -> tuple[str, list[RetrievedDoc]]:
    """The draft when the model's short answer is missing or not in the passages: the extractive answerer's
    span in front of the model's text when that text names it (the model answered, without the format), else
    the extractive draft instead (the model's explanation argues for an ungrounded answer). Unchanged when no
    span of the expected type is in the passages."""
    span = extract_answer(question, [doc["text"] for doc in used])
    if span is None or not span.text.strip():
        return text, sources
    info["short_answer_source"] = "extractive"
    short, explanation = split_short_answer(text)
    if not short and normalized(span.text) in normalized(text):
        return compose_answer(span.text, text), sources
    info["model_short_answer"] = short
    return span_draft(span, used, max_tokens)


def uses_json_schema(context: Context) -> bool:
    """Whether the answer is asked as a JSON object: `json_schema`, or `auto` for a weak model whose endpoint
    enforces a schema. Why offered: on development questions the embedded model gave its short answer in the
    asked form 84% of the time with the grammar against 38% in free text (`rag eval prompts`,
    results/prompts.json). Why not the default: end to end it answered no better (README)."""
    if context.answer_decoding != "auto":
        return context.answer_decoding == "json_schema"
    resources = get_resources()
    return resources.supports_json_schema("generate", context) and (
        resources.strength("generate", context) == "weak"
    )


def json_schema_draft(
    model: BaseChatModel, messages: list[BaseMessage], max_tokens: int
) -> tuple[str, str | None, dict[str, Any]]:
    """(reply as "Answer: X\nExplanation: Y", error or None, accounting) of a JSON-schema answer call, so
    the text path's parsing and checks apply unchanged. Kept out of the token stream (NO_STREAM_TAG)."""
    quiet = model.model_copy(update={"tags": [*(model.tags or []), NO_STREAM_TAG]})
    result, usage = structured_call(
        quiet, AnswerReply, messages, EMPTY_REPLY, json_schema=True, max_tokens=max_tokens
    )
    if not result.ok:
        return "", result.error or "no usable JSON answer", usage
    reply = result.value
    text = "\n".join(
        line
        for line in (f"Answer: {reply.answer.strip()}", f"Explanation: {reply.explanation.strip()}")
        if line
    )
    return text, None, usage


def with_stop(model: BaseChatModel, stops: tuple[str, ...]) -> BaseChatModel:
    """A copy of the model that stops at `stops` (a model without a `stop` field is returned as is)."""
    if "stop" not in type(model).model_fields:
        return model
    return model.model_copy(update={"stop": list(stops)})


def model_draft(
    raw: str, system: str, question: str, language: str, sources: list[RetrievedDoc]
) -> tuple[str, str]:
    """(draft, short answer) of a model reply: "Answer: X / Explanation: Y" becomes the short answer on its
    own line, then the explanation cleaned of echoes and planted instructions (clean_model_answer). An
    honest "not found" is kept whole, without a short answer."""
    headless = strip_source_headers(raw)
    if is_not_found_answer(strip_preamble(headless)):
        return clean_model_answer(raw, system, question, language, sources), ""
    short, explanation = split_short_answer(headless, allow_bare=bool(sources))
    if is_none_answer(short):  # the model's own "the sources do not answer" (simple templates)
        return (NOT_FOUND_ZH if language == "zh" else NOT_FOUND_EN), ""
    if short and (is_garbage(short) or is_instruction_like(short)):
        short = ""
    cleaned = clean_model_answer(explanation, system, question, language, sources) if explanation else ""
    if not short:
        return cleaned, ""
    return compose_answer(short, cleaned), short


def is_none_answer(short: str) -> bool:
    """Whether a short answer says the sources do not answer ("none", prompts.answer.NONE_ANSWERS)."""
    return short.strip().rstrip(".。!！").strip().lower() in NONE_ANSWERS


def clean_model_answer(
    text: str, system: str, question: str, language: str, sources: list[RetrievedDoc]
) -> str:
    """The model's reply without what is not an answer: echoed source headers, a leading "The answer is:",
    sentences that repeat the prompt (instructions, revision note, labels, the question), sentences that
    are instructions themselves, and sentences carrying a token that only a planted instruction of the
    passages holds (an obeyed injection). "" when nothing is left."""
    text = strip_preamble(strip_source_headers(text))
    scaffolding = [
        system,
        *REVISION_NOTES.values(),
        ANSWER_USER_TEMPLATES[language].format(sources="", question=""),
    ]
    text = EchoDetector(scaffolding, question, exempt=(*NOT_FOUND_TEXTS, *NOT_FOUND_VARIANTS)).remove(text)
    planted = planted_tokens(split_sentences(doc["text"]) for doc in sources)
    text = remove_sentences(
        text, lambda sentence: is_instruction_like(sentence) or carries_planted_token(sentence, planted)
    )
    return strip_preamble(text) if answer_body(text) else ""


#: Template per query type when the context's mode is "auto": factoid questions (one fact, a bridge entity,
#: a comparison's winner) get the short-answer template; questions that need explanation get "advanced".
AUTO_MODES: dict[str, str] = {
    "SIMPLE_FACT": "simple",
    "MULTI_HOP": "simple",
    "COMPARISON": "simple",
    "AGGREGATION": "advanced",
    "COMPLEX_REASONING": "advanced",
    "OPEN_ENDED": "advanced",
}
#: Template of "auto" when there is no analysis (the naive baseline).
AUTO_DEFAULT_MODE = "advanced"


def answer_mode(mode: str, analysis: dict[str, Any] | None) -> str:
    """The template to use: the context's mode, or for "auto" the one that suits the analysed query type."""
    if mode != "auto":
        return mode
    return AUTO_MODES.get(str((analysis or {}).get("query_type", "")), AUTO_DEFAULT_MODE)


def _system_prompt(state: State, context: Context, language: str, with_documents: bool) -> str:
    extra = OPERATOR_INSTRUCTIONS.format(instructions=context.system_prompt) if context.system_prompt else ""
    if not with_documents:
        return NO_RETRIEVAL_SYSTEMS[language] + extra
    system = ANSWER_SYSTEM_PROMPTS[(answer_mode(context.mode, state.get("analysis")), language)]
    revising = state.get("generation_rounds", 0) > 0 and state.get("next_action") in _REVISING_ACTIONS
    return (system + revision_note(state, language) if revising else system) + extra


def revision_note(state: State, language: str) -> str:
    """The note of a revised answer: the previous one was rejected, what the grader found wrong with it
    (`answer_grade["problems"]`, grade_answer.answer_problems), and the grader's suggestions for the new one
    (`answer_grade["suggestions"]`, seed 003's reflector: the next round uses them), one line each."""
    grade = state.get("answer_grade") or {}
    note = REVISION_NOTES[language]
    problems = grade.get("problems") or []
    if problems:
        listed = "\n".join(f"- {problem}" for problem in problems)
        note += REVISION_PROBLEMS[language].format(problems=listed)
    suggestions = grade.get("suggestions") or []
    if suggestions:
        listed = "\n".join(f"- {suggestion}" for suggestion in suggestions)
        note += REVISION_SUGGESTIONS[language].format(suggestions=listed)
    return note


def whole_chunks(sources: list[RetrievedDoc], documents: list[RetrievedDoc]) -> list[RetrievedDoc]:
    """The sources as whole chunks: a source the reader saw compressed (retrieval.evidence) becomes its
    chunk again, keeping the offsets of the sentences it was given, so citations point into the chunk."""
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
    """What compress_evidence recorded in `prompt_info` this turn (generate's own accounting joins it)."""
    info = state.get("prompt_info") or {}
    return {key: info[key] for key in EVIDENCE_INFO_KEYS if key in info} if state.get("evidence") else {}


def answer_token_cap(state: State, context: Context) -> int:
    """Completion cap of the answer call: a short-answer reply (simple template) needs an answer line and
    one sentence, so it gets `answer_max_tokens` (a loop cannot run long); explaining templates get the
    whole generation reserve."""
    if answer_mode(context.mode, state.get("analysis")) == "simple":
        return min(context.answer_max_tokens, context.generation_reserve)
    return context.generation_reserve


@timed("generate")
def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Draft an answer from the selected passages (or without any on the no-retrieval path)."""
    context = run_context(runtime)
    question = current_question(state)
    language = language_of(question)
    documents = state.get("evidence") or answer_documents(state, context)
    memories = recalled_memories(state, context, question)  # the tenant's notes, seed 000's own section
    director = director_events(state, context, question)  # a stalled conversation's events (seed 5)
    settings = get_resources().settings
    system = _system_prompt(state, context, language, bool(documents))
    prompt = build_answer_prompt(
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
        memory_share=settings.memory_share,
        memory_template=MEMORY_SECTIONS[language],
        director=director,
        director_share=settings.director_share,
        director_texts=DIRECTOR_SECTIONS[language],
        section_chars=settings.prompt_info_section_chars,
        duplicate_similarity=settings.source_duplicate_similarity,
    )
    used = prompt.used_documents or documents
    info = {**evidence_info(state), **prompt.prompt_info}
    info["generation_fallback"] = None
    answerer = context.answerer if used else "model"
    info["short_answer_source"] = None
    if answerer == "extractive":
        info["short_answer_source"] = "extractive"
        text, sources = extractive_answer(question, used, language, context.generation_reserve)
        return {
            "draft": text,
            "sources": sources,
            "prompt_info": info,
            "generation_rounds": 1,
            "draft_confidence": None,
            "recalled_memories": memories,
            "director_events": director,
        }
    model = with_temperature(get_resources().model("generate", context), context.temperature)
    emit(
        "generation_start",
        {"documents": len(prompt.used_documents), "round": state.get("generation_rounds", 0) + 1},
    )
    token_logprobs: TokenLogprobs | None = None
    if used and uses_json_schema(context):
        raw, error, usage = json_schema_draft(model, prompt.messages, context.generation_reserve)
    else:
        stopping = with_stop(model, ANSWER_STOP_SEQUENCES) if used else model
        reply = guarded_text_call(
            stopping, prompt.messages, max_tokens=answer_token_cap(state, context), logprobs=bool(used)
        )
        raw, error, usage, token_logprobs = reply.text, reply.error, reply.accounting, reply.token_logprobs
        info["stopped_on_loop"] = reply.stopped_on_loop
    # The reader saw compressed sentences; the draft's sources are their whole chunks (same order, so its
    # markers still match), so grading, the echo checks and citations see everything the chunk says.
    sources = whole_chunks(prompt.used_documents, state.get("documents") or [])
    sources += memory_sources(raw, len(prompt.used_documents), prompt.used_memories)  # numbered after them
    # The system prompt without the memories: a reply that repeats a memory is no echo of the instructions.
    text, short = model_draft(raw, system, question, language, sources)
    confidence = answer_confidence(token_logprobs, short)
    # The reply's own tokens, kept for the QA records (rag eval calibrate replays other confidence signals
    # from them: whole first line, minimum) whoever ends up writing the short answer.
    info["reply_logprobs"] = [[token, round(value, 4)] for token, value in token_logprobs or []] or None
    if short:
        info["short_answer_source"] = "model"
    if error is not None or is_garbage(text):
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
        and not is_grounded_short_answer(short, question, [*used, *prompt.used_memories])
    ):
        text, sources = _extractive_short(question, text, sources, used, info, context.generation_reserve)
    if short and info["short_answer_source"] == "model" and text.strip() == short.strip():
        text = explained_short_answer(short, question, sources, context.generation_reserve)
    if info["short_answer_source"] == "extractive" or info["generation_fallback"]:
        confidence = None  # the model did not write this answer: its log-probabilities say nothing of it
    update = {
        "draft": text,
        "sources": sources,
        "prompt_info": info,
        "generation_rounds": 1,
        "draft_confidence": confidence,
        "recalled_memories": memories,
        "director_events": director,
    }
    return merge_updates(update, usage)
