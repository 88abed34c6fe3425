"""A small indexed world for the tables, cache and memory tests: two documents per tenant, a scripted chat
model, and the process resources installed over them (fake embeddings, no torch, no server).

Why per tenant: the tables and the cache are scoped by tenant, so the tests need the same question
answerable for two tenants and must see that neither's rows or cached answers reach the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from config.settings import Settings
from nodes.resources import Resources, use_resources
from persistence.database import close_databases
from persistence.long_term_store import close_long_term_stores
from persistence.semantic_cache import reset_cache_counters, reset_semantic_caches
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel, fake_resources

REPLY = "Jupiter is the largest planet in the Solar System [1]."
#: What the engine answers to REPLY: the short answer on its own line first, then the cited sentence.
ANSWER = "Jupiter\n\nJupiter is the largest planet in the Solar System [1]."
QUESTION = "What is the largest planet in the Solar System?"
CORPUS = {
    "jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. It has 95 known moons.",
    "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees for three minutes.",
}


@dataclass
class World:
    """What a test reaches: settings, knowledge base, the fake model, the corpus folder per tenant."""

    settings: Settings
    kb: KnowledgeBase
    model: TaskChatModel
    resources: Resources
    folders: dict[str, Path]

    def generate_calls(self) -> int:
        """How many answers the model wrote (a cache hit writes none)."""
        return self.model.tasks().count("generate")


@contextmanager
def world(
    settings: Settings, kb: KnowledgeBase, root: Path, tenants: tuple[str, ...] = ("default",)
) -> Iterator[World]:
    """The corpus ingested for each tenant and the fake model installed as the process resources."""
    folders = {}
    for tenant in tenants:
        files = write_corpus(root / f"corpus-{tenant}", CORPUS)
        summary = ingest_paths(kb, list(files.values()), tenant=tenant)
        assert summary.count("indexed") == len(CORPUS)
        folders[tenant] = root / f"corpus-{tenant}"
    model = TaskChatModel(replies={"generate": REPLY})
    resources = fake_resources(kb, model, settings=settings)
    reset_semantic_caches()
    reset_cache_counters()
    try:
        with use_resources(resources):
            yield World(settings, kb, model, resources, folders)
    finally:
        reset_semantic_caches()
        close_databases()
        close_long_term_stores()
