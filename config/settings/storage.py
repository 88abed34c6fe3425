"""Settings of storage: where data lives, the checkpoints, the tenant and user of a run, the locks, and the
SQL tables and semantic cache (persistence/). One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

CheckpointDurability = Literal["exit", "async", "sync"]


class StorageSettings(BaseModel):
    """Where indexes, checkpoints and tables live and how long their locks wait."""

    data_dir: Path = Field(Path(".rag"), description="Where indexes, caches and checkpoints live.")
    checkpoint_durability: CheckpointDurability = Field(
        "exit",
        description="When a run saves its state (LangGraph's `durability`; a caller's own wins): exit = once "
        "per turn, when the run ends or fails | async / sync = after every step (resumable mid-turn).",
    )
    checkpoint_keep: int = Field(
        10,
        ge=0,
        description="Checkpoints kept per thread after each save (the newest N; 0 = all): each holds the "
        "whole conversation, so keeping all makes every turn cost more. The LangGraph server's saver keeps "
        "at least SERVER_CHECKPOINT_KEEP (persistence/checkpointer.py).",
    )
    chroma_host: str | None = Field(
        None, description="Chroma server host; unset = embedded persistent Chroma."
    )
    chroma_port: int = Field(8000, ge=1, le=65535, description="Chroma server port (with chroma_host).")
    default_tenant: str = Field(
        "default",
        min_length=1,
        description="Tenant every search and graph run is scoped to (the run's context field `tenant`).",
    )
    default_user: str = Field(
        "",
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f]*$",
        description="Who asks, recorded beside the tenant in the SQL rows (context `user_id`, CLI --user, "
        "API user_id; '' = not said); not a scope: the tenant alone decides what is searched.",
    )
    thread_lock_timeout_s: float = Field(
        120.0, ge=0, description="Seconds a turn waits for another turn on its thread (then 'thread busy')."
    )

    @property
    def chroma_dir(self) -> Path:
        """Folder of the embedded Chroma store."""
        return self.data_dir / "chroma"

    @property
    def catalog_path(self) -> Path:
        """SQLite file of the catalog, keyword index and embedding cache."""
        return self.data_dir / "catalog.sqlite"

    @property
    def checkpoint_path(self) -> Path:
        """SQLite file of the LangGraph checkpointer (conversation history)."""
        return self.data_dir / "checkpoints.sqlite"


class TablesSettings(BaseModel):
    """The SQL tables and the semantic cache (persistence/database.py, persistence/semantic_cache.py)."""

    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the tables sessions, conversations, memories, audit_logs and the "
        "semantic cache; unset = sqlite:///<data_dir>/app.sqlite.",
    )
    database_connect_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="Seconds to wait for the database server (RAG_DATABASE_URL=postgresql://...) before a "
        "store-unavailable error (CLI exit 1, HTTP 503).",
    )
    pg_keyword_backend: Literal["bm25", "ts_rank", "ts_rank_cd"] = Field(
        "bm25",
        description="Keyword index on PostgreSQL: bm25 = a postings table ranked like the embedded FTS5 "
        "index | ts_rank / ts_rank_cd = Postgres full text (`python -m benchmarks keyword-backends`).",
    )
    record_turns: bool = Field(
        True, description="Write every answer to the SQL tables (sessions, conversations, audit_logs)."
    )
    price_prompt_per_1k: float | None = Field(
        None,
        ge=0,
        description="Price of 1,000 prompt tokens (any currency) for `rag stats`' token cost; unset with "
        "RAG_PRICE_COMPLETION_PER_1K unset = no cost reported (an unset one of the two counts 0).",
    )
    price_completion_per_1k: float | None = Field(
        None, ge=0, description="Price of 1,000 completion tokens, as RAG_PRICE_PROMPT_PER_1K."
    )
    memory_recall_k: int = Field(
        3,
        ge=0,
        le=20,
        description="Memories recalled into an answer prompt, at most (the question's nearest ones of the "
        "conversation first, then the tenant-wide ones); 0 = memories are never recalled.",
    )
    source_duplicate_similarity: float = Field(
        0.9,
        ge=0.0,
        le=1.0,
        description="Passages of different files whose word sets overlap this much (Jaccard) enter the "
        "answer prompt once (retrieval/near_duplicates.py); 0 = off.",
    )
    cache_enabled: bool = Field(True, description="Answer repeated questions from the semantic cache.")
    cache_similarity: float = Field(
        0.95,
        ge=0.0,
        le=1.0,
        description="Cosine similarity between standalone questions needed for a cache hit (same tenant, "
        "collection, filters, conversation, mode and model).",
    )
    cache_ttl_s: float = Field(3600.0, gt=0, description="Seconds a cached answer stays valid.")
    redis_url: str | None = Field(
        None,
        description="Redis URL for the semantic cache (e.g. redis://localhost:6379/0); unset = SQL table.",
    )
