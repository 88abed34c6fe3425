"""Per-node timing and LLM accounting, merged into state through the counters' reducers: every node reports
`timings_ms[node]` and model calls `timings_ms["model"]`, `llm_calls` and `usage` the same way."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from models.errors import raise_if_unavailable
from models.structured import StructuredResult, invoke_structured, usage_of, with_max_tokens
from retrieval.answer_text import cut_at_repetition, is_looping
from retrieval.tokens import count_tokens

NodeFunction = Callable[..., dict[str, Any]]


class TimedNode(Protocol):
    """A node wrapped by `timed`: called like the node; `__wrapped__` is the node itself, untimed."""

    __wrapped__: NodeFunction

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, Any]: ...


def timed(name: str) -> Callable[[NodeFunction], TimedNode]:
    """Add `{"timings_ms": {name: ms}}` to the node's update."""

    def decorate(function: NodeFunction) -> TimedNode:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> dict[str, Any]:
            started = time.perf_counter()
            update = function(*args, **kwargs) or {}
            elapsed = (time.perf_counter() - started) * 1000
            timings = dict(update.get("timings_ms") or {})
            timings[name] = timings.get(name, 0.0) + elapsed
            return {**update, "timings_ms": timings}

        return wrapper

    return decorate


def accounting(calls: int, usage: dict[str, int], model_ms: float) -> dict[str, Any]:
    """The state update that records model calls."""
    return {
        "llm_calls": calls,
        "usage": {
            "prompt_tokens": float(usage.get("prompt_tokens", 0)),
            "completion_tokens": float(usage.get("completion_tokens", 0)),
        },
        "timings_ms": {"model": model_ms},
    }


def merge_updates(*updates: dict[str, Any]) -> dict[str, Any]:
    """Merge node updates, summing the numeric dicts (timings, usage) and counters."""
    merged: dict[str, Any] = {}
    for update in updates:
        for key, value in update.items():
            if key in ("timings_ms", "usage") and key in merged:
                merged[key] = {k: merged[key].get(k, 0) + value.get(k, 0) for k in {*merged[key], *value}}
            elif key == "llm_calls" and key in merged:
                merged[key] += value
            else:
                merged[key] = value
    return merged


def structured_call(
    model: BaseChatModel,
    schema: type[BaseModel],
    messages: list[BaseMessage],
    default: BaseModel,
    *,
    json_schema: bool,
    max_tokens: int,
) -> tuple[StructuredResult[Any], dict[str, Any]]:
    """A structured model call that never raises, with its accounting update."""
    started = time.perf_counter()
    result = invoke_structured(
        model, schema, messages, default, supports_json_schema=json_schema, max_tokens=max_tokens
    )
    elapsed = (time.perf_counter() - started) * 1000
    return result, accounting(result.attempts, result.usage, elapsed)


def with_temperature(model: BaseChatModel, temperature: float) -> BaseChatModel:
    """The model sampling at `temperature` (a negative value keeps its own; a model without the field too)."""
    if temperature < 0 or "temperature" not in type(model).model_fields:
        return model
    return model.model_copy(update={"temperature": temperature})


def text_call(
    model: BaseChatModel, messages: list[BaseMessage], *, max_tokens: int
) -> tuple[str, str | None, dict[str, Any]]:
    """A plain text model call: (text, error or None, accounting); only a down endpoint raises."""
    started = time.perf_counter()
    try:
        bound = with_max_tokens(model, max_tokens)
        message = bound.invoke(messages)
        text = str(message.text)
        usage, error = usage_of(message), None
    except Exception as failure:  # noqa: BLE001 - a failed call falls back to a documented default
        raise_if_unavailable(failure, model)
        text, usage, error = "", {}, f"{type(failure).__name__}: {failure}"
    elapsed = (time.perf_counter() - started) * 1000
    return text.strip(), error, accounting(1, usage, elapsed)


#: Streamed pieces between two loop checks of a guarded call (a check re-reads the whole reply so far).
LOOP_CHECK_EVERY = 8
#: What langchain-core raises when a streamed reply had no chunk at all (an empty reply).
EMPTY_STREAM_ERROR = "No generation chunks were returned"
#: (token, log-probability) pairs of a reply, as OpenAI-compatible endpoints return them.
TokenLogprobs = list[tuple[str, float]]


@dataclass(frozen=True)
class GuardedReply:
    """What a guarded text call returns."""

    text: str
    error: str | None
    accounting: dict[str, Any]
    token_logprobs: TokenLogprobs | None  # None when the endpoint returned none (or was not asked)
    stopped_on_loop: bool  # the reply was cut because it started repeating itself


def estimated_usage(messages: list[BaseMessage], pieces: int) -> dict[str, int]:
    """Usage of a streamed reply the endpoint did not account for (tiktoken prompt, a token a piece):
    an endpoint sends a stream's usage in its last chunk, so a reply the loop guard cut would
    count as nothing."""
    return {
        "prompt_tokens": sum(count_tokens(str(message.content)) for message in messages),
        "completion_tokens": pieces,
    }


def token_logprobs_of(message: Any) -> TokenLogprobs | None:
    """The (token, logprob) pairs of a reply's `response_metadata["logprobs"]["content"]`, or None."""
    return token_logprobs_in((getattr(message, "response_metadata", None) or {}).get("logprobs"))


def token_logprobs_in(logprobs: Any) -> TokenLogprobs | None:
    """The (token, logprob) pairs of an OpenAI-compatible `logprobs` object ({"content": [...]}), or None."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    pairs: TokenLogprobs = []
    for item in content:
        if isinstance(item, dict) and isinstance(item.get("logprob"), int | float):
            pairs.append((str(item.get("token", "")), float(item["logprob"])))
    return pairs or None


def guarded_text_call(
    model: BaseChatModel, messages: list[BaseMessage], *, max_tokens: int, logprobs: bool = False
) -> GuardedReply:
    """A streamed text call that stops as soon as the reply loops; raises only for a down endpoint."""
    started = time.perf_counter()
    bound = with_max_tokens(model, max_tokens)
    if logprobs and "logprobs" in type(bound).model_fields:
        bound = bound.model_copy(update={"logprobs": True})
    reply: Any = None
    stopped = False
    error: str | None = None
    pieces = 0
    try:
        for chunk in bound.stream(messages):
            pieces += 1
            reply = chunk if reply is None else reply + chunk
            if pieces % LOOP_CHECK_EVERY == 0 and is_looping(str(reply.text)):
                stopped = True
                break
    except Exception as failure:  # noqa: BLE001 - a failed call falls back to a documented default
        raise_if_unavailable(failure, model)
        if not (reply is None and EMPTY_STREAM_ERROR in str(failure)):  # an empty reply is not an error
            error = f"{type(failure).__name__}: {failure}"
    text = "" if reply is None or error is not None else str(reply.text).strip()
    if stopped:
        text = cut_at_repetition(text)
    usage = usage_of(reply) if reply is not None else {}
    if reply is not None and not usage.get("prompt_tokens"):
        usage = estimated_usage(messages, pieces)
    elapsed = (time.perf_counter() - started) * 1000
    pairs = token_logprobs_of(reply) if reply is not None and error is None else None
    return GuardedReply(text, error, accounting(1, usage, elapsed), pairs, stopped)
