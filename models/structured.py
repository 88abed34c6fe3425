"""Structured output that survives weak models and flaky endpoints.

Strategy: grammar/JSON-schema constrained output when the model supports it, falling back
(`.with_fallbacks`) to a plain JSON prompt (`models.json_prompt`) parsed leniently (`models.lenient`), retried
once (`.with_retry`) with the failure's reason; then the caller's default with `ok=False`. Each attempt is a
Runnable, so traces show it. Garbage never raises; a down endpoint raises `ModelUnavailableError` at once,
because a default would hide an outage behind normal-looking answers.
"""

from __future__ import annotations

import logging
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import BaseModel

from models.errors import raise_if_unavailable
from models.json_prompt import as_messages, with_instruction
from models.lenient import LenientParseError, parse_reply

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

#: Model calls that may produce an answer: the first try and one retry.
MAX_ATTEMPTS = 2
#: How much of the raw reply is kept in logs.
MAX_RAW_IN_LOG = 300


@dataclass
class StructuredResult(Generic[M]):
    """The outcome of a structured call: always a schema instance, and how it was obtained."""

    value: M
    ok: bool
    attempts: int
    raw: str = ""
    error: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    #: Fields taken from the default because the reply lacked them (empty when the reply was complete).
    filled: tuple[str, ...] = ()


def usage_of(message: Any) -> dict[str, int]:
    """Token usage of an AIMessage (`usage_metadata`, else `response_metadata`); zeros when absent."""
    metadata = getattr(message, "usage_metadata", None)
    if metadata:
        return {
            "prompt_tokens": int(metadata.get("input_tokens") or 0),
            "completion_tokens": int(metadata.get("output_tokens") or 0),
        }
    response = getattr(message, "response_metadata", None) or {}
    token_usage = response.get("token_usage") or response.get("usage") or {}
    if isinstance(token_usage, Mapping):
        return {
            "prompt_tokens": int(token_usage.get("prompt_tokens") or token_usage.get("input_tokens") or 0),
            "completion_tokens": int(
                token_usage.get("completion_tokens") or token_usage.get("output_tokens") or 0
            ),
        }
    return {"prompt_tokens": 0, "completion_tokens": 0}


def invoke_structured(
    model: BaseChatModel,
    schema: type[M],
    messages: LanguageModelInput,
    default: M,
    *,
    supports_json_schema: bool,
    max_tokens: int | None = None,
    config: RunnableConfig | None = None,
) -> StructuredResult[M]:
    """Ask `model` for a `schema` instance (`ok=False` and the default when unusable)."""
    tally = _Tally(model, schema, default, as_messages(messages), max_tokens)
    try:
        strategy = _JSON_SCHEMA_THEN_PLAIN if supports_json_schema else _PLAIN
        result = strategy.invoke(tally, config)
    except _Unusable:
        return tally.give_up()
    return typing.cast(StructuredResult[M], result)


@dataclass
class _Outcome:
    """What came back from a call (`replied`: any output; `called`: the model could be set up)."""

    text: str = ""
    parsed: Any = None
    error: str | None = None
    replied: bool = False
    called: bool = True
    usage: dict[str, int] = field(default_factory=dict)


class _Unusable(Exception):
    """An attempt that produced nothing usable, carrying its call's tally for the retry."""

    def __init__(self, tally: _Tally[Any]) -> None:
        super().__init__(tally.error or "no usable reply")
        self.tally = tally


@dataclass
class _Tally(Generic[M]):
    """One structured call: its inputs, and what its attempts spent and saw so far."""

    model: BaseChatModel = field(repr=False)
    schema: type[M]
    default: M
    messages: list[BaseMessage] = field(repr=False)
    max_tokens: int | None
    #: Plain-JSON attempts left; a json_schema reply that could not be used spends one.
    budget: int = MAX_ATTEMPTS
    attempts: int = 0
    raw: str = ""
    #: Why the last attempt failed (the retry prompt tells the model).
    error: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})

    def settle(self, constrained: bool, outcome: _Outcome) -> StructuredResult[M]:
        """An attempt's result, else _Unusable; a refused json_schema request spends no attempt."""
        self.attempts += int(outcome.called)
        self.budget -= int(not constrained or outcome.replied)
        for key in self.usage:
            self.usage[key] += int(outcome.usage.get(key, 0) or 0)
        self.raw = outcome.text or self.raw
        if isinstance(outcome.parsed, self.schema):
            return self._ok(outcome.parsed)
        self.error = outcome.error if outcome.replied or not constrained else None
        if outcome.text or (outcome.replied and not constrained):
            try:
                coerced = parse_reply(outcome.text, self.schema, self.default)
            except LenientParseError as parse_error:
                self.error = str(parse_error)
                logger.info(
                    "unusable reply for %s: %s; raw=%r",
                    self.schema.__name__,
                    self.error,
                    self.raw[:MAX_RAW_IN_LOG],
                )
            else:
                return self._ok(coerced.value, coerced.filled)
        raise _Unusable(self)

    def _ok(self, value: M, filled: tuple[str, ...] = ()) -> StructuredResult[M]:
        return StructuredResult(
            value, ok=True, attempts=self.attempts, raw=self.raw, usage=self.usage, filled=filled
        )

    def give_up(self) -> StructuredResult[M]:
        """The default, `ok=False`, when no attempt is left."""
        logger.warning(
            "structured output for %s failed after %d attempt(s): %s; using the default",
            self.schema.__name__,
            self.attempts,
            self.error,
        )
        return StructuredResult(
            self.default, ok=False, attempts=self.attempts, raw=self.raw, error=self.error, usage=self.usage
        )


def _runnable(tally: _Tally[Any], constrained: bool) -> Runnable[Any, Any] | _Outcome:
    """The runnable for an attempt, or the outcome when the model cannot even be set up for it."""
    limited = with_max_tokens(tally.model, tally.max_tokens)
    if not constrained:
        return limited
    try:
        return limited.with_structured_output(tally.schema, method="json_schema", include_raw=True)
    except (NotImplementedError, ValueError, TypeError) as error:
        return _Outcome(error=f"json_schema output unsupported: {error}", called=False)


def _attempt(tally: _Tally[Any], config: RunnableConfig, *, constrained: bool) -> StructuredResult[Any]:
    """One model call and its result; any failure but a down endpoint is an unusable attempt."""
    runnable = _runnable(tally, constrained)
    if isinstance(runnable, _Outcome):
        return tally.settle(constrained, runnable)
    prompt = tally.messages if constrained else with_instruction(tally.messages, tally.schema, tally.error)
    try:
        outcome = _read(constrained, runnable.invoke(prompt, config))
    except Exception as error:  # noqa: BLE001 - a down endpoint raises; any other failure is a failed attempt
        raise_if_unavailable(error, tally.model)
        outcome = _failure(error)
    return tally.settle(constrained, outcome)


def _attempt_left(error: BaseException) -> bool:
    """Retry a plain attempt while the call has budget (an outage or a bug is never retried)."""
    return isinstance(error, _Unusable) and error.tally.budget > 0


def _step(name: str, *, constrained: bool) -> Runnable[_Tally[Any], StructuredResult[Any]]:
    return RunnableLambda(partial(_attempt, constrained=constrained), name=name)


#: Plain JSON: the first try and, while budget is left, one retry whose prompt says what went wrong.
_PLAIN = _step("plain_json", constrained=False).with_retry(
    retry_if_exception_type=_attempt_left, wait_exponential_jitter=False, stop_after_attempt=MAX_ATTEMPTS
)
#: Grammar-constrained output first; an unusable reply or a refused request falls back to plain JSON.
_JSON_SCHEMA_THEN_PLAIN = _step("json_schema", constrained=True).with_fallbacks(
    [_PLAIN], exceptions_to_handle=(_Unusable,)
)


def with_max_tokens(model: BaseChatModel, max_tokens: int | None) -> BaseChatModel:
    """A copy with a completion cap (`with_structured_output` drops `.bind()` arguments)."""
    if max_tokens is None:
        return model
    if "max_tokens" in type(model).model_fields:
        return model.model_copy(update={"max_tokens": max_tokens})
    return model


def _read(constrained: bool, result: Any) -> _Outcome:
    """Turn a call's return value into an outcome (`include_raw` dict for constrained calls)."""
    if constrained and isinstance(result, Mapping):
        message = result.get("raw")
        parsing_error = result.get("parsing_error")
        return _Outcome(
            text=_text_of(message),
            parsed=result.get("parsed"),
            error=f"invalid structured reply: {parsing_error}" if parsing_error else None,
            replied=message is not None,
            usage=usage_of(message),
        )
    return _Outcome(text=_text_of(result), replied=True, usage=usage_of(result))


def _failure(error: Exception) -> _Outcome:
    """An exception from a call as an outcome (a length error still carries the cut reply)."""
    text, usage = _salvage(error)
    logger.info("model call failed: %s: %s", type(error).__name__, error)
    return _Outcome(text=text, error=f"{type(error).__name__}: {error}", replied=bool(text), usage=usage)


def _salvage(error: Exception) -> tuple[str, dict[str, int]]:
    completion: Any = getattr(error, "completion", None)  # openai.LengthFinishReasonError's, else none
    try:
        text = str(completion.choices[0].message.content or "")
    except (AttributeError, IndexError, TypeError):
        return "", {}
    usage = getattr(completion, "usage", None)
    return text, {
        "prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
    }


def _text_of(message: Any) -> str:
    """The text of a reply (a message's string or text blocks; langchain-core's `.text`)."""
    if isinstance(message, BaseMessage):
        return str(message.text)
    return "" if message is None else str(message)
