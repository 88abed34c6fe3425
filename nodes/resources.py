"""What nodes use besides state and context: the knowledge base, the searcher and the chat models.

They are process-wide and created lazily (importing the graph needs no model, no key, no store). Tests
install fakes with `use_resources(...)`; the context's `model` / `grader_model` fields pick other models
per run through the same factory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from langchain_core.language_models import BaseChatModel

from config.settings import Settings, get_settings
from models.capability import SelfTest, run_self_test
from models.factory import chat_model, model_strength, resolve_spec, strength_setting
from persistence.process import install_process_resources
from state.context import Context

if TYPE_CHECKING:
    # sqlalchemy and numpy: imported on the first search, not with the graph (tests/test_import_cost.py).
    from retrieval.knowledge_base import KnowledgeBase
    from retrieval.search import PassageSearcher

Role = Literal["generate", "grade"]
Strength = Literal["weak", "strong"]


@dataclass
class Resources:
    """Stores and models of a process. Fields left None are built from settings on first use."""

    settings: Settings
    knowledge_base: KnowledgeBase | None = None
    generator: BaseChatModel | None = None
    grader: BaseChatModel | None = None
    strengths: dict[str, Strength] = field(default_factory=dict)  # per-role strength overrides
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _searcher: PassageSearcher | None = field(default=None, repr=False)
    _self_tests: dict[int, SelfTest] = field(default_factory=dict, repr=False)  # by injected model's id
    _test_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _injected(self, role: Role) -> BaseChatModel | None:
        """The injected model of a role (the grader falls back to the generator)."""
        return (self.grader if role == "grade" else None) or self.generator

    def _settings_for(self, role: Role, context: Context | None) -> Settings:
        override = (context.grader_model if role == "grade" else context.model) if context else ""
        if not override:
            return self.settings
        key = "grader_model" if role == "grade" else "llm_model"
        return self.settings.model_copy(update={key: override})

    def kb(self) -> KnowledgeBase:
        """The knowledge base (opened on first use)."""
        with self._lock:
            if self.knowledge_base is None:
                from retrieval.knowledge_base import KnowledgeBase

                self.knowledge_base = KnowledgeBase.open(self.settings)
            return self.knowledge_base

    def uses_store(self, context: Context | None = None) -> bool:
        """Whether a run reads the knowledge base: not with retrieval off, nor with the mock retriever."""
        enabled = context.retrieval if context is not None else self.settings.retrieval
        return enabled and self.settings.retriever == "store"

    def searcher(self) -> PassageSearcher:
        """The searcher: over the knowledge base, or the mock retriever's passages (RAG_RETRIEVER=mock)."""
        if self._searcher is None:
            from retrieval.mock_retriever import MockSearcher
            from retrieval.search import Searcher

            if self.settings.retriever == "mock":
                self._searcher = MockSearcher(self.settings)
            else:
                self._searcher = Searcher(self.kb())
        return self._searcher

    def model(self, role: Role, context: Context | None = None) -> BaseChatModel:
        """The chat model of a role (an injected one wins; else the factory's, per context override)."""
        return self._injected(role) or chat_model(self._settings_for(role, context), role)

    def model_identity(self, role: Role, context: Context | None = None) -> str:
        """Which model answers a role, as a stable text (the semantic cache's scope); starts no model."""
        injected = self._injected(role)
        if injected is not None:
            name = getattr(injected, "model_name", None) or getattr(injected, "model", None) or ""
            return f"injected:{type(injected).__name__}:{name}"
        spec = resolve_spec(self._settings_for(role, context), role)
        return f"{spec.provider}:{spec.model}@{spec.base_url or ''}"

    def strength(self, role: Role, context: Context | None = None) -> Strength:
        """Whether the role's model gets the LLM paths: an override, else `RAG_LLM_STRENGTH` /
        `RAG_GRADER_STRENGTH`, whose `auto` runs the JSON self-test once per model (models/capability.py)."""
        if role in self.strengths:
            return self.strengths[role]
        injected = self._injected(role)
        if injected is None:
            return model_strength(self._settings_for(role, context), role)
        setting = strength_setting(self.settings, role)
        if setting != "auto":
            return setting
        with self._test_lock:
            test = self._self_tests.get(id(injected))
            if test is None:
                test = run_self_test(injected, supports_json_schema=self.supports_json_schema(role))
                self._self_tests[id(injected)] = test
            return test.strength

    def supports_json_schema(self, role: Role) -> bool:
        """Whether grammar-enforced json_schema output can be asked of this role's model: a factory model
        takes it, an injected one (a fake) is asked for plain JSON."""
        return (self.grader if role == "grade" else self.generator) is None


_default: Resources | None = None
_default_lock = threading.Lock()


def get_resources() -> Resources:
    """The process's resources (from the environment's settings unless `use_resources` installed others)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Resources(get_settings())
        return _default


@contextmanager
def use_resources(resources: Resources) -> Iterator[Resources]:
    """Install `resources` for the duration of a block (tests, benchmarks, notebooks)."""
    global _default
    previous = _default
    _default = resources
    try:
        yield resources
    finally:
        _default = previous


# Persistence cannot import this layer: its functions called without settings use these resources.
install_process_resources(get_resources)
