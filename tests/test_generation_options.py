"""The API's generation fields reach the model through the run's context: temperature (context.temperature),
max_tokens (context.generation_reserve) and system_prompt (context.system_prompt, after the rules)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatResult

from nodes.generate import generate
from prompts.answer import ANSWER_SYSTEM_PROMPTS
from state.context import Context
from state.schemas import RetrievedDoc
from tests.conftest import runtime
from tests.fakes import ScriptedChatModel

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France [1]."
PARIS = RetrievedDoc(
    chunk_id="c1",
    text="Paris is the capital of France.",
    source="/corpus/paris.md",
    title="Paris",
    page=-1,
    doc_id="paris",
    score=1.0,
    relevance=0.9,
    query=QUESTION,
    metadata={},
)


class Sampling(ScriptedChatModel):
    """Records the temperature, completion cap and prompt of each call."""

    temperature: float = 0.0
    max_tokens: int | None = None
    seen: list[tuple[float, int | None, list[BaseMessage]]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append((self.temperature, self.max_tokens, list(messages)))
        return super()._generate(messages, *args, **kwargs)


def test_temperature_max_tokens_and_system_prompt_reach_the_answer_call(install: Any) -> None:
    model = Sampling(messages=iter([AIMessage(ANSWER)]), seen=[])
    install(model)
    context = runtime(
        temperature=0.7,
        generation_reserve=64,
        system_prompt="Answer like a pirate.",
        mode="simple",
        answerer="model",
    )
    update = generate({"question": QUESTION, "documents": [PARIS]}, context)

    assert update["draft"] == ANSWER
    ((temperature, max_tokens, messages),) = model.seen
    assert (temperature, max_tokens) == (0.7, 64)
    system = next(message.content for message in messages if isinstance(message, SystemMessage))
    assert system.startswith(ANSWER_SYSTEM_PROMPTS[("simple", "en")])  # the engine's rules come first
    assert system.endswith("Answer like a pirate.")
    assert model.temperature == 0.0  # the installed model itself is not changed


def test_defaults_keep_the_model_temperature_and_the_plain_prompt(install: Any) -> None:
    model = Sampling(messages=iter([AIMessage(ANSWER)]), temperature=0.2, seen=[])
    install(model)
    generate({"question": QUESTION, "documents": [PARIS]}, runtime(mode="simple"))
    ((temperature, _max_tokens, messages),) = model.seen
    assert temperature == 0.2
    assert messages[0].content == ANSWER_SYSTEM_PROMPTS[("simple", "en")]


@pytest.mark.parametrize("value", [-0.5, 2.5])
def test_out_of_range_temperature_is_refused_naming_the_field(value: float) -> None:
    with pytest.raises(ValueError, match="temperature"):
        Context(temperature=value)
