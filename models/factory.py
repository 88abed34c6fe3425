"""Build the chat models of the engine from the settings: one place that knows the providers.

Grading may use its own model (`RAG_GRADER_*`, each falling back to `RAG_LLM_*`). Instances are cached per
resolved configuration, so nodes call `chat_model()` freely.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel

from config.settings import LLMProvider, ModelStrength, Settings, SettingsError
from models.capability import SelfTest, Strength, measured_strength
from models.errors import ModelUnavailableError
from models.local_catalog import CATALOG as LOCAL_CATALOG
from models.local_catalog import find_model_file
from models.local_llm import get_local_server
from models.self_test_store import SelfTestStore, file_identity, identity_hash

logger = logging.getLogger(__name__)

Role = Literal["generate", "grade"]

#: Default completion cap of the embedded model (unbounded, a small model can repeat itself until the
#: context is full); callers needing more pass `max_tokens`.
LOCAL_MAX_TOKENS = 512
#: Retries with backoff of a model endpoint's call on transport errors (the OpenAI client's default).
LLM_MAX_RETRIES = 2
#: OpenAI clients refuse to start without a key; endpoints that need none (vLLM, llama.cpp) ignore it.
PLACEHOLDER_API_KEY = "not-needed"
#: What to install for `RAG_LLM_PROVIDER=init_chat_model`: it pulls in no package the engine lacks.
LANGCHAIN_INSTALL_HINT = "pip install langchain==1.4.7"


@dataclass(frozen=True)
class ModelSpec:
    """The settings that decide one chat model, resolved for a role; hashable, so it keys the cache."""

    role: Role
    provider: LLMProvider
    model: str
    base_url: str | None
    api_key: str | None
    temperature: float
    timeout_s: float
    max_retries: int


def resolve_spec(settings: Settings, role: Role = "generate") -> ModelSpec:
    """The provider, model and endpoint for a role: grader fields override, unset ones fall back."""
    grading = role == "grade"
    provider = (settings.grader_provider if grading else None) or settings.llm_provider
    model = (settings.grader_model if grading else None) or settings.llm_model
    base_url = (settings.grader_base_url if grading else None) or settings.llm_base_url
    api_key = (settings.grader_api_key if grading else None) or settings.llm_api_key
    if provider == "openai" and not base_url and not api_key:
        prefix = "RAG_GRADER" if grading else "RAG_LLM"
        raise SettingsError(f"{prefix}_PROVIDER=openai needs {prefix}_BASE_URL or {prefix}_API_KEY")
    if grading and provider != "local" and not settings.grader_model and settings.llm_provider == "local":
        # RAG_LLM_MODEL names the embedded model then: not a name a served grader answers to.
        raise SettingsError(f"RAG_GRADER_PROVIDER={provider} needs RAG_GRADER_MODEL (e.g. gpt-4o-mini)")
    return ModelSpec(
        role=role,
        provider=provider,
        model=model,
        base_url=base_url,
        api_key=api_key,
        temperature=settings.llm_temperature,
        timeout_s=settings.llm_timeout_s,
        max_retries=LLM_MAX_RETRIES,
    )


def strength_setting(settings: Settings, role: Role = "generate") -> ModelStrength:
    """`RAG_GRADER_STRENGTH` for the grader when set, else `RAG_LLM_STRENGTH`."""
    if role == "grade" and settings.grader_strength is not None:
        return settings.grader_strength
    return settings.llm_strength


def model_strength(settings: Settings, role: Role = "generate") -> Strength:
    """Whether a role's model gets the LLM paths (analysis, graders, rewriting) or the heuristics.

    `weak` / `strong` are taken as set; `auto` runs the JSON self-test (models/capability.py) once per
    resolved model, stored in the data directory (models/self_test_store.py). A down endpoint raises
    ModelUnavailableError."""
    setting = strength_setting(settings, role)
    if setting != "auto":
        return setting
    spec = resolve_spec(settings, role)
    # a grader on the generator's configuration shares its verdict; the embedded model is known by name
    key: Hashable = (
        ("local", settings.local_model) if spec.provider == "local" else replace(spec, role="generate")
    )
    store = SelfTestStore(settings.data_dir)
    persisted: list[tuple[str, str] | None] = []  # the identity, found on the first process-cache miss

    def load() -> SelfTest | None:
        persisted.append(stored_identity(settings, spec))
        verdict = store.get(persisted[0][0]) if persisted[0] else None
        return verdict.self_test() if verdict else None

    def save(test: SelfTest) -> None:
        if persisted and persisted[0]:
            store.put(*persisted[0], test)

    return measured_strength(key, lambda: chat_model(settings, role), load, save).strength


def stored_identity(settings: Settings, spec: ModelSpec) -> tuple[str, str] | None:
    """The identity hash and label of a model's stored verdict; None when the weights file is missing."""
    if spec.provider == "local":
        model = LOCAL_CATALOG[settings.local_model]
        try:
            path, size, mtime_ns = file_identity(find_model_file(model.name))
        except (ModelUnavailableError, OSError):
            return None
        return identity_hash("local", model.name, model.sha256, path, size, mtime_ns), f"local:{model.name}"
    label = f"{spec.provider}:{spec.model}@{spec.base_url or ''}"
    return identity_hash("endpoint", spec.provider, spec.base_url or "", spec.model), label


_cache: dict[ModelSpec, BaseChatModel] = {}
_cache_lock = threading.Lock()


def chat_model(settings: Settings, role: Role = "generate") -> BaseChatModel:
    """The chat model for a role, created once per configuration (the embedded server starts here)."""
    spec = resolve_spec(settings, role)
    with _cache_lock:
        if spec.provider == "local":
            server = get_local_server(settings)
            # a restarted server has a new port and API key, hence a new cache key and a new client
            spec = replace(spec, model=server.model_alias, base_url=server.base_url, api_key=server.api_key)
        key = replace(spec, role="generate")  # a grader resolved to the generator's config shares it
        model = _cache.get(key)
        if model is None:
            model = _build(spec)
            _cache[key] = model
            logger.info("chat model for %s: %s %s", role, spec.provider, spec.model)
        return model


def _build(spec: ModelSpec) -> BaseChatModel:
    if spec.provider == "local":
        return _openai_client(
            spec,
            api_key=spec.api_key or PLACEHOLDER_API_KEY,  # the embedded server's own key
            max_tokens=LOCAL_MAX_TOKENS,
            stream_usage=True,
            http_async_client=_loop_safe_async_client(),
        )
    if spec.provider == "openai":
        return _openai_client(spec, api_key=spec.api_key or PLACEHOLDER_API_KEY)
    return _init_chat_model(spec)


def _openai_client(spec: ModelSpec, **kwargs: Any) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=spec.model,
        base_url=spec.base_url,
        temperature=spec.temperature,
        timeout=spec.timeout_s,
        max_retries=spec.max_retries,
        **kwargs,
    )


def _loop_safe_async_client() -> Any:
    """An async HTTP client without idle connections: langchain-openai shares one async pool per endpoint
    across the process, and a pooled connection belongs to the event loop that opened it, so after an
    `asyncio.run()` the next loop's first request fails with "Event loop is closed"."""
    import openai

    from core.langgraph_compat import openai_sdk_httpx  # the httpx flavour the installed openai SDK uses

    return openai.DefaultAsyncHttpxClient(limits=openai_sdk_httpx().Limits(max_keepalive_connections=0))


def _init_chat_model(spec: ModelSpec) -> BaseChatModel:
    try:
        init = importlib.import_module("langchain.chat_models").init_chat_model
    except ImportError as error:
        raise ModelUnavailableError(
            f"RAG_LLM_PROVIDER=init_chat_model needs the `langchain` package ({LANGCHAIN_INSTALL_HINT}) and "
            f"the provider's integration package for {spec.model!r}; with only langchain-core installed, "
            "use RAG_LLM_PROVIDER=openai for any OpenAI-compatible endpoint"
        ) from error
    kwargs: dict[str, Any] = {
        "temperature": spec.temperature,
        "timeout": spec.timeout_s,
        "max_retries": spec.max_retries,
    }
    if spec.base_url:
        kwargs["base_url"] = spec.base_url
    if spec.api_key:
        kwargs["api_key"] = spec.api_key
    try:
        model: BaseChatModel = init(spec.model, **kwargs)
    except ImportError as error:
        raise ModelUnavailableError(f"init_chat_model({spec.model!r}): {error}") from error
    return model
