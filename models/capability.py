"""Is a chat model strong enough for the LLM paths? Measured, not guessed by provider.

`RAG_LLM_STRENGTH=auto` asks the model one tiny structured question with a known answer
(prompts/capability.py): the right JSON is strong; garbage, a wrong verdict or an incomplete object is weak.
Cached per process and model, and stored through the `load` / `save` callbacks (models/self_test_store.py);
concurrent first users run the test once, and a down endpoint raises ModelUnavailableError and caches nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from models.structured import invoke_structured
from prompts.capability import SELF_TEST_PROMPT, SELF_TEST_SYSTEM

logger = logging.getLogger(__name__)

Strength = Literal["weak", "strong"]

#: Completion cap of the self-test: the JSON object is about 30 tokens.
SELF_TEST_MAX_TOKENS = 64


class SelfTestReply(BaseModel):
    """What the self-test asks for: one verdict per passage, and the year."""

    passage_1: bool = Field(description="true if passage 1 answers the question")
    passage_2: bool = Field(description="true if passage 2 answers the question")
    passage_3: bool = Field(description="true if passage 3 answers the question")
    year: int = Field(description="the year the question asks for")


#: The known answer of SELF_TEST_PROMPT.
EXPECTED = SelfTestReply(passage_1=False, passage_2=True, passage_3=False, year=1931)
#: What a reply that could not be used becomes: wrong on every field, so it can never pass.
UNUSABLE = SelfTestReply(passage_1=True, passage_2=False, passage_3=True, year=0)


@dataclass(frozen=True)
class SelfTest:
    """The outcome of one self-test: the strength it decides, why, and what it cost."""

    strength: Strength
    reason: str
    seconds: float
    attempts: int
    raw: str


def run_self_test(model: BaseChatModel, *, supports_json_schema: bool) -> SelfTest:
    """Ask the self-test question once: strong only for a complete reply equal to the known answer."""
    messages = [SystemMessage(SELF_TEST_SYSTEM), HumanMessage(SELF_TEST_PROMPT)]
    started = time.perf_counter()
    result = invoke_structured(
        model,
        SelfTestReply,
        messages,
        UNUSABLE,
        supports_json_schema=supports_json_schema,
        max_tokens=SELF_TEST_MAX_TOKENS,
    )
    seconds = time.perf_counter() - started
    if not result.ok:
        reason = f"no usable JSON ({result.error})"
    elif result.filled:
        reason = f"incomplete JSON (missing {', '.join(result.filled)})"
    elif result.value != EXPECTED:
        reason = f"wrong answer {result.value.model_dump()} (expected {EXPECTED.model_dump()})"
    else:
        reason = "passed"
    strength: Strength = "strong" if reason == "passed" else "weak"
    return SelfTest(strength, reason, seconds, result.attempts, result.raw)


_results: dict[Hashable, SelfTest] = {}
_locks: dict[Hashable, threading.Lock] = {}
_registry_lock = threading.Lock()


def measured_strength(
    key: Hashable,
    model: Callable[[], BaseChatModel],
    load: Callable[[], SelfTest | None],
    save: Callable[[SelfTest], None],
) -> SelfTest:
    """The self-test of the model `key`, cached for the process (`load` first, then `save`);
    `model` is called only when the test has to run, so a known verdict starts no model."""
    with _registry_lock:
        cached = _results.get(key)
        if cached is not None:
            return cached
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        cached = _results.get(key)
        if cached is not None:
            return cached
        cached = load()
        if cached is None:
            cached = run_self_test(model(), supports_json_schema=True)
            logger.info(
                "model self-test: %s (%s) in %.2fs -> %s", key, cached.reason, cached.seconds, cached.strength
            )
            save(cached)
        with _registry_lock:
            _results[key] = cached
        return cached
