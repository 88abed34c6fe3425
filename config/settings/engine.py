"""The one settings object of the engine: the field groups of each concern combined into `Settings`.

Defaults work offline on a 2-core machine; invalid values fail at start naming the variable. What relates
fields of two groups (a chunk size and the embedding model's window) is checked here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from config.settings.api import ApiSettings
from config.settings.conversations import ConversationSettings
from config.settings.ingest import POOLED_PROVIDERS, IngestSettings, chunk_size_limit, parse_separators
from config.settings.language_models import ModelSettings
from config.settings.runs import RunSettings
from config.settings.search import SearchSettings
from config.settings.storage import StorageSettings, TablesSettings

ENV_PREFIX = "RAG_"


class SettingsError(ValueError):
    """Raised when the configuration is invalid; the message names the environment variables to fix."""


# The groups are listed last-first: pydantic orders fields from the furthest base, so `model_fields` (and
# the JSON schema) keep the order storage, ingestion, search, runs, models, API, conversations, tables.
class Settings(
    TablesSettings,
    ConversationSettings,
    ApiSettings,
    ModelSettings,
    RunSettings,
    SearchSettings,
    IngestSettings,
    StorageSettings,
    BaseSettings,
):
    """Engine configuration with offline defaults. Field `x` is read from `RAG_X`."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

    @model_validator(mode="after")
    def _check_relations(self) -> Settings:
        limit = chunk_size_limit(self.embedding_provider)
        if self.chunk_size > limit:
            what = (
                f"the {limit}-token maximum of the '{self.embedding_provider}' embedding model (longer "
                "chunks are embedded by windows up to it)"
                if self.embedding_provider in POOLED_PROVIDERS
                else f"the {limit}-token input window of the '{self.embedding_provider}' embedding model"
            )
            raise ValueError(f"RAG_CHUNK_SIZE={self.chunk_size} exceeds {what} (RAG_EMBEDDING_PROVIDER)")
        parse_separators(self.separator)
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(
                f"RAG_CHUNK_OVERLAP={self.chunk_overlap} must be smaller than "
                f"RAG_CHUNK_SIZE={self.chunk_size}"
            )
        if self.embedding_provider == "openai" and not self.embedding_base_url and not self.embedding_api_key:
            raise ValueError(
                "RAG_EMBEDDING_PROVIDER=openai needs RAG_EMBEDDING_BASE_URL or RAG_EMBEDDING_API_KEY"
            )
        if self.llm_provider == "openai" and not self.llm_base_url and not self.llm_api_key:
            raise ValueError("RAG_LLM_PROVIDER=openai needs RAG_LLM_BASE_URL or RAG_LLM_API_KEY")
        if self.llm_provider != "local" and not self.llm_model.strip():
            # Why no default: an embedded model's name (the old default) is not what an OpenAI-compatible
            # server answers to, and the first call would fail far from the cause.
            example = "openai:gpt-4o-mini" if self.llm_provider == "init_chat_model" else "gpt-4o-mini"
            raise ValueError(
                f"RAG_LLM_PROVIDER={self.llm_provider} needs RAG_LLM_MODEL: the model name the endpoint "
                f"serves (e.g. {example})"
            )
        if self.generation_reserve >= self.model_context_tokens:
            raise ValueError(
                f"RAG_GENERATION_RESERVE={self.generation_reserve} must be smaller than "
                f"RAG_MODEL_CONTEXT_TOKENS={self.model_context_tokens}"
            )
        return self

    @property
    def models_dir(self) -> Path:
        """Folder of local sentence-transformers models looked up by name (RAG_EMBEDDING_MODELS_DIR)."""
        return self.embedding_models_dir or self.data_dir / "models"


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        field = ".".join(str(part) for part in item.get("loc", ()))
        message = item.get("msg", "invalid value")
        if field:
            lines.append(f"{ENV_PREFIX}{field.upper()}: {message} (got {item.get('input')!r})")
        else:
            lines.append(message.removeprefix("Value error, "))
    return "invalid settings: " + "; ".join(lines)


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment and overrides; SettingsError naming the bad variable. A fresh read
    each call: the environment's own settings come cached from `get_settings()`."""
    try:
        return Settings(**overrides)  # each value validated by pydantic against its field
    except ValidationError as error:
        raise SettingsError(_describe(error)) from None
