"""One tenant's damaged Chroma collection stays that tenant's problem, is reported to it, and is repaired.

The damage is made the way it happens: a record with 12,000 metadata keys written through chromadb itself,
which Chroma accepts into its log but cannot apply to its metadata segment, so once the process restarts,
every count, read or query of that collection fails ("Failed to apply logs to the metadata segment").
Tenant bravo's collection gets it; then, after a restart (this process's Chroma clients dropped, as a new
process would start):
- alpha still ingests and searches (nothing of alpha's reads bravo's collection);
- bravo's search fails with one line naming the collection, its tenant and the repair, not a traceback;
- the API's health with bravo's key says "degraded" naming the collection, with alpha's key "ok", and with
  no key only "up", without calling the model;
- `rag doctor --repair` rebuilds the collection from the catalog (vectors from the embedding cache), exits 0,
  and bravo searches again with the chunk count it had.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import chromadb
import pytest
from typer.testing import CliRunner

import persistence.vector_store as vector_store
from config.settings import Settings
from persistence.errors import StoreUnavailableError
from persistence.vector_store import VectorStore, chroma_client, chroma_collection_name
from retrieval import store_health
from retrieval.chunk_records import embedding_input
from retrieval.embeddings import content_hash
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from service.api.app import create_app
from service.cli import app as cli_app
from service.doctor import COLLECTION_STORE, run_doctor
from tests.conftest import write_corpus
from tests.fakes import HashEmbeddings, TaskChatModel, hashed_vector
from tests.helpers.api_server import serve_app

ALPHA_DOCS = {
    "heron.md": "# Heron\n\nThe patient heron waits by the reeds for silver fish at dawn.",
    "owl.md": "# Owl\n\nThe barn owl hunts mice in the meadow at night.",
}
BRAVO_DOCS = {
    "mars.md": "# Mars\n\nMars looks red because iron oxide covers its dusty surface.",
    "tides.md": "# Tides\n\nThe moon pulls the oceans into two bulges, and the tides follow.",
    "comet.md": "# Comet\n\nA comet grows a tail of gas and dust when it nears the sun.",
}
#: Metadata keys of the record that Chroma accepts but cannot apply (the damage under test).
CORRUPTING_KEYS = 12_000
ALPHA_KEY, BRAVO_KEY = "alpha-key-3f9", "bravo-key-7c2"
HEADERS = {"alpha": {"X-API-Key": ALPHA_KEY}, "bravo": {"X-API-Key": BRAVO_KEY}}


@pytest.fixture(autouse=True)
def _fresh_store_checks() -> Iterator[None]:
    """The once-per-process store checks run in every test; no Chroma client outlives it."""
    store_health.reset_checks()
    yield
    restart()


def restart() -> None:
    """Forget this process's Chroma clients and checks, as a new process starts."""
    vector_store._clients.clear()
    chromadb.api.client.SharedSystemClient.clear_system_cache()
    store_health.reset_checks()


def corrupt(settings: Settings, tenant: str) -> None:
    """Write the corrupting record into `tenant`'s default collection through chromadb directly."""
    handle = chroma_client(settings).get_collection(chroma_collection_name(tenant, "default"))
    record = {f"k{index}": index for index in range(CORRUPTING_KEYS)}
    try:
        handle.upsert(ids=["corrupt"], embeddings=[hashed_vector("x")], documents=["x"], metadatas=[record])
    except chromadb.errors.ChromaError:
        pass  # Chroma raises on the compaction that fails; the record is in its log all the same


def assert_unreadable(settings: Settings, tenant: str) -> None:
    """The collection fails as the damage makes it fail (the precondition of every test here)."""
    handle = chroma_client(settings).get_collection(chroma_collection_name(tenant, "default"))
    with pytest.raises(chromadb.errors.ChromaError, match="metadata segment"):
        handle.count()


class Damaged:
    """A data folder where alpha and bravo ingested, then bravo's collection was damaged and the process
    restarted; `kb` is the new process's knowledge base (with `model`, a fake that records its calls)."""

    def __init__(self, settings: Settings, kb: KnowledgeBase, model: HashEmbeddings, root: Path) -> None:
        self.settings, self.kb, self.model, self.root = settings, kb, model, root
        self.bravo_chunks = kb.catalog.count_chunks("bravo", "default")
        self.alpha_chunks = kb.catalog.count_chunks("alpha", "default")


@pytest.fixture
def damaged(tmp_path: Path, settings: Settings, make_kb: Callable[..., KnowledgeBase]) -> Damaged:
    first = make_kb(settings)
    alpha = ingest_paths(first, list(write_corpus(tmp_path / "alpha", ALPHA_DOCS).values()), tenant="alpha")
    bravo = ingest_paths(first, list(write_corpus(tmp_path / "bravo", BRAVO_DOCS).values()), tenant="bravo")
    assert (alpha.count("indexed"), bravo.count("indexed")) == (2, 3)
    assert first.vectors.count("bravo", "default") == 3
    corrupt(settings, "bravo")
    first.close()
    restart()
    assert_unreadable(settings, "bravo")
    model = HashEmbeddings()
    return Damaged(settings, make_kb(settings, model), model, tmp_path)


def use_kb(monkeypatch: pytest.MonkeyPatch, kb: KnowledgeBase) -> None:
    """Make the CLI open this knowledge base (fake embeddings) on its settings."""
    monkeypatch.setenv("RAG_DATA_DIR", str(kb.settings.data_dir))
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, _settings=None: kb))


def hit_ids(kb: KnowledgeBase, query: str, tenant: str, mode: str = "dense") -> set[str]:
    return {hit.chunk_id for hit in Searcher(kb).search(query, mode=mode, k=10, tenant=tenant).hits}


# --- the damage stays bravo's ------------------------------------------------------------------------------


def test_damage_survives_a_restart(damaged: Damaged) -> None:
    with pytest.raises(StoreUnavailableError):
        damaged.kb.vectors.count("bravo", "default")
    assert damaged.bravo_chunks == 3 and damaged.alpha_chunks == 2


def test_alpha_ingests_and_searches_without_touching_bravos_collection(
    damaged: Damaged, monkeypatch: pytest.MonkeyPatch
) -> None:
    touched: list[tuple[str, str]] = []

    def recorded(original: Callable[..., object]) -> Callable[..., object]:
        def method(self: VectorStore, tenant: str, collection: str, *args: object) -> object:
            touched.append((tenant, collection))
            return original(self, tenant, collection, *args)

        return method

    for name in ("count", "ids", "search"):  # every read of a collection's vectors
        monkeypatch.setattr(VectorStore, name, recorded(getattr(VectorStore, name)))

    new = write_corpus(damaged.root / "alpha-more", {"lark.md": "# Lark\n\nThe lark sings high over fields."})
    summary = ingest_paths(damaged.kb, [new["lark.md"]], tenant="alpha")
    assert summary.count("indexed") == 1 and summary.count("failed") == 0
    assert "lark" in " ".join(damaged.model.embedded_texts)
    assert hit_ids(damaged.kb, "heron reeds", "alpha") and hit_ids(
        damaged.kb, "lark fields", "alpha", "hybrid"
    )
    assert {tenant for tenant, _ in touched} == {"alpha"}, touched
    # bravo's collection was left as it was: still unreadable, until repaired.
    assert store_health.probe_collection(damaged.kb, "bravo", "default").damaged


def test_bravos_search_fails_with_one_clear_line(damaged: Damaged, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StoreUnavailableError) as raised:
        Searcher(damaged.kb).search("red iron", mode="hybrid", tenant="bravo")
    message = str(raised.value)
    assert "'default' of tenant 'bravo'" in message and "rag doctor --repair" in message

    use_kb(monkeypatch, damaged.kb)
    result = CliRunner().invoke(cli_app, ["search", "red iron", "--tenant", "bravo", "--mode", "dense"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "tenant 'bravo'" in result.output and "rag doctor --repair" in result.output
    # bravo's keyword search does not need the damaged collection
    assert hit_ids(damaged.kb, "iron oxide", "bravo", "bm25")


# --- rag doctor --------------------------------------------------------------------------------------------


def test_doctor_names_the_damaged_collection_and_exits_1(damaged: Damaged) -> None:
    report = run_doctor(damaged.settings, kb=damaged.kb)
    assert not report.healthy
    (finding,) = [f for f in report.findings if f.store == COLLECTION_STORE]
    assert finding.status == "damaged" and finding.counts == {"chunks": 3}
    assert "'default' of tenant 'bravo'" in finding.detail and "rag doctor --repair" in finding.detail
    assert "rag_bravo__default" in finding.path
    vectors = next(f for f in report.findings if f.store == "vectors")
    assert vectors.status == "ok" and vectors.counts["chunks"] == 2  # alpha's, compared as usual


def test_doctor_repair_rebuilds_the_collection_from_the_catalog(
    damaged: Damaged, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_kb(monkeypatch, damaged.kb)
    result = CliRunner().invoke(cli_app, ["doctor", "--repair"])
    assert result.exit_code == 0, result.output
    assert "tenant 'bravo'" in result.output and "rebuilt 3 chunks" in result.output
    assert "3 vectors from the embedding cache, 0 embedded again" in result.output
    assert damaged.model.document_calls == 0  # every vector came from the cache

    assert damaged.kb.vectors.count("bravo", "default") == damaged.bravo_chunks
    assert hit_ids(damaged.kb, "red iron oxide", "bravo") == damaged.kb.catalog.chunk_ids("bravo", "default")
    again = CliRunner().invoke(cli_app, ["doctor", "--json"])
    assert again.exit_code == 0, again.output

    restart()  # the rebuilt collection is what the next process finds
    assert damaged.kb.vectors.count("bravo", "default") == 3


def test_repair_embeds_only_the_chunks_without_a_cached_vector(damaged: Damaged) -> None:
    kb = damaged.kb
    chunk = next(
        iter(kb.catalog.chunks_by_id(sorted(kb.catalog.chunk_ids("bravo", "default")), "bravo").values())
    )
    text = embedding_input(str(chunk.metadata.get("title", "")), chunk.text)
    with sqlite3.connect(damaged.settings.catalog_path) as connection:
        deleted = connection.execute(
            "DELETE FROM embedding_cache WHERE content_hash = ?", (content_hash(text),)
        )
        assert deleted.rowcount >= 1

    report = run_doctor(damaged.settings, repair=True, kb=kb)
    assert report.healthy
    (finding,) = [f for f in report.findings if f.store == COLLECTION_STORE]
    assert finding.status == "repaired"
    assert finding.counts == {"chunks": 3, "cached": 2, "embedded": 1}
    assert damaged.model.embedded_texts == [text]
    assert kb.vectors.ids("bravo", "default") == kb.catalog.chunk_ids("bravo", "default")


# --- the API's health --------------------------------------------------------------------------------------


def test_health_is_per_tenant_and_says_only_up_without_a_key(
    damaged: Damaged, install: Callable[..., object]
) -> None:
    model = TaskChatModel(fallback="OK")
    resources = install(model)
    resources.knowledge_base = damaged.kb  # type: ignore[attr-defined]
    keys = f"{ALPHA_KEY}:alpha,{BRAVO_KEY}:bravo"
    app = create_app(damaged.settings.model_copy(update={"api_keys": keys}))
    with serve_app(app) as client:
        public = client.get("/api/v1/rag/health")
        assert (public.status_code, public.json()) == (200, {"status": "up"})
        assert model.calls == []  # no key: the model is never asked

        bravo = client.get("/api/v1/rag/health", headers=HEADERS["bravo"])
        assert bravo.status_code == 200, bravo.text
        body = bravo.json()
        assert (body["status"], body["tenant"]) == ("degraded", "bravo")
        store = body["checks"]["vector_store"]
        assert store["status"] == "degraded"
        assert [item["collection"] for item in store["detail"]["damaged"]] == ["default"]
        assert "rag doctor --repair" in store["detail"]["message"]
        assert body["checks"]["catalog"]["detail"]["chunks"] == 3  # bravo's own, not 5
        assert len(model.calls) == 1  # with a key the model is probed: the fake records it

        alpha = client.get("/api/v1/rag/health", headers=HEADERS["alpha"]).json()
        assert (alpha["status"], alpha["tenant"]) == ("ok", "alpha")
        assert alpha["checks"]["catalog"]["detail"] == {"chunks": 2, "collections": ["default"]}
        assert alpha["checks"]["vector_store"]["detail"] == {"collections": {"default": 2}}
        assert "bravo" not in str(alpha)

        unknown = client.get("/api/v1/rag/health", headers={"X-API-Key": "nope"})
        assert unknown.status_code == 401 and "Traceback" not in unknown.text

        run_doctor(damaged.settings, repair=True, kb=damaged.kb)
        repaired = client.get("/api/v1/rag/health", headers=HEADERS["bravo"]).json()
        assert repaired["status"] == "ok"
        assert repaired["checks"]["vector_store"]["detail"] == {"collections": {"default": 3}}

        # vectors lost without an error (a collection that holds fewer than the catalog's chunks)
        damaged.kb.vectors.delete(
            "alpha", "default", sorted(damaged.kb.catalog.chunk_ids("alpha", "default"))[:1]
        )
        lost = client.get("/api/v1/rag/health", headers=HEADERS["alpha"]).json()
        assert lost["status"] == "degraded"
        detail = lost["checks"]["vector_store"]["detail"]
        assert detail["incomplete"] == [{"collection": "default", "vectors": 1, "catalog_chunks": 2}]
        assert "rag doctor --repair" in detail["message"]


def test_health_without_a_key_says_down_when_a_store_is_down(
    damaged: Damaged, install: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = TaskChatModel(fallback="OK")
    resources = install(model)
    resources.knowledge_base = damaged.kb  # type: ignore[attr-defined]
    app = create_app(damaged.settings.model_copy(update={"api_keys": f"{ALPHA_KEY}:alpha"}))

    def unreachable(_settings: Settings) -> object:
        raise StoreUnavailableError("cannot open the Chroma store at somewhere: refused")

    monkeypatch.setattr(vector_store, "chroma_client", unreachable)
    with serve_app(app) as client:
        reply = client.get("/api/v1/rag/health")
        assert (reply.status_code, reply.json()) == (503, {"status": "down"})
    assert model.calls == []
