"""Memories are used: a memory of the tenant (and of the conversation, or tenant-wide) is recalled into the
answer prompt in its own section and cited as a memory; never another tenant's or another conversation's;
a tenant without memories pays no search. The prompt reports its sections, and who asked (`user_id`) is
recorded beside the tenant from every interface.

Why these tests: memories used to be stored and never read. The graph runs on the fake models
over a two-document corpus per tenant (tests.helpers.rag_world); the generate reply is a function of its
prompt, so it cites the memory by the number the prompt gave it, as a model following the prompt would.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from graphs.rag import build_graph
from nodes import memory_recall
from nodes.memory_recall import MEMORY_PREFIX, is_memory_doc, recalled_memories
from nodes.record_turn import cacheable
from persistence.database import APP_DB_FILENAME, open_database, upgrade
from persistence.memories import Memory, add_memory, has_memories, recall_memories
from prompts.answer import MEMORY_SECTION_EN
from retrieval.knowledge_base import KnowledgeBase
from retrieval.prompt_budget import AnswerPromptRequest, build_answer_prompt
from retrieval.section_packing import MESSAGE_OVERHEAD_TOKENS
from retrieval.tokens import count_tokens
from service.cli import app as cli_app
from state.context import Context
from tests.fakes import HashEmbeddings
from tests.helpers.api_server import serve
from tests.helpers.rag_world import QUESTION, World, world

#: Shares most of its words with QUESTION, so the fake embeddings find it similar.
#: The prompt sections of prompt_info, in prompt order (the baseline design's budget order).
SECTION_NAMES = ("system", "memories", "director", "history", "sources", "question")
MEMORY = "The customer asks about the largest planet in the Solar System for a school report."
#: A sentence the model can only have taken from the memory.
MEMORY_CLAIM = "The customer needs the largest planet for a school report"
LABEL = re.compile(r"\[(\d+)\] \(memory ([0-9a-f]+), ")


def reply_citing_the_memory(messages: list[BaseMessage]) -> str:
    """A model that follows the prompt: it answers from source [1] and cites the memory by its number."""
    found = LABEL.search(str(messages[0].content))
    answer = "Jupiter is the largest planet in the Solar System [1]."
    return f"{answer} {MEMORY_CLAIM} [{found.group(1)}]." if found else answer


@pytest.fixture
def tenants(settings: Any, kb: KnowledgeBase, tmp_path: Path) -> Iterator[World]:
    """The corpus of tenants acme and beta; the model cites a memory when its prompt holds one."""
    with world(settings, kb, tmp_path, tenants=("acme", "beta")) as built:
        built.model.replies["generate"] = reply_citing_the_memory
        yield built


def remember(world_: World, content: str = MEMORY, **scope: str) -> Memory:
    embeddings = world_.kb.embeddings
    return add_memory(
        content,
        tenant=scope.pop("tenant", "acme"),
        settings=world_.settings,
        embeddings=embeddings,
        model_key=embeddings.model_key,
        **scope,
    )


def generate_systems(world_: World, since: int = 0) -> list[str]:
    """The system messages of the answer prompts since call number `since`."""
    return [str(messages[0].content) for task, messages in world_.model.calls[since:] if task == "generate"]


def ask(question: str = QUESTION, **context: Any) -> dict[str, Any]:
    return build_graph().invoke({"question": question}, context=Context(**context))


# --- recalled, scoped, cited -------------------------------------------------------------------------------


def test_a_memory_of_the_tenant_is_in_its_answer_prompt_and_cited_as_a_memory(tenants: World) -> None:
    memory = remember(tenants)
    out = ask(tenant="acme")
    systems = generate_systems(tenants)
    assert systems and all(MEMORY in system for system in systems)
    memory_citations = [c for c in out["citations"] if c["kind"] == "memory"]
    assert [c["source"] for c in memory_citations] == [f"{MEMORY_PREFIX}{memory.id}"]
    assert MEMORY_CLAIM in out["answer"] and not out["not_found"]
    assert [c["kind"] for c in out["citations"] if c["source"] != f"memory:{memory.id}"] == ["document"]
    sections = out["prompt_info"]["sections"]
    assert [section["name"] for section in sections] == list(SECTION_NAMES)
    assert MEMORY[:40] in sections[1]["text"] and sections[1]["tokens"] > 0


def test_another_tenants_memory_never_reaches_a_prompt(tenants: World) -> None:
    remember(tenants, tenant="acme")
    out = ask(tenant="beta")
    systems = generate_systems(tenants)
    assert systems and not any(MEMORY in system for system in systems)
    assert all(c["kind"] == "document" for c in out["citations"]) and MEMORY_CLAIM not in out["answer"]


def test_a_tenant_without_memories_pays_no_memory_search(
    tenants: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    searched: list[str] = []
    # nodes.memory_recall imports the store's function when it recalls: patch it where it lives.
    monkeypatch.setattr("persistence.memories.recall_memories", lambda *a, **k: searched.append("x") or [])
    remember(tenants, tenant="beta")  # another tenant's memory does not make acme pay
    out = ask(tenant="acme")
    assert out["answer"] and searched == []
    assert out["prompt_info"]["memories_used"] == 0 and out["prompt_info"]["sections"][1]["tokens"] == 0


def test_recall_embeds_nothing_when_the_scope_holds_no_memory(tenants: World) -> None:
    counting = HashEmbeddings()
    remember(tenants, tenant="acme", conversation_id="c1")
    assert not has_memories("acme", "c2", settings=tenants.settings)
    found = recall_memories(
        QUESTION, tenant="acme", conversation_id="c2", k=3, min_score=0.0, settings=tenants.settings,
        embeddings=counting, model_key="fake",
    )  # fmt: skip
    assert found == [] and (counting.query_calls, counting.document_calls) == (0, 0)


def test_has_memories_sees_the_scopes_recall_reads(tenants: World) -> None:
    def has(tenant: str, conversation_id: str) -> bool:
        return has_memories(tenant, conversation_id, settings=tenants.settings)

    assert not has("acme", "") and not has("acme", "c1")
    remember(tenants, tenant="acme", conversation_id="c1")
    # the conversation's own memory, never another conversation's nor another tenant's
    assert has("acme", "c1") and not has("acme", "c2") and not has("acme", "") and not has("beta", "c1")
    remember(tenants, tenant="acme")  # tenant-wide: every conversation of the tenant reads it
    assert all(has("acme", scope) for scope in ("", "c1", "c2")) and not has("beta", "")


def test_recall_reads_the_conversation_first_then_the_tenant_never_another_conversation(
    tenants: World,
) -> None:
    wide = remember(tenants, "The customer report on the largest planet is due on Friday.")
    own = remember(tenants, MEMORY, conversation_id="c1")
    other = remember(tenants, MEMORY + " Other conversation.", conversation_id="c2")
    embeddings = tenants.kb.embeddings
    common = {"tenant": "acme", "k": 5, "min_score": 0.0, "settings": tenants.settings}
    common |= {"embeddings": embeddings, "model_key": embeddings.model_key}
    assert [m.id for m in recall_memories(QUESTION, conversation_id="c1", **common)] == [own.id, wide.id]
    assert [m.id for m in recall_memories(QUESTION, conversation_id="c3", **common)] == [wide.id]
    assert [m.id for m in recall_memories(QUESTION, **common)] == [wide.id]  # no conversation: tenant-wide
    assert other.id not in [m.id for m in recall_memories(QUESTION, conversation_id="c1", **common)]
    # the threshold and k are applied: nothing is this similar; one at most
    assert recall_memories(QUESTION, conversation_id="c1", **(common | {"min_score": 0.99})) == []
    assert len(recall_memories(QUESTION, conversation_id="c1", **(common | {"k": 1}))) == 1


def test_the_node_step_scopes_to_the_turns_conversation(tenants: World) -> None:
    remember(tenants, MEMORY, conversation_id="c1")
    context = Context(tenant="acme")
    in_c1 = recalled_memories({"tenant": "acme", "conversation_id": "c1"}, context, QUESTION)
    in_c2 = recalled_memories({"tenant": "acme", "conversation_id": "c2"}, context, QUESTION)
    assert [doc["text"] for doc in in_c1] == [MEMORY] and in_c2 == []
    assert is_memory_doc(in_c1[0]) and in_c1[0]["metadata"]["source_kind"] == "memory"
    # recalled once per turn: a later round reuses what the first found
    assert recalled_memories({"recalled_memories": []}, context, QUESTION) == []


def test_recall_off_and_the_threshold_bound_recall(tenants: World, monkeypatch: pytest.MonkeyPatch) -> None:
    remember(tenants)
    context = Context(tenant="acme")
    tenants.resources.settings = tenants.settings.model_copy(update={"memory_recall_k": 0})
    try:
        assert recalled_memories({"tenant": "acme"}, context, QUESTION) == []
    finally:
        tenants.resources.settings = tenants.settings
    assert len(recalled_memories({"tenant": "acme"}, context, QUESTION)) == 1
    monkeypatch.setattr(memory_recall, "MEMORY_RECALL_MIN_SCORE", 0.99)
    assert recalled_memories({"tenant": "acme"}, context, QUESTION) == []


def test_an_answer_resting_on_a_memory_is_not_cached() -> None:
    state: dict[str, Any] = {
        "cache_key": {"question": "q"},
        "answer": "Metric [1].",
        "answer_grade": {"grounded": True, "answers_question": True},
        "sources": [{"chunk_id": "memory:3", "text": "metric"}],
    }
    assert not cacheable(state)  # type: ignore[arg-type]
    state["sources"] = [{"chunk_id": "c1", "text": "metric"}]
    assert cacheable(state)  # type: ignore[arg-type]


# --- the budgeted prompt's sections -------------------------------------------------------------------------


def doc(chunk_id: str, body: str) -> dict[str, Any]:
    return {
        "chunk_id": chunk_id, "text": body, "source": f"{chunk_id}.md", "title": chunk_id, "page": 0,
        "doc_id": chunk_id, "score": 1.0, "relevance": 1.0, "query": "", "metadata": {},
    }  # fmt: skip


def memory(number: int, body: str) -> dict[str, Any]:
    return {**doc(f"memory:{number}", body), "title": f"memory {number}", "metadata": {"memory_kind": "note"}}


HISTORY = [("human", "What is Mars?"), ("ai", "Mars is the fourth planet [1]."), ("human", "And Venus?"),
           ("ai", "Venus is the second planet [1].")]  # fmt: skip


def prompt(**overrides: Any) -> Any:
    arguments: dict[str, Any] = {
        "system": "You answer from the sources.",
        "question": QUESTION,
        "documents": [doc("a", "Jupiter is the largest planet."), doc("b", "Saturn has rings.")],
        "history": HISTORY,
        "window": 4096,
        "reserve": 512,
        "context_budget": 3000,
        "context_share": 0.5,
        "memories": [memory(7, "The customer prefers metric units.")],
        "memory_share": 0.2,
    }
    return build_answer_prompt(AnswerPromptRequest(**(arguments | overrides)))


def test_memories_get_their_own_section_after_the_system_numbered_after_the_sources() -> None:
    built = prompt()
    system = str(built.messages[0].content)
    assert system.startswith("You answer from the sources.")
    assert "[3] (memory 7, note) The customer prefers metric units." in system
    assert [type(m) for m in built.messages] == [SystemMessage, HumanMessage, AIMessage, HumanMessage,
                                                 AIMessage, HumanMessage]  # fmt: skip
    assert [m["chunk_id"] for m in built.used_memories] == ["memory:7"]
    info = built.prompt_info
    assert info["memories_used"] == 1 and 0 < info["memory_tokens"] <= info["memory_limit"]
    assert (info["history_kept"], info["history_total"]) == (2, 2)


def test_the_sections_add_up_to_the_prompt() -> None:
    for overrides in ({}, {"memories": []}, {"documents": []}, {"history": []}):
        info = prompt(**overrides).prompt_info
        sections = info["sections"]
        assert [section["name"] for section in sections] == list(SECTION_NAMES)
        summed = sum(section["tokens"] for section in sections) + info["overhead_tokens"]
        joins = 3  # tokens may merge or split where the system prompt meets its memories and the template
        assert abs(info["total_tokens"] - summed) <= joins, (overrides, info["total_tokens"], summed)
        assert info["overhead_tokens"] == MESSAGE_OVERHEAD_TOKENS * (2 + 2 * info["history_kept"])


def test_memories_stay_within_their_share_and_section_texts_are_cut() -> None:
    many = [memory(n, f"Note {n}: the customer prefers metric units and short answers.") for n in range(40)]
    info = prompt(memories=many, memory_share=0.05, section_chars=50).prompt_info
    assert 0 < info["memories_used"] < 40 and info["memory_tokens"] <= info["memory_limit"]
    assert all(len(section["text"]) <= 50 for section in info["sections"])
    assert prompt(memory_share=0.0).prompt_info["memories_used"] == 0


def test_history_kept_of_total_when_the_window_is_small() -> None:
    long_history = [(role, f"{text} " + "filler " * 60) for role, text in HISTORY * 3]
    info = prompt(history=long_history, window=900, reserve=200).prompt_info
    assert info["history_total"] == 6 and 0 <= info["history_kept"] < 6


def test_a_force_truncated_prompt_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="retrieval.prompt_budget"):
        built = prompt(question="why " * 600, window=700, reserve=200)
    assert built.prompt_info["fallback"] is True and built.used_memories == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "force-truncated" in warnings[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="retrieval.prompt_budget"):
        assert prompt().prompt_info["fallback"] is False
    assert not caplog.records


def test_the_memory_section_template_frames_the_memories() -> None:
    assert "{memories}" in MEMORY_SECTION_EN and count_tokens(MEMORY_SECTION_EN) < 60


# --- who asked --------------------------------------------------------------------------------------------


CAROL = "carol@example.com"


def audit_users(world_: World) -> list[tuple[str, str, str]]:
    """(thread, user of the audit row, user of the session row) of every answer."""
    with sqlite3.connect(world_.settings.data_dir / APP_DB_FILENAME) as connection:
        return connection.execute(
            "SELECT audit_logs.thread_id, audit_logs.user_id, sessions.user_id FROM audit_logs "
            "JOIN sessions ON sessions.thread_id = audit_logs.thread_id WHERE action = 'answer' "
            "ORDER BY audit_logs.id"
        ).fetchall()


def conversation_users(world_: World) -> set[str]:
    with sqlite3.connect(world_.settings.data_dir / APP_DB_FILENAME) as connection:
        return {row[0] for row in connection.execute("SELECT user_id FROM conversations")}


def test_user_id_is_recorded_from_python_cli_and_api(tenants: World, monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"configurable": {"thread_id": "py-1"}}
    build_graph().invoke({"question": QUESTION}, config, context=Context(tenant="acme", user_id="alice"))
    monkeypatch.setenv("RAG_DATA_DIR", str(tenants.settings.data_dir))
    result = CliRunner().invoke(
        cli_app, ["ask", QUESTION, "--thread", "cli-1", "--tenant", "acme", "--user", "bob", "--json"]
    )
    assert result.exit_code == 0, result.output
    with serve(tenants.settings) as client:
        payload = {
            "query": QUESTION,
            "tenant_id": "acme",
            "thread_id": "api-1",
            "user_id": "carol@example.com",
        }
        reply = client.post("/api/v1/rag/generate", json=payload)
        assert reply.status_code == 200, reply.text
        refused = client.post("/api/v1/rag/generate", json={**payload, "user_id": "bad\nuser"})
        assert refused.status_code == 422
    assert audit_users(tenants) == [
        ("py-1", "alice", "alice"), ("cli-1", "bob", "bob"), ("api-1", CAROL, CAROL)
    ]  # fmt: skip
    assert conversation_users(tenants) == {"alice", "bob", CAROL}


def test_the_default_user_comes_from_the_setting(tenants: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_DEFAULT_USER", "ops-bot")
    build_graph().invoke({"question": QUESTION}, {"configurable": {"thread_id": "d-1"}}, context=Context())
    assert audit_users(tenants)[-1] == ("d-1", "ops-bot", "ops-bot")


def test_cli_refuses_a_user_that_is_not_one_line(tenants: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(tenants.settings.data_dir))
    result = CliRunner().invoke(cli_app, ["ask", QUESTION, "--tenant", "acme", "--user", "a\x07b"])
    assert result.exit_code == 2 and "--user" in result.output and "Traceback" not in result.output


def test_the_user_id_migration_keeps_the_rows_of_an_older_database(tmp_path: Path) -> None:
    db_file = tmp_path / "old.sqlite"
    engine = create_engine(f"sqlite:///{db_file}")
    upgrade(engine, "0002")
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO audit_logs (action, tenant, thread_id, conversation_id, chunk_ids, mode, "
                "interface, graph, cache_hit, not_found, detail, created_at) VALUES ('answer', 't', 'th', "
                "'', '[]', '', '', '', 0, 0, '{}', '2026-01-01 00:00:00')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO sessions (tenant, thread_id, conversation_id, interface, turns, created_at, "
                "updated_at) VALUES ('t', 'th', '', '', 1, '2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            )
        )
    engine.dispose()
    open_database(f"sqlite:///{db_file}").close()
    with sqlite3.connect(db_file) as connection:
        assert connection.execute("SELECT tenant, thread_id, user_id FROM audit_logs").fetchall() == [
            ("t", "th", "")
        ]
        assert connection.execute("SELECT thread_id, user_id FROM sessions").fetchall() == [("th", "")]
        columns = {row[1] for row in connection.execute("PRAGMA table_info(conversations)")}
    assert "user_id" in columns
