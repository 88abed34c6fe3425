"""The engine's settings: one `Settings` (pydantic-settings, `RAG_*` variables and `.env`) and one reader.

`get_settings()` reads the environment (cached, reader.py); `load_settings(**overrides)` builds settings with
explicit overrides. Fields live in one module per concern; every name is re-exported here.
"""

from config.settings.api import API_TIMEOUT_MAX_S
from config.settings.engine import ENV_PREFIX, Settings, SettingsError, load_settings
from config.settings.ingest import (
    EMBEDDING_WINDOWS,
    POOLED_CHUNK_MAX_TOKENS,
    POOLED_PROVIDERS,
    Chunker,
    EmbeddingProvider,
    SemanticBreakpoint,
    chunk_size_limit,
    parse_separators,
)
from config.settings.language_models import DEFAULT_LOCAL_MODEL, LLMProvider, LocalModelName, ModelStrength
from config.settings.reader import SETTINGS_READS_KEPT, SettingsReader, get_settings
from config.settings.runs import (
    AnalyzerKind,
    AnswerDecoding,
    Answerer,
    AnswerMode,
    AnswerSource,
    GraderKind,
    Preference,
    RetryStrategy,
    RewriteOverride,
)
from config.settings.search import RetrieverKind, SearchMode
from config.settings.storage import CheckpointDurability

__all__ = [
    "API_TIMEOUT_MAX_S",
    "DEFAULT_LOCAL_MODEL",
    "EMBEDDING_WINDOWS",
    "ENV_PREFIX",
    "POOLED_CHUNK_MAX_TOKENS",
    "POOLED_PROVIDERS",
    "SETTINGS_READS_KEPT",
    "AnalyzerKind",
    "AnswerDecoding",
    "AnswerMode",
    "AnswerSource",
    "Answerer",
    "CheckpointDurability",
    "Chunker",
    "EmbeddingProvider",
    "GraderKind",
    "LLMProvider",
    "LocalModelName",
    "ModelStrength",
    "Preference",
    "RetrieverKind",
    "RetryStrategy",
    "RewriteOverride",
    "SearchMode",
    "SemanticBreakpoint",
    "Settings",
    "SettingsError",
    "SettingsReader",
    "chunk_size_limit",
    "get_settings",
    "load_settings",
    "parse_separators",
]
