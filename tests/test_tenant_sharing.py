"""Nothing the tenants share tells one about another: the embedding cache answers a tenant only from its own
entries, memory ids are opaque and independent per tenant, sources leave the engine without server paths,
and the embedded model's loopback server refuses a request without the process's own key.

Each property is checked where a caller would probe it: the model calls a second tenant's texts cost (the
timing a shared cache would shorten), the ids the API hands out and the answers to another tenant's id,
and the bodies of REST responses (no `str(tmp_path)` anywhere, the data folder being inside it).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine
from typer.testing import CliRunner

from config.settings import Settings
from persistence.database import APP_DB_FILENAME, close_databases, upgrade
from persistence.memories import (
    InvalidMemoryError,
    add_memory,
    delete_memories,
    get_memory,
    list_memories,
    parse_memory_id,
)
from persistence.urls import sqlalchemy_url
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.public_source import public_json, public_source
from service.cli import app as cli_app
from tests.conftest import write_corpus
from tests.fakes import HashEmbeddings
from tests.helpers import model_caches
from tests.helpers.api_server import serve
from tests.helpers.rag_world import QUESTION, World, world
from tests.helpers.storage import cache_entries

TEXTS = ["Herons nest in the reeds by the lake.", "The comet returns every seventy-six years."]
KEYS = "key-alpha:alpha,key-bravo:bravo"
ALPHA = {"X-API-Key": "key-alpha"}
BRAVO = {"X-API-Key": "key-bravo"}
HEX_ID = re.compile(r"[0-9a-f]{16}")


@pytest.fixture
def env(
    settings: Settings, kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    """The fake embeddings and chat model installed over an indexed corpus; the CLI reads the same data."""
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    with world(settings, kb, tmp_path) as built:
        yield built


def fake_model(kb: KnowledgeBase) -> HashEmbeddings:
    model = kb.base_model
    assert isinstance(model, HashEmbeddings)
    return model


# --- the embedding cache ---------------------------------------------------------------------------------


def test_a_tenant_never_gets_another_tenants_cached_vectors(kb: KnowledgeBase) -> None:
    model = fake_model(kb)
    kb.embeddings.for_tenant("alpha").embed_documents(TEXTS)
    assert model.embedded_texts == TEXTS
    model.reset_counts()
    kb.embeddings.for_tenant("bravo").embed_documents(TEXTS)
    assert model.embedded_texts == TEXTS  # every text of bravo's went to the model: no hit from alpha's rows
    model.reset_counts()
    kb.embeddings.for_tenant("alpha").embed_documents(TEXTS)
    kb.embeddings.for_tenant("bravo").embed_documents(TEXTS[:1])
    assert model.embedded_texts == []  # each tenant's repeat is a hit on its own entries
    cache = kb.catalog.embedding_cache
    assert cache_entries(cache, "alpha") == 2 and cache_entries(cache, "bravo") == 2


def test_an_unscoped_embedding_reads_and_writes_no_cache(kb: KnowledgeBase) -> None:
    model = fake_model(kb)
    kb.embeddings.for_tenant("alpha").embed_documents(TEXTS)
    entries = cache_entries(kb.catalog.embedding_cache)
    model.reset_counts()
    kb.embeddings.embed_documents(TEXTS)
    assert model.embedded_texts == TEXTS and cache_entries(kb.catalog.embedding_cache) == entries


def test_uploading_a_copy_of_another_tenants_document_embeds_every_chunk(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    """Through ingestion: bravo's copy of alpha's file costs bravo every model call alpha's cost it (a shared
    cache made it many times faster, which told bravo alpha held the text); alpha's own copy costs none."""
    text = "\n\n".join(
        f"# Part {n}\n\nPart {n} of the harbour log: tide {n * 7} and wind {n * 3}." for n in range(8)
    )
    files = write_corpus(
        tmp_path / "files", {"alpha/log.md": text, "bravo/log.md": text, "alpha/copy.md": text}
    )
    model = fake_model(kb)
    ingest_paths(kb, [files["alpha/log.md"]], tenant="alpha")
    alpha_inputs = list(model.embedded_texts)
    assert alpha_inputs
    model.reset_counts()
    ingest_paths(kb, [files["bravo/log.md"]], tenant="bravo")
    assert model.embedded_texts == alpha_inputs
    model.reset_counts()
    ingest_paths(kb, [files["alpha/copy.md"]], tenant="alpha")
    assert model.embedded_texts == []


# --- memory ids ------------------------------------------------------------------------------------------


def test_memory_ids_are_opaque_independent_per_tenant_and_never_reused(env: World) -> None:
    first = add_memory("The customer prefers metric units.", tenant="alpha")
    second = add_memory("Send the tea order to Lisbon.", tenant="alpha")
    theirs = add_memory("The deadline moved to March.", tenant="bravo")
    ids = [first.id, second.id, theirs.id]
    assert all(HEX_ID.fullmatch(memory_id) for memory_id in ids), ids
    assert len(set(ids)) == 3 and not any(memory_id.isdigit() for memory_id in ids)  # no sequence to count
    assert get_memory(theirs.id, tenant="alpha") is None  # bravo's id: as unknown to alpha as any other
    assert get_memory(theirs.id, tenant="bravo") == theirs
    assert delete_memories(tenant="alpha", memory_ids=[second.id]) == 1
    later = [add_memory(f"Note number {n}.", tenant="alpha").id for n in range(10)]
    assert second.id not in later and first.id not in later  # the integer key is reused by SQLite; ids not
    assert [m.id for m in list_memories(tenant="bravo")] == [theirs.id]


def test_a_memory_id_is_parsed_in_one_place() -> None:
    assert parse_memory_id("0123456789ABCDEF") == "0123456789abcdef"
    assert parse_memory_id(" 42 ") == "42" and parse_memory_id(7) == "7"  # ids of memories made before
    for bad in ("", "xyz", "0123456789abcdeg", "0", "-3", "1" * 20, True, None, 1.5):
        with pytest.raises(InvalidMemoryError, match="^id: "):
            parse_memory_id(bad)


def test_rest_another_tenants_memory_id_is_404_like_an_unknown_one(env: World) -> None:
    with serve(env.settings.model_copy(update={"api_keys": KEYS})) as client:
        theirs = client.post("/api/v1/memories", json={"text": "Bravo's secret plan."}, headers=BRAVO).json()
        mine = client.post("/api/v1/memories", json={"text": "Alpha's note."}, headers=ALPHA).json()
        assert HEX_ID.fullmatch(theirs["id"]) and HEX_ID.fullmatch(mine["id"])
        nobody = "0" * 16 if theirs["id"] != "0" * 16 else "1" * 16
        for method in ("get", "delete"):
            stranger = client.request(method, f"/api/v1/memories/{theirs['id']}", headers=ALPHA)
            unknown = client.request(method, f"/api/v1/memories/{nobody}", headers=ALPHA)
            assert stranger.status_code == unknown.status_code == 404
            shown = stranger.json()
            assert shown == {**unknown.json(), "message": shown["message"]}  # same error, same fields
            assert shown["message"].replace(theirs["id"], nobody) == unknown.json()["message"]
        assert client.get(f"/api/v1/memories/{theirs['id']}", headers=BRAVO).json()["content"] == (
            "Bravo's secret plan."
        )
        malformed = client.get("/api/v1/memories/not-an-id", headers=ALPHA)
        assert malformed.status_code == 422 and malformed.json()["field"] == "id"
        bad_query = client.delete("/api/v1/memories", params={"id": "12ab"}, headers=ALPHA)
        assert bad_query.status_code == 422 and bad_query.json()["field"] == "id"
        assert client.delete(f"/api/v1/memories/{mine['id']}", headers=ALPHA).json()["deleted"] == 1
        assert client.get(f"/api/v1/memories/{mine['id']}", headers=ALPHA).status_code == 404


def test_the_cli_deletes_by_an_opaque_id(env: World) -> None:
    memory = add_memory("Ring the bell at noon.", tenant="alpha")
    other = add_memory("Ring the bell at noon.", tenant="bravo")
    runner = CliRunner()
    refused = runner.invoke(cli_app, ["memory", "delete", other.id, "--tenant", "alpha", "--json"])
    assert refused.exit_code == 0 and json.loads(refused.stdout) == {"deleted": 0}
    done = runner.invoke(cli_app, ["memory", "delete", memory.id, "--tenant", "alpha", "--json"])
    assert done.exit_code == 0 and json.loads(done.stdout) == {"deleted": 1}
    bad = runner.invoke(cli_app, ["memory", "delete", "nope", "--tenant", "alpha"])
    assert bad.exit_code == 2 and "id: 'nope' is not a memory id" in bad.output
    assert get_memory(other.id, tenant="bravo") == other


def test_memories_made_before_opaque_ids_keep_their_number(settings: Settings) -> None:
    """A database at the revision before opaque ids, holding a memory with integer id 1: after the upgrade
    (done when the engine opens it) the memory answers to "1" and new ones get opaque ids."""
    path = settings.data_dir / APP_DB_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(f"sqlite:///{path}")
    upgrade(engine, "0005")
    engine.dispose()
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO memories (id, tenant, conversation_id, kind, content, model_key, metadata_json, "
            "created_at) VALUES (1, 'alpha', '', 'note', 'Kept from before.', '', '{}', '2026-01-01')"
        )
    try:
        kept = get_memory("1", tenant="alpha", settings=settings)
        assert kept is not None and kept.id == "1" and kept.content == "Kept from before."
        assert get_memory(1, tenant="bravo", settings=settings) is None
        assert delete_memories(tenant="alpha", memory_ids=[1], settings=settings) == 1
    finally:
        close_databases()


@pytest.mark.servers
def test_memory_ids_on_postgres(pg_url: str, make_settings: Callable[..., Settings]) -> None:
    """The same ids on a PostgreSQL app database: a database migrated from before opaque ids keeps its
    memory's number; new ids are opaque and another tenant's id finds nothing."""
    engine = create_engine(sqlalchemy_url(pg_url))
    upgrade(engine, "0005")
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO memories (tenant, conversation_id, kind, content, model_key, metadata_json, "
            "created_at) VALUES ('alpha', '', 'note', 'Kept from before.', '', '{}', now())"
        )
    engine.dispose()
    settings = make_settings(database_url=pg_url)
    model = {"embeddings": HashEmbeddings(), "model_key": "fake"}
    try:
        new = add_memory("A new note.", tenant="alpha", settings=settings, **model)
        assert HEX_ID.fullmatch(new.id)
        assert [m.id for m in list_memories(tenant="alpha", settings=settings)] == [new.id, "1"]
        assert get_memory(new.id, tenant="bravo", settings=settings) is None
        assert delete_memories(tenant="bravo", memory_ids=[new.id, "1"], settings=settings) == 0
        assert delete_memories(tenant="alpha", memory_ids=["1"], settings=settings) == 1
    finally:
        close_databases()


# --- sources in public form ------------------------------------------------------------------------------


def test_public_source_rules(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    upload = (data_dir / "uploads" / "alpha" / "notes" / "plan.md").resolve()
    assert public_source(str(upload), tenant="alpha", data_dir=data_dir) == "notes/plan.md"
    assert public_source(str(upload), tenant="bravo", data_dir=data_dir) == "plan.md"  # not bravo's folder
    assert public_source("/srv/corpus/sub/guide.md", tenant="alpha", data_dir=data_dir) == "guide.md"
    for kept in ("text:3f2a", "conversation:c-1", "memory:abc", "faq-12", ""):
        assert public_source(kept, tenant="alpha", data_dir=data_dir) == kept
    nested = {"documents": [{"source": str(upload), "doc_id": str(upload)}], "sources": [str(upload)]}
    assert public_json(nested, tenant="alpha", data_dir=data_dir) == {
        "documents": [{"source": "notes/plan.md", "doc_id": "notes/plan.md"}],
        "sources": ["notes/plan.md"],
    }


def test_rest_responses_about_an_ingested_folder_hold_no_server_path(env: World, tmp_path: Path) -> None:
    """The world's corpus was ingested from a folder under tmp_path: search hits, answers (sources,
    citations), stream events and the document listing name its files without the path."""
    with serve(env.settings) as client:
        replies = [
            client.post("/api/v1/search", json={"query": QUESTION, "top_k": 5}),
            client.post("/api/v1/rag/generate", json={"query": QUESTION}),
            client.post("/api/v1/rag/generate/stream", json={"query": QUESTION}),
            client.post("/api/v1/rag/query", json={"query": QUESTION}),
            client.get("/api/v1/documents"),
        ]
    for reply in replies:
        assert reply.status_code == 200, reply.text
        assert str(tmp_path) not in reply.text, reply.request.url
    hits = replies[0].json()["results"]
    assert hits and {hit["source"] for hit in hits} <= {"jupiter.md", "tea.md"}
    assert all(hit["metadata"]["source"] == hit["source"] == hit["doc_id"] for hit in hits)
    answer = replies[1].json()
    assert answer["sources"] and {source["source"] for source in answer["sources"]} <= {
        "jupiter.md",
        "tea.md",
    }
    assert {doc["source"] for doc in replies[4].json()["documents"]} == {"jupiter.md", "tea.md"}


def test_an_uploads_sources_are_its_place_in_the_upload_folder(env: World, tmp_path: Path) -> None:
    content = b"# Kelp\n\nKelp forests grow along the rocky coast of the cold sea."
    with serve(env.settings) as client:
        uploaded = client.post(
            "/api/v1/documents",
            files={"files": ("kelp.md", content, "text/markdown")},
            data={"collection": "sea"},
        )
        failed = client.post("/api/v1/documents", files={"files": ("empty.md", b"", "text/markdown")})
        found = client.post("/api/v1/search", json={"query": "kelp forests coast", "top_k": 3})
        listed = client.get("/api/v1/documents", params={"collection": "sea"})
        deleted = client.delete("/api/v1/documents", params={"source": "sea/kelp.md"})
        gone = client.post("/api/v1/search", json={"query": "kelp forests coast", "top_k": 3})
    for reply in (uploaded, failed, found, listed, deleted):
        assert str(tmp_path) not in reply.text, reply.text
    assert uploaded.status_code == 200, uploaded.text
    assert [document["source"] for document in uploaded.json()["documents"]] == ["sea/kelp.md"]
    assert failed.status_code == 422 and "empty.md" in failed.text
    assert "sea/kelp.md" in {hit["source"] for hit in found.json()["results"]}
    assert [document["source"] for document in listed.json()["documents"]] == ["sea/kelp.md"]
    assert deleted.status_code == 200 and deleted.json()["sources"] == ["sea/kelp.md"]
    assert "sea/kelp.md" not in {hit["source"] for hit in gone.json()["results"]}


def test_rag_search_json_holds_no_server_path(env: World, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli_app, ["search", QUESTION, "--mode", "bm25", "--json"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)["hits"]
    assert hits and str(tmp_path) not in result.stdout
    assert {hit["metadata"]["source"] for hit in hits} <= {"jupiter.md", "tea.md"}


# --- the embedded model's key ----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_embedded_model_server_refuses_a_request_without_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_settings: object
) -> None:
    from models import factory, local_llm

    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path))
    settings = make_settings(local_n_ctx=1024)  # type: ignore[operator]
    model_caches.shutdown_local_server()
    try:
        server = local_llm.get_local_server(settings)
        assert len(server.api_key) >= 32
        body = {"model": server.model_alias, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        url = f"{server.base_url}/chat/completions"
        assert httpx.post(url, json=body, timeout=60).status_code == 401
        wrong = {"Authorization": "Bearer not-the-key"}
        assert httpx.post(url, json=body, headers=wrong, timeout=60).status_code == 401
        assert httpx.post(url, json=body, headers=server.auth_headers(), timeout=60).status_code == 200
        model = factory.chat_model(settings)  # the engine's own client carries the key
        assert model.bind(max_tokens=2).invoke("Say hi.").content is not None
    finally:
        model_caches.shutdown_local_server()
        model_caches.clear_model_cache()
