"""Memories (the baseline design's add_memory / search_memories): add, search by meaning, list and delete, per
tenant and per conversation, from Python, the `rag memory` commands and the REST API.

What must hold everywhere: a tenant never sees, finds or deletes another tenant's memories (whatever ids it
passes); a conversation's memories are found within it; bad input is one line naming what was wrong (CLI exit
2, HTTP 422) and stores nothing. Search is by meaning through the knowledge base's embedding model (the fake
bag-of-words one here, so a query sharing words with a memory ranks it first).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from config.settings import Settings
from persistence import memories as memories_module
from persistence.database import APP_DB_FILENAME
from persistence.memories import (
    InvalidMemoryError,
    add_memory,
    delete_memories,
    list_memories,
    search_memories,
)
from retrieval.knowledge_base import KnowledgeBase
from service.cli import app as cli_app
from tests.helpers.api_server import serve
from tests.helpers.rag_world import World, world

UNITS = "The customer prefers metric units in every report."
TEA = "Send the oolong tea order to the Lisbon office."
DEADLINE = "The project deadline moved to the first of March."


@pytest.fixture
def env(
    settings: Settings, kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    """The fake embeddings installed; the CLI reads the same data folder."""
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    with world(settings, kb, tmp_path) as built:
        yield built


def audit(world_: World) -> list[tuple[str, str, dict[str, Any]]]:
    with sqlite3.connect(world_.settings.data_dir / APP_DB_FILENAME) as connection:
        found = connection.execute("SELECT action, tenant, detail FROM audit_logs ORDER BY id").fetchall()
    return [(action, tenant, json.loads(detail)) for action, tenant, detail in found]


# --- Python -----------------------------------------------------------------------------------------------


def test_search_finds_by_meaning_within_the_tenant(env: World) -> None:
    units = add_memory(UNITS, tenant="acme")
    add_memory(TEA, tenant="acme")
    add_memory(DEADLINE, tenant="acme", conversation_id="c-1")
    add_memory("The customer prefers imperial units.", tenant="globex")
    found = search_memories("which units does the customer want", tenant="acme")
    assert found[0].id == units.id and found[0].content == UNITS
    assert [memory.tenant for memory in found] == ["acme"] * 3
    assert found[0].score is not None and found[0].score > found[1].score  # type: ignore[operator]
    assert len(search_memories("units", tenant="acme", k=1)) == 1
    (globex,) = search_memories("which units does the customer want", tenant="globex")
    assert globex.content == "The customer prefers imperial units."


def test_a_conversation_scope_finds_only_that_conversation(env: World) -> None:
    add_memory(UNITS, tenant="acme")
    deadline = add_memory(DEADLINE, tenant="acme", conversation_id="c-1")
    add_memory("The deadline of the other project is in May.", tenant="acme", conversation_id="c-2")
    found = search_memories("when is the deadline", tenant="acme", conversation_id="c-1")
    assert [memory.id for memory in found] == [deadline.id]
    assert [m.content for m in list_memories(tenant="acme", conversation_id="c-1")] == [DEADLINE]
    assert [m.content for m in list_memories(tenant="acme")][
        0
    ] == "The deadline of the other project is in May."
    assert len(list_memories(tenant="acme")) == 3


def test_list_is_newest_first_and_keeps_kind_and_metadata(env: World) -> None:
    add_memory(UNITS, tenant="acme", kind="preference", metadata={"source": "call", "priority": 2})
    add_memory(TEA, tenant="acme")
    newest, oldest = list_memories(tenant="acme")
    assert (newest.content, oldest.content) == (TEA, UNITS)
    assert oldest.kind == "preference" and oldest.metadata == {"source": "call", "priority": 2}
    assert newest.metadata == {} and newest.created_at.endswith("+00:00")


def test_delete_by_id_conversation_or_all_and_never_another_tenants(env: World) -> None:
    theirs = add_memory(UNITS, tenant="globex")
    first = add_memory(UNITS, tenant="acme")
    add_memory(TEA, tenant="acme", conversation_id="c-1")
    add_memory(DEADLINE, tenant="acme", conversation_id="c-1")
    add_memory(DEADLINE, tenant="acme")
    assert delete_memories(tenant="acme", memory_ids=[theirs.id]) == 0  # globex's id: matches nothing
    assert delete_memories(tenant="acme", memory_ids=[first.id]) == 1
    assert delete_memories(tenant="acme", conversation_id="c-1") == 2
    assert [m.content for m in list_memories(tenant="acme")] == [DEADLINE]
    assert delete_memories(tenant="acme", everything=True) == 1
    assert list_memories(tenant="acme") == [] and search_memories("deadline units tea", tenant="acme") == []
    assert [m.id for m in list_memories(tenant="globex")] == [theirs.id]


def test_changes_are_audited(env: World) -> None:
    memory = add_memory(UNITS, tenant="acme", conversation_id="c-1")
    delete_memories(tenant="acme", memory_ids=[memory.id])
    assert audit(env) == [
        ("memory_add", "acme", {"memory_id": memory.id, "kind": "note"}),
        ("memory_delete", "acme", {"deleted": 1, "ids": [memory.id]}),
    ]


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: add_memory("", tenant="acme"), "text: empty"),
        (lambda: add_memory("   \n", tenant="acme"), "text: empty"),
        (lambda: add_memory(UNITS, tenant=""), "tenant:"),
        (lambda: add_memory(UNITS, tenant="bad tenant!"), "tenant:"),
        (lambda: add_memory(UNITS, tenant="a__b"), "tenant:"),
        (lambda: add_memory(UNITS, tenant="acme", conversation_id="c" * 129), "conversation_id:"),
        (lambda: add_memory(UNITS, tenant="acme", metadata={"": 1}), "metadata:"),
        (lambda: add_memory(UNITS, tenant="acme", metadata=[1]), "metadata:"),  # type: ignore[arg-type]
        (lambda: search_memories("", tenant="acme"), "query:"),
        (lambda: search_memories("units", tenant="acme", k=0), "k:"),
        (lambda: search_memories("units", tenant="no spaces please"), "tenant:"),
        (lambda: delete_memories(tenant="acme"), "choose what to delete"),
    ],
)
def test_bad_input_is_refused_and_stores_nothing(env: World, call: Any, fragment: str) -> None:
    with pytest.raises(InvalidMemoryError, match=fragment):
        call()
    assert list_memories(tenant="acme") == []


def test_the_length_limit_is_enforced(env: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memories_module, "MEMORY_MAX_CHARS", 10)
    with pytest.raises(InvalidMemoryError, match="text: at most 10 characters"):
        add_memory(UNITS, tenant="acme", settings=env.settings)


# --- CLI --------------------------------------------------------------------------------------------------


def rag(*arguments: str) -> Any:
    result = CliRunner().invoke(cli_app, ["memory", *arguments])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if "--json" in arguments else result.stdout


def test_cli_memory_commands_end_to_end(env: World) -> None:
    units = rag(
        "add", UNITS, "--tenant", "acme", "--kind", "preference", "--metadata", '{"source": "call"}', "--json"
    )
    assert (units["tenant"], units["kind"], units["metadata"]) == ("acme", "preference", {"source": "call"})
    tea = rag("add", TEA, "--tenant", "acme", "--conversation-id", "c-1", "--json")
    rag("add", "The customer prefers imperial units.", "--tenant", "globex")
    found = rag("search", "which units does the customer want", "--tenant", "acme", "--json")
    assert [memory["id"] for memory in found][:1] == [units["id"]] and {m["tenant"] for m in found} == {
        "acme"
    }
    scoped = rag("search", "tea order", "--tenant", "acme", "--conversation-id", "c-1", "--json")
    assert [memory["id"] for memory in scoped] == [tea["id"]]
    assert [m["id"] for m in rag("list", "--tenant", "acme", "--json")] == [tea["id"], units["id"]]
    assert "prefers metric units" in rag("list", "--tenant", "acme")
    # globex's memory is not acme's to delete
    (globex,) = rag("list", "--tenant", "globex", "--json")
    assert rag("delete", str(globex["id"]), "--tenant", "acme", "--json") == {"deleted": 0}
    assert rag("delete", str(units["id"]), "--tenant", "acme", "--json") == {"deleted": 1}
    assert rag("delete", "--tenant", "acme", "--all", "--json") == {"deleted": 1}
    assert rag("search", "units tea", "--tenant", "acme", "--json") == []
    assert "no memories" in rag("list", "--tenant", "acme")
    assert rag("stats", "--json")["memories"] == 1


def test_cli_default_tenant(env: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_DEFAULT_TENANT", "initech")
    added = rag("add", UNITS, "--json")
    assert added["tenant"] == "initech" and [m["id"] for m in rag("list", "--json")] == [added["id"]]


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["add", ""], "text: empty"),
        (["add", "   "], "text: empty"),
        (["add", UNITS, "--tenant", "bad tenant!"], "tenant"),
        (["add", UNITS, "--tenant", ""], "tenant"),
        (["add", UNITS, "--metadata", "[1, 2]"], "--metadata"),
        (["add", UNITS, "--metadata", "{not json"], "--metadata"),
        (["search", "  "], "query: empty"),
        (["search", "units", "--k", "0"], "k:"),
        (["delete"], "choose what to delete"),
        (["list", "--tenant", "x y"], "tenant"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(env: World, arguments: list[str], fragment: str) -> None:
    result = CliRunner().invoke(cli_app, ["memory", *arguments])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in result.output
    assert list_memories(tenant="default") == []


# --- REST API ---------------------------------------------------------------------------------------------

KEYS = "key-acme:acme,key-globex:globex"
ACME = {"X-API-Key": "key-acme"}
GLOBEX = {"X-API-Key": "key-globex"}


def test_api_memory_routes(env: World) -> None:
    with serve(env.settings) as client:
        added = client.post(
            "/api/v1/memories",
            json={
                "text": UNITS,
                "tenant_id": "acme",
                "conversation_id": "c-1",
                "metadata": {"source": "call"},
            },
        )
        assert added.status_code == 200, added.text
        units = added.json()
        assert (units["tenant"], units["conversation_id"], units["metadata"]) == (
            "acme",
            "c-1",
            {"source": "call"},
        )
        tea = client.post("/api/v1/memories", json={"content": TEA, "tenant_id": "acme"}).json()
        found = client.get(
            "/api/v1/memories/search",
            params={"query": "which units does the customer want", "tenant_id": "acme"},
        ).json()
        assert found["tenant_id"] == "acme" and found["memories"][0]["id"] == units["id"]
        assert found["memories"][0]["score"] > found["memories"][1]["score"]
        one = client.get("/api/v1/memories/search", params={"query": "units", "k": 1, "tenant_id": "acme"})
        assert len(one.json()["memories"]) == 1
        listed = client.get("/api/v1/memories", params={"tenant_id": "acme"}).json()["memories"]
        assert [m["id"] for m in listed] == [tea["id"], units["id"]]
        scoped = client.get("/api/v1/memories", params={"tenant_id": "acme", "conversation_id": "c-1"}).json()
        assert [m["id"] for m in scoped["memories"]] == [units["id"]]
        assert client.get("/api/v1/memories").json()["memories"] == []  # the default tenant has none
        deleted = client.delete("/api/v1/memories", params={"id": units["id"], "tenant_id": "acme"})
        assert deleted.json() == {"tenant_id": "acme", "deleted": 1}
        assert (
            client.delete("/api/v1/memories", params={"tenant_id": "acme", "all": "true"}).json()["deleted"]
            == 1
        )
        after = client.get("/api/v1/memories/search", params={"query": "units tea", "tenant_id": "acme"})
        assert after.status_code == 200 and after.json()["memories"] == []


def test_api_delete_by_conversation(env: World) -> None:
    with serve(env.settings) as client:
        for text, conversation in ((UNITS, "c-1"), (TEA, "c-1"), (DEADLINE, "c-2")):
            client.post("/api/v1/memories", json={"text": text, "conversation_id": conversation})
        reply = client.delete("/api/v1/memories", params={"conversation_id": "c-1"})
        assert reply.json() == {"tenant_id": "default", "deleted": 2}
        assert [m["content"] for m in client.get("/api/v1/memories").json()["memories"]] == [DEADLINE]


def test_api_keys_keep_each_tenant_to_its_own_memories(env: World) -> None:
    with serve(env.settings.model_copy(update={"api_keys": KEYS})) as client:
        theirs = client.post("/api/v1/memories", json={"text": UNITS}, headers=GLOBEX).json()
        assert theirs["tenant"] == "globex"  # no tenant_id: the key's tenant
        mine = client.post("/api/v1/memories", json={"text": TEA}, headers=ACME).json()
        assert mine["tenant"] == "acme"
        forbidden = [
            client.post("/api/v1/memories", json={"text": TEA, "tenant_id": "globex"}, headers=ACME),
            client.get("/api/v1/memories", params={"tenant_id": "globex"}, headers=ACME),
            client.get(
                "/api/v1/memories/search", params={"query": "units", "tenant_id": "globex"}, headers=ACME
            ),
            client.delete("/api/v1/memories", params={"all": "true", "tenant_id": "globex"}, headers=ACME),
        ]
        assert [reply.status_code for reply in forbidden] == [403, 403, 403, 403]
        assert client.get("/api/v1/memories").status_code == 401
        assert client.get("/api/v1/memories", headers={"X-API-Key": "nope"}).status_code == 401
        # acme's key with globex's memory id deletes nothing; acme's search never shows globex's memory
        assert (
            client.delete("/api/v1/memories", params={"id": theirs["id"]}, headers=ACME).json()["deleted"]
            == 0
        )
        found = client.get("/api/v1/memories/search", params={"query": "customer units"}, headers=ACME).json()
        assert [m["id"] for m in found["memories"]] == [mine["id"]]
        listed = client.get("/api/v1/memories", headers=GLOBEX).json()["memories"]
        assert [m["id"] for m in listed] == [theirs["id"]]


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "field"),
    [
        ("post", "/api/v1/memories", {"json": {"text": ""}}, "text"),
        ("post", "/api/v1/memories", {"json": {"text": "   "}}, "text"),
        ("post", "/api/v1/memories", {"json": {}}, "text"),
        ("post", "/api/v1/memories", {"json": {"text": UNITS, "tenant_id": "bad tenant!"}}, "tenant_id"),
        (
            "post",
            "/api/v1/memories",
            {"json": {"text": UNITS, "conversation_id": "bad id!"}},
            "conversation_id",
        ),
        ("post", "/api/v1/memories", {"json": {"text": UNITS, "colour": "red"}}, "colour"),
        ("get", "/api/v1/memories/search", {"params": {}}, "query"),
        ("get", "/api/v1/memories/search", {"params": {"query": "units", "k": 0}}, "k"),
        ("get", "/api/v1/memories/search", {"params": {"query": "   "}}, "query"),
        ("delete", "/api/v1/memories", {"params": {}}, None),
    ],
)
def test_api_bad_input_is_422_naming_the_field(
    env: World, method: str, path: str, kwargs: dict[str, Any], field: str | None
) -> None:
    with serve(env.settings) as client:
        reply = getattr(client, method)(path, **kwargs)
        assert reply.status_code == 422, reply.text
        body = reply.json()
        assert body.get("field") == field and body["message"]
        if field:
            assert body["message"].startswith(f"{field}:")
        assert client.get("/api/v1/memories").json()["memories"] == []
