"""Structured output that survives weak models and flaky endpoints.

Graders and routers need a typed answer from every model the engine may be configured with: the
embedded 135M model, an OpenAI-compatible server that may or may not support `response_format`, or any
`init_chat_model` provider. The strategy, shared by the sync and async entry points:

1. If the model supports it, ask for grammar/JSON-schema constrained output (`with_structured_output(...,
   method="json_schema")`). A reply that does not validate is still parsed leniently before giving up.
2. Otherwise, or when that fails, ask the plain model for a JSON object with the fields listed in the
   prompt (`models.json_prompt`) and parse it leniently (`models.lenient`), filling missing fields from a
   caller-given default.
3. One retry, with the reason of the failure appended to the prompt; then the default, `ok=False`.

The strategy is expressed with langchain-core's own combinators: the json_schema attempt `.with_fallbacks`
to the plain attempt, which `.with_retry` runs once more while the call has an attempt left. Each attempt
is a Runnable over the call's tally (what was spent and why the last attempt failed), so traces show every
attempt as a run of its own.

Garbage from the model never raises: the caller gets its default with `ok=False`. An endpoint that is
down does raise: connection refused, timeouts, 5xx or 429 after the client's own retries, a refused key or
an unknown model end the call at once with `ModelUnavailableError` naming the endpoint
(`models.errors.is_model_unavailable`). A default there would hide an outage behind answers that look
normal, and retrying the prompt cannot help.
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
    """Token usage of an AIMessage: `usage_metadata` when the provider fills it, else OpenAI's
    `response_metadata["token_usage"]`; zeros when neither is there."""
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
    """Ask `model` for a `schema` instance; see the module docstring for the strategy. Never raises for
    unusable model output (`ok=False` and `value=default` then); raises ModelUnavailableError when the
    endpoint is down."""
    tally = _Tally(model, schema, default, as_messages(messages), max_tokens)
    try:
        result = _strategy(supports_json_schema).invoke(tally, config)
    except _Unusable:
        return tally.give_up()
    return typing.cast(StructuredResult[M], result)


async def ainvoke_structured(
    model: BaseChatModel,
    schema: type[M],
    messages: LanguageModelInput,
    default: M,
    *,
    supports_json_schema: bool,
    max_tokens: int | None = None,
    config: RunnableConfig | None = None,
) -> StructuredResult[M]:
    """Async `invoke_structured`: same strategy, same guarantees; cancellation still propagates."""
    tally = _Tally(model, schema, default, as_messages(messages), max_tokens)
    try:
        result = await _strategy(supports_json_schema).ainvoke(tally, config)
    except _Unusable:
        return tally.give_up()
    return typing.cast(StructuredResult[M], result)


# --- the strategy as Runnables: a json_schema attempt, falling back to plain JSON with one retry -----------


@dataclass
class _Outcome:
    """What came back from a call; `replied` is False when no model output was produced at all, and
    `called` is False when the model could not even be set up for the call."""

    text: str = ""
    parsed: Any = None
    error: str | None = None
    replied: bool = False
    called: bool = True
    usage: dict[str, int] = field(default_factory=dict)


class _Unusable(Exception):
    """An attempt that produced nothing usable. It carries its call's tally, so that `with_retry` can
    tell whether an attempt is left and the fallback / retry prompt can name what went wrong."""

    def __init__(self, tally: _Tally[Any]) -> None:
        super().__init__(tally.error or "no usable reply")
        self.tally = tally


@dataclass
class _Tally(Generic[M]):
    """One structured call: its inputs, and what its attempts spent and saw so far. It is the input of the
    attempt Runnables, which `with_fallbacks` / `with_retry` run again on the same input."""

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
        """An attempt's result: the validated object or the reply parsed leniently, else _Unusable. A
        json_schema request the endpoint refused spends no plain attempt and is not the model's fault."""
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
    """One model call and its result; any failure but a down endpoint (ModelUnavailableError) is an
    unusable attempt."""
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


async def _aattempt(
    tally: _Tally[Any], config: RunnableConfig, *, constrained: bool
) -> StructuredResult[Any]:
    """Async `_attempt`."""
    runnable = _runnable(tally, constrained)
    if isinstance(runnable, _Outcome):
        return tally.settle(constrained, runnable)
    prompt = tally.messages if constrained else with_instruction(tally.messages, tally.schema, tally.error)
    try:
        outcome = _read(constrained, await runnable.ainvoke(prompt, config))
    except Exception as error:  # noqa: BLE001 - a down endpoint raises; any other failure is a failed attempt
        raise_if_unavailable(error, tally.model)
        outcome = _failure(error)
    return tally.settle(constrained, outcome)


def _attempt_left(error: BaseException) -> bool:
    """Retry a plain attempt while the call has budget (an outage or a bug is never retried)."""
    return isinstance(error, _Unusable) and error.tally.budget > 0


def _step(name: str, *, constrained: bool) -> Runnable[_Tally[Any], StructuredResult[Any]]:
    return RunnableLambda(
        partial(_attempt, constrained=constrained),
        afunc=partial(_aattempt, constrained=constrained),
        name=name,
    )


#: Plain JSON: the first try and, while budget is left, one retry whose prompt says what went wrong.
_PLAIN = _step("plain_json", constrained=False).with_retry(
    retry_if_exception_type=_attempt_left, wait_exponential_jitter=False, stop_after_attempt=MAX_ATTEMPTS
)
#: Grammar-constrained output first; an unusable reply or a refused request falls back to plain JSON.
_JSON_SCHEMA_THEN_PLAIN = _step("json_schema", constrained=True).with_fallbacks(
    [_PLAIN], exceptions_to_handle=(_Unusable,)
)


def _strategy(supports_json_schema: bool) -> Runnable[_Tally[Any], StructuredResult[Any]]:
    return _JSON_SCHEMA_THEN_PLAIN if supports_json_schema else _PLAIN


def with_max_tokens(model: BaseChatModel, max_tokens: int | None) -> BaseChatModel:
    """A copy with a completion cap; a copy, not `.bind()`, because `with_structured_output` on a
    binding drops the bound arguments."""
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
    """An exception from a call (not a down endpoint); the OpenAI client's length error still carries the
    (cut) reply."""
    text, usage = _salvage(error)
    logger.info("model call failed: %s: %s", type(error).__name__, error)
    return _Outcome(
        text=text,
        error=f"{type(error).__name__}: {error}",
        replied=bool(text),
        usage=usage,
    )


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
