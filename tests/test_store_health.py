"""A lost vector store, a damaged keyword index or catalog, and `rag doctor`.

Why these matter: Chroma is a derived index that can vanish on its own (a deleted folder), and before this
the loss was silent (dense search found nothing, hybrid quietly became BM25) and never rebuilt. The catalog
holds every chunk's text, so the engine must notice the gap, say so, and rebuild the vectors from it.

"Deleted folder" here means what an operator does between two runs: the folder is removed while no engine
process holds it, so each test drops this process's cached Chroma clients as a new process would start.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import chromadb
import pytest
from typer.testing import CliRunner

import persistence.vector_store as vector_store
from config.settings import Settings
from persistence.catalog import KeywordIndexDamagedError
from retrieval import store_health
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from service.cli import app
from service.doctor import run_doctor
from tests.conftest import REPO_ROOT, write_corpus
from tests.fake_openai import FakeOpenAIServer
from tests.fakes import HashEmbeddings
from tests.helpers.api_server import free_port

CORPUS = {
    "heron.md": "# Heron\n\nThe patient heron waits by the reeds for silver fish at dawn.",
    "mars.md": "# Mars\n\nMars looks red because iron oxide covers its dusty surface.",
    "notes/tides.md": "# Tides\n\nThe moon pulls the oceans into two bulges, and the tides follow.",
}
RAG = REPO_ROOT / ".venv" / "bin" / "rag"


@pytest.fixture(autouse=True)
def _fresh_store_checks() -> None:
    """The once-per-process drift check must run in every test."""
    store_health.reset_checks()


def delete_chroma_folder(settings: Settings) -> None:
    """Remove the Chroma folder and forget this process's clients of it (as a new process would start)."""
    shutil.rmtree(settings.chroma_dir)
    vector_store._clients.clear()
    chromadb.api.client.SharedSystemClient.clear_system_cache()


@pytest.fixture
def indexed(tmp_path: Path, settings: Settings, make_kb: Callable[..., KnowledgeBase]) -> KnowledgeBase:
    """A knowledge base with the corpus ingested (3 chunks), closed as a finished process leaves it."""
    kb = make_kb(settings)
    summary = ingest_paths(kb, [write_corpus(tmp_path / "docs", CORPUS)["heron.md"].parent])
    assert summary.count("indexed") == 3 and summary.chunks == 3
    kb.close()
    return kb


def dense_ids(kb: KnowledgeBase, query: str) -> list[str]:
    return [hit.chunk_id for hit in Searcher(kb).search(query, mode="dense", k=10).hits]


def use_kb(monkeypatch: pytest.MonkeyPatch, settings: Settings, kb: KnowledgeBase) -> None:
    """Make the CLI open this knowledge base (fake embeddings) on these settings."""
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, _settings=None: kb))


# --- detection and repair through the Python API ---------------------------------------------------------


def test_deleted_chroma_folder_is_detected_as_disagreement(
    indexed: KnowledgeBase, settings: Settings, make_kb: Callable[..., KnowledgeBase]
) -> None:
    delete_chroma_folder(settings)
    kb = make_kb(settings)
    (drift,) = store_health.vector_drift(kb)
    assert (drift.tenant, drift.collection) == ("default", "default")
    assert (drift.catalog_chunks, drift.vectors, drift.missing) == (3, 0, 3)
    warnings: list[str] = []
    assert dense_ids(kb, "heron reeds") == []  # the loss itself: dense search finds nothing
    kb.warn = warnings.append
    store_health.reset_checks()
    Searcher(kb).search("heron", mode="hybrid")
    Searcher(kb).search("heron", mode="hybrid")
    assert len(warnings) == 1, warnings  # once per process, not per search
    assert "lacks 3 of 3 chunks" in warnings[0] and "rag ingest" in warnings[0]
    assert str(settings.chroma_dir) in warnings[0]


def test_a_healthy_store_gives_no_warning(indexed: KnowledgeBase, settings: Settings) -> None:
    warnings: list[str] = []
    assert store_health.warn_once(indexed, warnings.append) is None
    assert warnings == []


def test_ingest_restores_lost_vectors_from_the_catalog_through_the_cache(
    indexed: KnowledgeBase, settings: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    delete_chroma_folder(settings)
    model = HashEmbeddings()
    kb = make_kb(settings, model)
    other = write_corpus(tmp_path / "other", {"owl.md": "# Owl\n\nThe barn owl hunts mice at night."})
    summary = ingest_paths(kb, [other["owl.md"]])
    assert summary.vectors_restored == 3
    assert summary.as_dict()["vectors_restored"] == 3
    # The three restored chunks came from the embedding cache: the model embedded only the new file.
    assert model.document_calls == 1 and len(model.embedded_texts) == 1
    assert "owl" in model.embedded_texts[0]
    assert store_health.vector_drift(kb) == []
    assert len(dense_ids(kb, "heron reeds")) == 4


def test_ingest_of_unchanged_files_also_repairs(
    indexed: KnowledgeBase, settings: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    """`rag ingest` of the same folder skips every file (unchanged hashes) and still rebuilds the vectors."""
    delete_chroma_folder(settings)
    kb = make_kb(settings)
    summary = ingest_paths(kb, [tmp_path / "docs"])
    assert summary.count("skipped") == 3
    assert summary.vectors_restored == 3
    assert len(dense_ids(kb, "tides moon")) == 3


def test_one_lost_collection_of_two_tenants_is_repaired_alone(
    settings: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    kb = make_kb(settings)
    docs = write_corpus(tmp_path / "docs", CORPUS)
    ingest_paths(kb, [docs["heron.md"]], tenant="alpha")
    ingest_paths(kb, [docs["mars.md"], docs["notes/tides.md"]], tenant="bravo")
    kb.vectors.delete("bravo", "default", sorted(kb.catalog.chunk_ids("bravo", "default"))[:1])
    (drift,) = store_health.vector_drift(kb)
    assert (drift.tenant, drift.missing) == ("bravo", 1)
    assert store_health.repair_vectors(kb).restored == 1
    assert store_health.vector_drift(kb) == []
    assert kb.vectors.ids("bravo", "default") == kb.catalog.chunk_ids("bravo", "default")


# --- rag doctor ---------------------------------------------------------------------------------------------


def doctor_json(*args: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(app, ["doctor", "--json", *args])
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout)


def statuses(report: dict[str, object]) -> dict[str, str]:
    return {check["store"]: check["status"] for check in report["checks"]}  # type: ignore[index,union-attr]


def test_doctor_on_a_healthy_store_exits_0(
    indexed: KnowledgeBase, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_kb(monkeypatch, settings, indexed)
    code, report = doctor_json()
    assert code == 0
    assert report["healthy"] is True
    assert statuses(report) == {
        "catalog": "ok",
        "keyword index": "ok",
        "vectors": "ok",
        "checkpoints": "ok",
    }
    catalog = next(c for c in report["checks"] if c["store"] == "catalog")  # type: ignore[union-attr]
    assert catalog["counts"] == {"documents": 3, "chunks": 3}


def test_doctor_on_an_empty_data_folder_exits_0(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    assert "nothing ingested yet" in result.stdout


def test_doctor_reports_and_repairs_a_deleted_chroma_folder(
    indexed: KnowledgeBase,
    settings: Settings,
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    delete_chroma_folder(settings)
    kb = make_kb(settings)
    use_kb(monkeypatch, settings, kb)

    code, report = doctor_json()
    assert code == 1 and report["healthy"] is False
    vectors = next(c for c in report["checks"] if c["store"] == "vectors")  # type: ignore[union-attr]
    assert vectors["status"] == "damaged"
    assert vectors["counts"] == {"chunks": 3, "missing": 3, "strays": 0}
    assert "rag doctor --repair" in vectors["detail"]
    assert dense_ids(kb, "heron reeds") == []

    result = CliRunner().invoke(app, ["doctor", "--repair"])
    assert result.exit_code == 0, result.output
    assert "restored 3" in result.stdout

    found = dense_ids(kb, "heron reeds")
    assert sorted(found) == sorted(kb.catalog.chunk_ids("default", "default"))
    code, report = doctor_json()
    assert code == 0 and statuses(report)["vectors"] == "ok"


def test_doctor_repair_removes_stray_vectors(
    indexed: KnowledgeBase, settings: Settings, make_kb: Callable[..., KnowledgeBase]
) -> None:
    """A vector without a catalog row (a crash between the two writes) is harmless to search but reported;
    --repair removes it."""
    from core.types import Chunk

    kb = make_kb(settings)
    stray = Chunk("stray-1", "orphan", {"tenant": "default"})
    kb.vectors.upsert("default", "default", [stray], kb.embeddings.embed_documents(["orphan"]))
    report = run_doctor(settings, kb=kb)
    vectors = next(f for f in report.findings if f.store == "vectors")
    assert (vectors.status, vectors.counts["strays"]) == ("damaged", 1)
    repaired = run_doctor(settings, repair=True, kb=kb)
    assert repaired.healthy
    assert "stray-1" not in kb.vectors.ids("default", "default")


def corrupt_keyword_index(settings: Settings) -> None:
    """Overwrite FTS5's index blocks (not the chunk rows) with random bytes."""
    with sqlite3.connect(settings.catalog_path) as connection:
        connection.execute("UPDATE chunk_terms_data SET block = randomblob(length(block)) WHERE id > 10")


def test_corrupt_keyword_index_is_named_and_rebuilt_by_doctor(
    indexed: KnowledgeBase,
    settings: Settings,
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corrupt_keyword_index(settings)
    kb = make_kb(settings)
    with pytest.raises(KeywordIndexDamagedError, match="rag doctor --repair"):
        Searcher(kb).search("heron", mode="bm25")

    use_kb(monkeypatch, settings, kb)
    search = CliRunner().invoke(app, ["search", "heron", "--mode", "bm25"])
    assert search.exit_code == 1
    assert "keyword index" in search.stderr and str(settings.catalog_path) in search.stderr
    assert "Traceback" not in search.output

    code, report = doctor_json()
    assert code == 1 and statuses(report)["keyword index"] == "damaged"
    assert statuses(report)["catalog"] == "ok"  # the chunks themselves are intact

    code, report = doctor_json("--repair")
    assert code == 0 and statuses(report)["keyword index"] == "repaired"
    hits = Searcher(kb).search("heron", mode="bm25").hits
    assert [Path(str(hit.metadata["source"])).name for hit in hits] == ["heron.md"]
    assert statuses(doctor_json()[1])["keyword index"] == "ok"


def test_keyword_rows_missing_are_found_and_rebuilt(
    indexed: KnowledgeBase, settings: Settings, make_kb: Callable[..., KnowledgeBase]
) -> None:
    with sqlite3.connect(settings.catalog_path) as connection:
        connection.execute("DELETE FROM chunk_terms WHERE rowid = (SELECT MIN(rowid) FROM chunk_terms)")
    kb = make_kb(settings)
    finding = next(f for f in run_doctor(settings, kb=kb).findings if f.store == "keyword index")
    assert (finding.status, finding.counts["chunks_without_terms"]) == ("damaged", 1)
    run_doctor(settings, repair=True, kb=kb)
    assert kb.catalog.keyword_index_drift() == (0, 0, None)
    assert len(Searcher(kb).search("heron OR mars OR tides", mode="bm25", k=10).hits) == 3


def test_corrupt_catalog_is_named_with_the_rebuild_advice(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.data_dir.mkdir(parents=True)
    settings.catalog_path.write_bytes(b"not a database at all" + bytes(range(256)) * 8)
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    for repair in ([], ["--repair"]):  # nothing can repair it in place; --repair must not overwrite it
        code, report = doctor_json(*repair)
        assert code == 1
        (catalog,) = [c for c in report["checks"] if c["store"] == "catalog"]  # type: ignore[union-attr]
        assert catalog["status"] == "damaged"
        assert str(settings.catalog_path) in catalog["detail"] and "rag ingest" in catalog["detail"]
    assert settings.catalog_path.read_bytes().startswith(b"not a database at all")
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert "damaged" in result.stdout and "Traceback" not in result.output


def test_damaged_checkpoints_are_moved_aside_not_deleted(
    indexed: KnowledgeBase, settings: Settings, make_kb: Callable[..., KnowledgeBase]
) -> None:
    garbage = b"not a checkpoint database" * 100
    settings.checkpoint_path.write_bytes(garbage)
    kb = make_kb(settings)
    finding = next(f for f in run_doctor(settings, kb=kb).findings if f.store == "checkpoints")
    assert finding.status == "damaged"
    repaired = next(f for f in run_doctor(settings, repair=True, kb=kb).findings if f.store == "checkpoints")
    assert repaired.status == "repaired"
    assert not settings.checkpoint_path.exists()
    (aside,) = settings.checkpoint_path.parent.glob(f"{settings.checkpoint_path.name}.damaged-*")
    assert aside.read_bytes() == garbage


def test_doctor_help_documents_exit_codes_and_json() -> None:
    result = CliRunner().invoke(app, ["doctor", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "--json" in text and "--repair" in text
    for code in ("0", "1", "2"):
        assert f"{code} =" in text, text


# --- the installed command in processes --------------------------------------------------------------------
# Embeddings from the fake OpenAI-compatible endpoint (hashed bag of words): the subject is the store, and
# each process would otherwise spend seconds loading torch and MiniLM (the notebook test runs real models).


@pytest.fixture
def embedding_endpoint() -> Iterator[str]:
    with FakeOpenAIServer("unused", free_port()) as fake:
        yield fake.base_url


@pytest.mark.slow
def test_deleted_chroma_folder_through_the_installed_command(tmp_path: Path, embedding_endpoint: str) -> None:
    env = {
        **os.environ,
        "RAG_DATA_DIR": str(tmp_path / "rag"),
        "RAG_EMBEDDING_PROVIDER": "openai",
        "RAG_EMBEDDING_BASE_URL": embedding_endpoint,
        "RAG_EMBEDDING_API_KEY": "test",
    }
    docs = write_corpus(tmp_path / "docs", CORPUS)["heron.md"].parent

    def rag(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(RAG), *args], capture_output=True, text=True, env=env, timeout=300)

    assert rag("ingest", str(docs)).returncode == 0
    shutil.rmtree(tmp_path / "rag" / "chroma")

    search = rag("search", "heron", "--mode", "dense", "--json")
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)["hits"] == []
    assert "lacks 3 of 3 chunks" in search.stderr and "Traceback" not in search.stderr

    doctor = rag("doctor", "--json")
    assert doctor.returncode == 1
    assert statuses(json.loads(doctor.stdout))["vectors"] == "damaged"

    again = rag("ingest", str(docs))
    assert again.returncode == 0, again.stderr
    assert "restored 3 vectors" in again.stderr

    search = rag("search", "heron", "--mode", "dense", "--json")
    assert "heron" in json.loads(search.stdout)["hits"][0]["text"]


def test_a_catalog_created_by_another_process_at_the_same_moment_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight `rag ask` on a new data folder start at once: one process's CREATE TABLE loses the race with
    "table documents already exists" (sqlite). Opening the catalog looks again instead of failing."""
    from sqlalchemy.exc import OperationalError

    import persistence.catalog as catalog_module

    real_create_all = catalog_module.metadata_obj.create_all
    raised: list[bool] = []

    def racing_create_all(bind: object, **kwargs: object) -> None:
        if not raised:  # the other process created the tables between our check and our CREATE
            real_create_all(bind, **kwargs)  # type: ignore[arg-type]
            raised.append(True)
            raise OperationalError("CREATE TABLE documents", {}, Exception("table documents already exists"))
        real_create_all(bind, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog_module.metadata_obj, "create_all", racing_create_all)
    catalog = catalog_module.Catalog(tmp_path / "catalog.sqlite")
    try:
        assert raised == [True] and catalog.count_chunks() == 0
    finally:
        catalog.close()
