"""contextualize: turn a follow-up ("when was it founded?") into a standalone question for retrieval.

Retrieval sees one question, so pronouns and ellipsis are resolved first from the last `history_turns` turns
(answers included: a follow-up often points at what only the answer named). A strong model rewrites the
question; a weak one, or an unusable reply, gets the heuristic. Without history no model is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    trim_messages,
)
from langgraph.runtime import Runtime

from nodes.instrumentation import merge_updates, text_call, timed
from nodes.resources import get_resources
from nodes.search_queries import valid_standalone
from prompts.query import CONTEXTUALIZE_PROMPT, CONTEXTUALIZE_SYSTEM
from query.follow_ups import heuristic_standalone
from state.context import Context, run_context
from state.graph_state import State

#: Characters of each earlier message shown to the model (long answers add tokens, not context).
HISTORY_MESSAGE_CHARS = 600
#: Completion cap of the rewrite: one question.
CONTEXTUALIZE_MAX_TOKENS = 96


def split_history(messages: list[AnyMessage]) -> tuple[list[AnyMessage], str]:
    """(messages before the last human message, that message's text); ([], "") without a human message."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return messages[:index], messages[index].text.strip()
    return [], ""


def _questions(messages: Sequence[BaseMessage]) -> int:
    """Human messages in `messages`: one per turn, what recent_turns has trim_messages count."""
    return sum(isinstance(message, HumanMessage) for message in messages)


def recent_turns(history: list[AnyMessage], turns: int) -> list[AnyMessage]:
    """The last `turns` turns of `history` (a turn starts at a human message); none when turns <= 0.
    A history without any question keeps its last `turns` messages: `start_on="human"` would drop them all."""
    if turns <= 0:
        return []
    if not _questions(history):
        return list(history[-turns:])
    # trim_messages returns the very messages it was given, so they are still AnyMessage.
    kept = trim_messages(history, max_tokens=turns, token_counter=_questions, start_on="human")
    return cast(list[AnyMessage], kept)


def turn_answers(turns: list[AnyMessage]) -> list[str]:
    """The assistant's answer of each human message in `turns`, in order ("" for a question without one)."""
    answers: list[str] = []
    for message in turns:
        if isinstance(message, HumanMessage):
            answers.append("")
        elif isinstance(message, AIMessage) and answers:
            answers[-1] = "\n".join(part for part in (answers[-1], message.text) if part)
    return answers


def format_history(messages: list[AnyMessage]) -> str:
    """'User: ...' / 'Assistant: ...' lines, each message cut to HISTORY_MESSAGE_CHARS."""
    lines = []
    for message in messages:
        speaker = "User" if isinstance(message, HumanMessage) else "Assistant"
        text = " ".join(message.text.split())
        if text:
            lines.append(f"{speaker}: {text[:HISTORY_MESSAGE_CHARS]}")
    return "\n".join(lines)


@timed("contextualize")
def contextualize(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Set `standalone_question`: the question itself, or its rewrite from the recent conversation."""
    context = run_context(runtime)
    messages = list(state.get("messages") or [])
    history, last_human = split_history(messages)
    question = (state.get("question") or "").strip() or last_human
    if question != last_human:
        history = messages  # the question is not in `messages` yet: every message is history
    turns = recent_turns(history, context.history_turns)
    if not turns:
        return {"standalone_question": question}
    user_texts = [message.text for message in turns if isinstance(message, HumanMessage)]
    fallback = heuristic_standalone(question, user_texts, turn_answers(turns))
    resources = get_resources()
    if resources.strength("generate", context) == "weak":
        return {"standalone_question": fallback}
    prompt = [
        SystemMessage(CONTEXTUALIZE_SYSTEM),
        HumanMessage(CONTEXTUALIZE_PROMPT.format(history=format_history(turns), question=question)),
    ]
    reply, _error, accounting = text_call(
        resources.model("generate", context), prompt, max_tokens=CONTEXTUALIZE_MAX_TOKENS
    )
    conversation = "\n".join(message.text for message in turns)
    rewritten = valid_standalone(reply, question, conversation, context.max_query_chars)
    return merge_updates({"standalone_question": rewritten or fallback}, accounting)
