"""The run's context (`context_schema`): per-run configuration every node reads from `runtime.context`.

One source of defaults: every field's default is the engine's settings (config/settings.py), so the
environment, a `.env` file and Studio all see one value, one default and one range per name. A field that
has a setting of the same name reads it (`top_k` <- RAG_TOP_K, `max_iterations` <- RAG_MAX_ITERATIONS...);
some have a setting of another name (`tenant` <- `default_tenant`, `user_id` <- `default_user`,
`max_question_chars` <- `max_query_chars`, whose settings also accept RAG_TENANT / RAG_MAX_QUESTION_CHARS;
and `use_cache` <- `cache_enabled`, whose
per-run False bypasses the semantic cache). Only `model` and `temperature` are per-run
overrides of a setting without their own default ('' / -1 = RAG_LLM_MODEL / RAG_LLM_TEMPERATURE).
`rag_enabled` reads `enabled` (RAG_ENABLED): in a node, `context.enabled` would not say what is on.

A caller overrides any field per run: `graph.invoke(inputs, context={"mode": "precise"})`; an override is
validated against the setting's own type and range, and a bad one raises ValueError naming `RAG_<FIELD>`.
Without `context=` the nodes get `Context()` (see `run_context`).
"""

from __future__ import annotations

import asyncio
import copy
import os
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from functools import cache, lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from pydantic import TypeAdapter, ValidationError

from config.settings import (
    AnalyzerKind,
    AnswerDecoding,
    Answerer,
    AnswerMode,
    AnswerSource,
    GraderKind,
    Preference,
    RetryStrategy,
    RewriteOverride,
    SearchMode,
    Settings,
    SettingsError,
    load_settings,
)

SearchModeName = SearchMode
#: Context fields whose setting has another name (one field behind both; see config/settings.py aliases).
SETTING_NAMES: dict[str, str] = {
    "tenant": "default_tenant",
    "max_question_chars": "max_query_chars",
    "use_cache": "cache_enabled",
    "user_id": "default_user",
    "rag_enabled": "enabled",
}
#: Context-only fields: per-run overrides whose empty default means "the setting's value".
RUN_OVERRIDES: dict[str, str] = {"model": "llm_model", "temperature": "llm_temperature"}
#: Settings types that are None when unset; the context holds '' for them.
_EMPTY_WHEN_NONE = frozenset({"grader_model"})


def setting_name(context_field: str) -> str | None:
    """The Settings field behind a context field (None for the per-run overrides)."""
    if context_field in RUN_OVERRIDES:
        return None
    return SETTING_NAMES.get(context_field, context_field)


def _rag_variables() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, os.environ[name]) for name in os.environ if name.upper().startswith("RAG_")))


def _environment_key(variables: tuple[tuple[str, str], ...]) -> tuple[Any, ...]:
    """What Settings are read from: the RAG_* variables, the working directory and its `.env` file."""
    cwd = os.getcwd()
    try:
        stat = os.stat(Path(cwd) / ".env")
        dotenv: tuple[float, int] | None = (stat.st_mtime, stat.st_size)
    except OSError:
        dotenv = None
    return variables, cwd, dotenv


@lru_cache(maxsize=8)
def _settings_for(_key: tuple[Any, ...]) -> Settings:
    return load_settings()


#: (RAG_* variables, settings) of the last read: what a Context made inside an event loop reuses.
_latest: tuple[tuple[tuple[str, str], ...], Settings] | None = None


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def default_settings() -> Settings:
    """The settings the context's defaults come from: read like `get_settings()` (environment, then `.env`),
    but re-read when the environment changes, so a Context made after `RAG_TOP_K` changed sees it (tests,
    notebooks). Raises SettingsError naming the variable when the environment is invalid.

    Inside an event loop (the LangGraph server, `ainvoke`) the last read is reused while the RAG_* variables
    are unchanged: looking at the working directory and `.env` there would block the loop, which
    `langgraph dev` refuses (BlockingError). The module reads the settings once when imported, so a server
    that imports the graphs never reads them inside its loop."""
    global _latest
    variables = _rag_variables()
    if _latest is not None and _latest[0] == variables and _in_event_loop():
        return _latest[1]
    settings = _settings_for(_environment_key(variables))
    _latest = (variables, settings)
    return settings


#: The settings of the Context being constructed: read once per construction (in `__new__`), not per field.
_constructing: ContextVar[Settings | None] = ContextVar("_constructing", default=None)


def _from_settings(name: str) -> Any:
    def default() -> Any:
        settings = _constructing.get() or default_settings()
        value = getattr(settings, setting_name(name) or name)
        return "" if value is None and name in _EMPTY_WHEN_NONE else value

    return field(default_factory=default, metadata={"setting": setting_name(name)})


def _override(default: Any, description: str) -> Any:
    return field(default=default, metadata={"description": description, "setting": None})


@dataclass(kw_only=True)
class Context:
    """Configuration of one graph run; defaults from the settings (RAG_<FIELD> / `.env`), overridable per
    run. See config/settings.py for each field's meaning and range."""

    model: str = _override("", "Generation model override ('' = RAG_LLM_MODEL from settings).")
    grader_model: str = _from_settings("grader_model")
    top_k: int = _from_settings("top_k")
    search_mode: SearchModeName = _from_settings("search_mode")
    mode: AnswerMode = _from_settings("mode")
    rewrite: RewriteOverride = _from_settings("rewrite")
    hyde: bool = _from_settings("hyde")
    self_rag: bool = _from_settings("self_rag")
    retry_strategy: RetryStrategy = _from_settings("retry_strategy")
    """What a retrieval retry does: expand (same queries, larger k) | rewrite | both (RAG_RETRY_STRATEGY)."""
    preference: Preference = _from_settings("preference")
    analyzer: AnalyzerKind = _from_settings("analyzer")
    grader: GraderKind = _from_settings("grader")
    max_iterations: int = _from_settings("max_iterations")
    iterative_hops: int = _from_settings("iterative_hops")
    quality_threshold: float = _from_settings("quality_threshold")
    revision_patience: int = _from_settings("revision_patience")
    relevance_threshold: float = _from_settings("relevance_threshold")
    context_token_budget: int = _from_settings("context_token_budget")
    context_share: float = _from_settings("context_share")
    evidence_token_budget: int = _from_settings("evidence_token_budget")
    answer_max_tokens: int = _from_settings("answer_max_tokens")
    answer_confidence_threshold: float = _from_settings("answer_confidence_threshold")
    generation_reserve: int = _from_settings("generation_reserve")
    history_turns: int = _from_settings("history_turns")
    model_context_tokens: int = _from_settings("model_context_tokens")
    query_variants: int = _from_settings("query_variants")
    max_subquestions: int = _from_settings("max_subquestions")
    cross_conversation_share: float = _from_settings("cross_conversation_share")
    max_question_chars: int = _from_settings("max_question_chars")
    tenant: str = _from_settings("tenant")
    user_id: str = _from_settings("user_id")
    """Who asks (RAG_DEFAULT_USER): recorded in the sessions, conversations and audit rows; never a scope."""
    collection: str = _from_settings("collection")
    directory: str = _from_settings("directory")
    """Only documents under this directory are searched (RAG_DIRECTORY; '' = all; see
    retrieval/directory_scope.py)."""
    rag_enabled: bool = _from_settings("rag_enabled")
    """Retrieval on (RAG_ENABLED); False answers from the model alone and says no documents were consulted."""
    temperature: float = _override(-1.0, "Sampling temperature of the answer (-1 = RAG_LLM_TEMPERATURE).")
    system_prompt: str = _from_settings("system_prompt")
    answer_source: AnswerSource = _from_settings("answer_source")
    answerer: Answerer = _from_settings("answerer")
    answer_decoding: AnswerDecoding = _from_settings("answer_decoding")
    use_cache: bool = _from_settings("use_cache")
    """Answer from the semantic cache when an equivalent question was answered before; False bypasses it
    for this run (the cache is used only when RAG_CACHE_ENABLED is on too)."""

    def __new__(cls, *_args: Any, **_kwargs: Any) -> Context:
        _constructing.set(default_settings())
        return super().__new__(cls)

    def __post_init__(self) -> None:
        _constructing.set(None)
        self.validate()

    def validate(self) -> None:
        """Check (and coerce, e.g. "5" -> 5 from JSON) every field against its setting's type and range;
        raise ValueError naming the field and its variable when a value is out of range."""
        for spec in fields(self):
            name = setting_name(spec.name)
            if name is None or (spec.name in _EMPTY_WHEN_NONE and getattr(self, spec.name) == ""):
                continue
            setattr(self, spec.name, _checked(spec.name, name, getattr(self, spec.name)))
        if self.temperature != -1.0 and not 0.0 <= self.temperature <= 2.0:
            raise ValueError(
                f"context field temperature={self.temperature!r} is out of range (RAG_LLM_TEMPERATURE): "
                "-1 (the setting) or 0 to 2"
            )
        engine_limit = default_settings().max_query_chars
        if self.max_question_chars > engine_limit:  # search would refuse the question inside the run
            raise ValueError(
                f"context field max_question_chars={self.max_question_chars!r} is out of range "
                f"(RAG_MAX_QUESTION_CHARS): at most RAG_MAX_QUERY_CHARS={engine_limit}, the longest query "
                "search accepts (a run may only lower it)"
            )
        if self.generation_reserve >= self.model_context_tokens:
            raise ValueError(
                f"context field generation_reserve={self.generation_reserve!r} is out of range "
                "(RAG_GENERATION_RESERVE): must be smaller than "
                f"model_context_tokens={self.model_context_tokens}"
            )


@cache
def _adapter(setting: str) -> tuple[TypeAdapter[Any], tuple[str, ...]]:
    """A validator of one setting's type and constraints (ge/le/min_length...), and its Literal choices."""
    info = Settings.model_fields[setting]
    annotation: Any = info.annotation
    constrained: Any = Annotated[(annotation, *info.metadata)] if info.metadata else annotation
    choices = get_args(annotation) if getattr(annotation, "__origin__", None) is Literal else ()
    return TypeAdapter(constrained), tuple(str(choice) for choice in choices)


def _checked(name: str, setting: str, value: Any) -> Any:
    adapter, choices = _adapter(setting)
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        if choices:
            raise ValueError(f"context field {name}={value!r}: choose one of {', '.join(choices)}") from None
        reason = error.errors()[0].get("msg", "invalid value")
        raise ValueError(
            f"context field {name}={value!r} is out of range (RAG_{name.upper()}): {reason}"
        ) from None


#: (settings, the Context of their defaults): what every node of a run without `context=` gets, built and
#: validated once per settings read instead of once per node call.
_default_context: tuple[Settings, Context] | None = None


def default_context() -> Context:
    """A Context of the defaults (a copy: callers may change it), re-made when the settings are re-read."""
    global _default_context
    settings = default_settings()
    if _default_context is None or _default_context[0] is not settings:
        _default_context = (settings, Context())
    return copy.copy(_default_context[1])


def context_from(value: Any) -> Context:
    """A Context from what a caller passed: a Context, a dict of overrides (the server's JSON), or None."""
    if isinstance(value, Context):
        return value
    if isinstance(value, dict):
        return Context(**value)
    return default_context()


def run_context(runtime: Any) -> Context:
    """The run's Context, whatever the caller passed.

    LangGraph hands nodes `runtime.context = None` when a caller omits `context=` (plain `graph.invoke`,
    `invoke(None, config)` replays, the server without a context): the defaults must apply then, not an
    AttributeError deep inside a node. A dict (the server's JSON) is coerced by LangGraph already, but
    is accepted here too.
    """
    return context_from(getattr(runtime, "context", None))


def run_config() -> RunnableConfig:
    """The run's config ({} outside a run, e.g. a node called directly)."""
    try:
        return get_config()
    except RuntimeError:
        return {}


try:  # read once at import (see default_settings); an invalid environment is reported by Context()
    default_settings()
except SettingsError:
    pass
