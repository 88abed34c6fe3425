"""Deterministic stand-ins for the embedding and chat models, so tests run in milliseconds without torch.

Why hashed bag-of-words: texts that share words get similar vectors (cosine = shared-word overlap), which is
all the dense path needs to be testable, and the vectors are stable across processes (hashlib, not the
salted built-in `hash`). Calls are counted so tests can prove the embedding cache saved work.

Why a chat model scripted per task (TaskChatModel): graph tests run every node on one fake, and which node
asks what, in which order, depends on routing; recognising the node by its system prompt keeps each script
independent of that order and lets tests assert which nodes called the model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field

from config.settings import Settings
from nodes.resources import Resources, Strength
from prompts.answer import (
    ANSWER_GRADER_SYSTEM,
    ANSWER_SYSTEM_PROMPTS,
    FOCUSED_READ_SYSTEM,
    NO_RETRIEVAL_SYSTEMS,
)
from prompts.grading import RELEVANCE_GRADER_SYSTEM
from prompts.query import (
    ANALYZE_SYSTEM,
    CONTEXTUALIZE_SYSTEM,
    DECOMPOSE_SYSTEM,
    EXPAND_SYSTEM,
    HYDE_SYSTEM,
    MULTI_QUERY_SYSTEM,
    REFORMULATE_SYSTEM,
)
from prompts.rerank import RERANK_SYSTEM
from retrieval.embeddings import EmbeddingError
from retrieval.knowledge_base import KnowledgeBase

FAKE_DIMENSION = 256
#: The embedding-model key fake knowledge bases are built under.
FAKE_MODEL_KEY = "fake"
#: Latin words and single CJK characters (Chinese has no spaces, so characters are the words here).
_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff]")


def _bucket(word: str) -> int:
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % FAKE_DIMENSION


def hashed_vector(text: str) -> list[float]:
    """L2-normalised word counts hashed into FAKE_DIMENSION buckets; a text without words gets bucket 0,
    so no vector is ever zero (Chroma's cosine distance is undefined for a zero vector)."""
    vector = [0.0] * FAKE_DIMENSION
    words = _WORD.findall(text.lower())
    for word in words:
        vector[_bucket(word)] += 1.0
    if not words:
        vector[0] = 1.0
    norm = sum(value * value for value in vector) ** 0.5
    return [value / norm for value in vector]


class HashEmbeddings(Embeddings):
    """Fake embedding model; records every text it was asked to embed."""

    def __init__(self) -> None:
        self.document_calls = 0
        self.query_calls = 0
        self.embedded_texts: list[str] = []

    def reset_counts(self) -> None:
        """Forget the calls so far (after a setup ingest)."""
        self.document_calls = 0
        self.query_calls = 0
        self.embedded_texts = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for passages."""
        self.document_calls += 1
        self.embedded_texts.extend(texts)
        return [hashed_vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """Vector for a query (same space as passages)."""
        self.query_calls += 1
        return hashed_vector(text)


class FailingEmbeddings(Embeddings):
    """A model that is down: every call raises the engine's EmbeddingError."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Always fails."""
        raise EmbeddingError("fake embedding model is down")

    def embed_query(self, text: str) -> list[float]:
        """Always fails."""
        raise EmbeddingError("fake embedding model is down")


# --- chat models -------------------------------------------------------------------------------------------

#: Which node a prompt comes from, told by its system message (every model-calling node has its own).
PROMPT_TASKS: tuple[tuple[str, str], ...] = (
    (CONTEXTUALIZE_SYSTEM, "contextualize"),
    (ANALYZE_SYSTEM, "analyze"),
    (MULTI_QUERY_SYSTEM, "multi"),
    (HYDE_SYSTEM, "hyde"),
    (DECOMPOSE_SYSTEM, "decompose"),
    (EXPAND_SYSTEM, "expand"),
    (REFORMULATE_SYSTEM, "reformulate"),
    (RELEVANCE_GRADER_SYSTEM, "grade_retrieval"),
    (ANSWER_GRADER_SYSTEM, "grade_answer"),
    (FOCUSED_READ_SYSTEM, "focused_read"),
    (RERANK_SYSTEM, "rerank"),
    *((system, "chat") for system in NO_RETRIEVAL_SYSTEMS.values()),
)
#: Answer-writing system prompts (a revision note may follow them), all reported as the "generate" task.
ANSWER_SYSTEMS: tuple[str, ...] = tuple(ANSWER_SYSTEM_PROMPTS.values())

Reply = str | Sequence[str] | Callable[[list[BaseMessage]], str]


def prompt_task(messages: Sequence[BaseMessage]) -> str:
    """The task of a prompt ("analyze", "generate", "grade_answer", ...) from its system message;
    "unknown" when no known system prompt is there."""
    system = next((m.content for m in messages if isinstance(m, SystemMessage)), "")
    if not isinstance(system, str):
        return "unknown"
    for text, task in PROMPT_TASKS:
        if system == text:
            return task
    if system.startswith(ANSWER_SYSTEMS):
        return "generate"
    return "unknown"


class TaskChatModel(BaseChatModel):
    """A chat model scripted per task, so a whole graph can run on it whatever order its nodes call it in.

    Why per task rather than one reply queue: the nodes of a graph run call the model in an order that
    depends on routing (and fan-out), so a single queue would make every test depend on that order. Each
    task's reply is a string (always the same), a list (consumed in order; its last item then repeats) or a
    function of the prompt. Tasks without a reply get `fallback`. Every call is recorded as (task, prompt).
    """

    replies: dict[str, Any] = Field(default_factory=dict)
    fallback: str = "%%%"
    calls: list[tuple[str, list[BaseMessage]]] = Field(default_factory=list)
    served: dict[str, int] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "task-fake"

    def tasks(self) -> list[str]:
        """The tasks of the calls so far, in order."""
        return [task for task, _ in self.calls]

    def prompts(self, task: str) -> list[list[BaseMessage]]:
        """The prompts of one task's calls, in order."""
        return [messages for name, messages in self.calls if name == task]

    def _reply(self, task: str, messages: list[BaseMessage]) -> str:
        script: Reply | None = self.replies.get(task)
        if script is None:
            return self.fallback
        if callable(script):
            return script(messages)
        if isinstance(script, str):
            return script
        index = self.served.get(task, 0)
        self.served[task] = index + 1
        return script[min(index, len(script) - 1)]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        task = prompt_task(messages)
        self.calls.append((task, list(messages)))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._reply(task, messages)))])


class StreamingTaskModel(TaskChatModel):
    """TaskChatModel that streams its reply word by word, as a served model does (so `token` events exist)."""

    def _stream(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        result = self._generate(messages, *args, **kwargs)
        words = str(result.generations[0].message.content).split(" ")
        for index, word in enumerate(words):
            yield ChatGenerationChunk(message=AIMessageChunk(content=word if index == 0 else f" {word}"))


def garbage_model() -> TaskChatModel:
    """A model that answers every prompt with punctuation: neither JSON nor text any node can use."""
    return TaskChatModel(fallback="%%% ### %%%")


class ScriptedChatModel(GenericFakeChatModel):
    """GenericFakeChatModel that records the prompts it receives."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


class BrokenChatModel(ScriptedChatModel):
    """A model whose endpoint is down: every call raises (and is recorded)."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        raise ConnectionError("model endpoint unreachable")


def scripted(*replies: str) -> ScriptedChatModel:
    """A model that answers with `replies` in order."""
    return ScriptedChatModel(messages=iter([AIMessage(reply) for reply in replies]))


def fake_resources(
    kb: KnowledgeBase, model: BaseChatModel, *, settings: Settings | None = None, strength: Strength = "weak"
) -> Resources:
    """Resources over `kb` with `model` as generator and grader, both of `strength` (no self-test)."""
    return Resources(
        settings or kb.settings,
        knowledge_base=kb,
        generator=model,
        grader=model,
        strengths={"generate": strength, "grade": strength},
    )


def fake_resources_factory(model: BaseChatModel) -> Callable[[Settings], Resources]:
    """A resources factory for the benchmarks' own data dirs: `fake_resources` over a hashed-embedding
    knowledge base in the settings' data dir, so an eval runs end to end in milliseconds."""

    def factory(settings: Settings) -> Resources:
        return fake_resources(
            KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY), model
        )

    return factory
