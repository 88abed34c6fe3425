"""What the Postgres tests (tests/test_postgres_*.py) share: settings that put conversations and tables on a
test database, a small corpus in an embedded knowledge base, and direct reads of the checkpoint tables.

Why the knowledge base stays embedded here: these tests are about conversations, tables and locks; the
catalog and keyword index on Postgres have their own tests (tests/test_shared_index*.py), and keeping them
out keeps a failure here about this code.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.messages import BaseMessage

from config.settings import Settings, load_settings
from nodes.resources import use_resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from tests.conftest import write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel, fake_resources

CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. "
    "Jupiter has 95 known moons; Ganymede is its largest moon. " * 4,
    "mars.md": "# Mars\n\nMars is the fourth planet from the Sun. Mars is red because of iron oxide dust. "
    * 4,
}
#: Tables of LangGraph's Postgres saver.
CHECKPOINT_TABLES = ("checkpoints", "checkpoint_writes", "checkpoint_blobs")


class EchoModel(TaskChatModel):
    """Replies with the prompt it was given: whatever reaches a prompt reaches the output."""

    def _reply(self, task: str, messages: list[BaseMessage]) -> str:
        return " ".join(str(message.content) for message in messages)[:6000]


def pg_settings(root: Path, url: str, **overrides: object) -> Settings:
    """Settings with conversations and app tables on `url` (data folder under `root`, cache off)."""
    overrides.setdefault("data_dir", root / "rag")
    overrides.setdefault("cache_enabled", False)
    return load_settings(database_url=url, **overrides)


@dataclass
class PgWorld:
    """An embedded knowledge base over CORPUS, settings on a Postgres database, and a fake model."""

    settings: Settings
    kb: KnowledgeBase
    model: TaskChatModel

    @contextmanager
    def installed(self) -> Iterator[PgWorld]:
        with use_resources(fake_resources(self.kb, self.model, settings=self.settings, strength="strong")):
            yield self


@contextmanager
def pg_world(
    root: Path, url: str, model: TaskChatModel, corpus: dict[str, str] | None = None, **overrides: object
) -> Iterator[PgWorld]:
    """A PgWorld (its knowledge base closed at the end); `corpus` is ingested for each tenant named in
    `overrides.pop("tenants")` (default: the default tenant)."""
    tenants = overrides.pop("tenants", None) or [None]
    kb = KnowledgeBase(
        load_settings(data_dir=root / "kb"), base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY
    )
    try:
        files = write_corpus(root / "corpus", corpus or CORPUS)
        for tenant in tenants:  # type: ignore[union-attr]
            summary = ingest_paths(kb, list(files.values()), tenant=tenant)
            assert summary.count("indexed") == len(files)
        yield PgWorld(pg_settings(root, url, **overrides), kb, model)
    finally:
        kb.close()


def rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of one query on `url` (a connection of its own: what another process would see)."""
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(sql, params).fetchall()  # type: ignore[arg-type]


def thread_counts(url: str, thread_id: str) -> dict[str, int]:
    """Rows of one thread in each checkpoint table."""
    return {
        table: int(rows(url, f"SELECT COUNT(*) FROM {table} WHERE thread_id = %s", thread_id)[0][0])
        for table in CHECKPOINT_TABLES
    }


def orphan_blobs(url: str) -> int:
    """Channel values no stored checkpoint refers to (what pruning must not leave behind)."""
    return int(
        rows(
            url,
            "SELECT COUNT(*) FROM checkpoint_blobs AS b WHERE NOT EXISTS (SELECT 1 FROM checkpoints AS c "
            "WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
            "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)",
        )[0][0]
    )


def closed_port_url() -> str:
    """A Postgres URL on a loopback port nothing listens on (a server that is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql://rag@127.0.0.1:{port}/rag"
