"""The run's context (`context_schema`): per-run knobs every node reads from `runtime.context`.

A field's default is the setting of its name (`top_k` <- RAG_TOP_K, or SETTING_NAMES); `model` and
`temperature` default to "the setting" ('' / -1). A per-run override (`context={"mode": "precise"}`) is
checked against the setting's type and range: ValueError naming `RAG_<FIELD>`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # LangGraph is imported when a run reads its config, not by every importer of Context
    from langchain_core.runnables import RunnableConfig

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
    get_settings,
)
from config.settings.checks import checked_value

#: Context fields named for one run (the tenant it is scoped to, who asks, whether it uses the cache)
#: whose setting is the process-wide default, named as one.
SETTING_NAMES = {"tenant": "default_tenant", "use_cache": "cache_enabled", "user_id": "default_user"}
#: Context-only fields: per-run overrides whose empty default means "the setting's value".
RUN_OVERRIDES = {"model": "llm_model", "temperature": "llm_temperature"}


def setting_name(context_field: str) -> str | None:
    """The Settings field behind a context field (None for the per-run overrides)."""
    return None if context_field in RUN_OVERRIDES else SETTING_NAMES.get(context_field, context_field)


class _FromSettings:
    """What a field not given holds until `__post_init__` fills it: one settings read per Context,
    not one per field (each read checks the environment, which made a Context several times slower)."""


def _setting(name: str) -> Any:
    """A field whose default is the setting's value when the Context is made (described as the setting)."""
    description = Settings.model_fields[setting_name(name) or name].description
    return field(default_factory=_FromSettings, metadata={"description": description})  # Studio's form


@dataclass(kw_only=True)
class Context:
    """One graph run's knobs; see config/settings/ (runs.py mostly) for each one's meaning and range."""

    model: str = field(default="", metadata={"description": "Generation model ('' = RAG_LLM_MODEL)."})
    grader_model: str = _setting("grader_model")
    top_k: int = _setting("top_k")
    search_mode: SearchMode = _setting("search_mode")
    mode: AnswerMode = _setting("mode")
    rewrite: RewriteOverride = _setting("rewrite")
    hyde: bool = _setting("hyde")
    self_rag: bool = _setting("self_rag")
    retry_strategy: RetryStrategy = _setting("retry_strategy")
    preference: Preference = _setting("preference")
    analyzer: AnalyzerKind = _setting("analyzer")
    grader: GraderKind = _setting("grader")
    max_iterations: int = _setting("max_iterations")
    iterative_hops: int = _setting("iterative_hops")
    revision_patience: int = _setting("revision_patience")
    relevance_threshold: float = _setting("relevance_threshold")
    context_token_budget: int = _setting("context_token_budget")
    context_share: float = _setting("context_share")
    evidence_token_budget: int = _setting("evidence_token_budget")
    answer_max_tokens: int = _setting("answer_max_tokens")
    generation_reserve: int = _setting("generation_reserve")
    history_turns: int = _setting("history_turns")
    model_context_tokens: int = _setting("model_context_tokens")
    query_variants: int = _setting("query_variants")
    cross_conversation_share: float = _setting("cross_conversation_share")
    max_query_chars: int = _setting("max_query_chars")  # a run may only lower it
    tenant: str = _setting("tenant")
    user_id: str = _setting("user_id")  # who asks: recorded with the turn, never a scope
    collection: str = _setting("collection")
    directory: str = _setting("directory")
    retrieval: bool = _setting("retrieval")
    rerank: bool = _setting("rerank")
    temperature: float = field(
        default=-1.0, metadata={"description": "Sampling temperature (-1 = RAG_LLM_TEMPERATURE)."}
    )
    system_prompt: str = _setting("system_prompt")
    answer_source: AnswerSource = _setting("answer_source")
    answerer: Answerer = _setting("answerer")
    answer_decoding: AnswerDecoding = _setting("answer_decoding")
    focused_read: bool = _setting("focused_read")
    use_cache: bool = _setting("use_cache")  # False bypasses the semantic cache for this run

    def __post_init__(self) -> None:
        """Fill the fields not given from the settings (one read), and check (and coerce, e.g. "5" -> 5 from
        JSON) the given ones against their setting's type and range: ValueError naming the variable."""
        settings = get_settings()
        for spec in fields(self):
            name, value = setting_name(spec.name) or spec.name, getattr(self, spec.name)
            if isinstance(value, _FromSettings):
                setattr(self, spec.name, "" if getattr(settings, name) is None else getattr(settings, name))
            elif spec.name not in RUN_OVERRIDES and not (spec.name == "grader_model" and value == ""):
                label, variable = f"context field {spec.name}", f"RAG_{spec.name.upper()}"
                setattr(self, spec.name, checked_value(name, value, label, variable))
        if self.temperature != -1.0 and not 0.0 <= self.temperature <= 2.0:
            _refuse("temperature", self.temperature, "RAG_LLM_TEMPERATURE", "-1 (the setting) or 0 to 2")
        engine_limit = settings.max_query_chars  # search would refuse a longer question inside the run
        if self.max_query_chars > engine_limit:
            why = f"at most RAG_MAX_QUERY_CHARS={engine_limit}, the longest query search accepts"
            why += " (a run may only lower it)"
            _refuse("max_query_chars", self.max_query_chars, "RAG_MAX_QUERY_CHARS", why)
        if self.generation_reserve >= self.model_context_tokens:
            why = f"must be smaller than model_context_tokens={self.model_context_tokens}"
            _refuse("generation_reserve", self.generation_reserve, "RAG_GENERATION_RESERVE", why)


def _refuse(name: str, value: Any, variable: str, why: str) -> NoReturn:
    raise ValueError(f"context field {name}={value!r} is out of range ({variable}): {why}")


#: (settings, the Context of their defaults): copied by every node of a run without `context=`.
_defaults: tuple[Settings, Context] | None = None


def context_from(value: Any) -> Context:
    """A Context from what a caller passed: a Context, a dict of overrides (the server's JSON), or None."""
    global _defaults
    if isinstance(value, Context):
        return value
    if isinstance(value, dict):
        return Context(**value)
    settings = get_settings()
    if _defaults is None or _defaults[0] is not settings:
        _defaults = (settings, Context())
    return copy.copy(_defaults[1])


def run_context(runtime: Any) -> Context:
    """The run's Context, whatever the caller passed: LangGraph hands nodes `runtime.context = None` when
    a caller omits `context=` (plain `invoke`, replays, the server), and the defaults must apply then."""
    return context_from(getattr(runtime, "context", None))


def run_config() -> RunnableConfig:
    """The run's config ({} outside a run, e.g. a node called directly)."""
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:
        return {}


try:  # read at import, outside any event loop (config/settings/reader.py); Context() reports a bad one
    get_settings()
except SettingsError:
    pass
