"""What this turn asks: its standalone question and language, the conversation before it, the passages an
answer is written from, and the answer template; shared by the nodes that read the turn the same way."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AnyMessage

from answering.calibrator import Calibrator
from answering.judge import embedding_similarity, judge_answer, model_calibrator
from core.text import contains_cjk
from nodes.resources import get_resources
from state.answer_record import AnswerRecord
from state.context import Context
from state.graph_state import State
from state.schemas import RetrievedDoc


def language_of(question: str) -> str:
    """'zh' when the question has CJK characters, else 'en' (picks prompts and fallback texts)."""
    return "zh" if contains_cjk(question) else "en"


def current_question(state: State) -> str:
    """The standalone question of this turn (falls back to the raw question)."""
    return state.get("standalone_question") or state.get("question") or ""


def select_documents(
    documents: list[RetrievedDoc], relevance_threshold: float, limit: int
) -> list[RetrievedDoc]:
    """Relevant passages by relevance then score; when none is relevant, the `limit` best by score
    (a weak relevance grader must not leave the generator with nothing)."""
    relevant = [doc for doc in documents if doc.get("relevance", -1.0) >= relevance_threshold]
    if relevant:
        return sorted(relevant, key=lambda doc: (doc["relevance"], doc.get("score", 0.0)), reverse=True)
    return sorted(documents, key=lambda doc: doc.get("score", 0.0), reverse=True)[:limit]


def answer_documents(state: State, context: Context) -> list[RetrievedDoc]:
    """The passages an answer is written from; without a relevant one, chat mode uses none."""
    unrelated_limit = 0 if context.answer_source == "chat" else context.top_k
    return select_documents(state.get("documents") or [], context.relevance_threshold, unrelated_limit)


def conversation_history(messages: list[AnyMessage], max_turns: int) -> list[tuple[str, str]]:
    """(role, text) of the previous human/AI messages (not this turn's question), at most `max_turns`."""
    previous = messages[:-1] if messages and messages[-1].type == "human" else messages
    turns: list[tuple[str, str]] = [(message.type, message.text.strip()) for message in previous]
    turns = [(role, text) for role, text in turns if role in ("human", "ai") and text]
    return turns[-2 * max_turns :] if max_turns > 0 else []


#: Template of the "auto" mode, whatever the query type: it answered best on every development set
#: (docs/answer-quality.md has the runs).
AUTO_MODE = "advanced"


def answer_mode(mode: str) -> str:
    """The template to use: the context's mode, AUTO_MODE for "auto"."""
    return AUTO_MODE if mode == "auto" else mode


def answer_calibrator(context: Context) -> Calibrator:
    """The calibrator of the answering model (its own, else the default; answering.calibrator)."""
    return model_calibrator(get_resources().model_identity("generate", context))


def judge_draft(
    state: State,
    context: Context,
    draft: str,
    sources: list[RetrievedDoc],
    prompt_info: dict[str, Any] | None = None,
) -> AnswerRecord:
    """The judged record of a draft; `prompt_info`: the draft's own when it is not yet in state."""
    resources = get_resources()
    store = resources.uses_store(context)
    similarity = embedding_similarity(resources.kb().embeddings.inner) if store else None
    return judge_answer(
        question=current_question(state),
        draft=draft,
        sources=sources,
        evidence=state.get("evidence") or [],
        documents=state.get("documents") or [],
        prompt_info=(state.get("prompt_info") or {}) if prompt_info is None else prompt_info,
        strategy=state.get("strategy") or "",
        calibrator=answer_calibrator(context),
        similarity=similarity,
    )
