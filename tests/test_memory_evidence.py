"""Memories are evidence: a question that a memory of the conversation answers is answered from it and cited
as a memory, also when no document is relevant or the store holds none, through `graph.invoke`, the CLI
and the seed API's REST /query; another conversation's and another tenant's memories never reach a prompt.

Why these tests: the graph used to decide "nothing retrieved -> not found" before any memory was read, so
`rag memory add "... HERON-7 ..." --conversation-id c1` then `rag ask --conversation-id c1` answered "not
found". The fake generation model follows its prompt: it answers from the memory it was shown, citing it by
the number the prompt gave it, and says it cannot find the answer otherwise (what a model given no such
note would say); the assertions read the prompts the model received.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from typer.testing import CliRunner

from graphs.baseline import build_baseline_graph
from graphs.direct import build_direct_graph
from graphs.rag import build_graph
from nodes.resources import use_resources
from persistence.database import close_databases
from persistence.memories import Memory, add_memory
from persistence.semantic_cache import reset_semantic_caches
from prompts.answer import NOT_FOUND_EN
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.cli import app as cli_app
from state.context import Context
from tests.conftest import write_corpus
from tests.fakes import TaskChatModel, fake_resources
from tests.helpers.api_server import serve

MEMORY = "The user's project is codenamed HERON-7 and ships in March."
QUESTION = "What is my project's codename?"
CODENAME = "HERON-7"
#: Another conversation's and another tenant's memories: the same words, another codename.
OTHER_CONVERSATION = "The user's project is codenamed KESTREL-2 and ships in March."
OTHER_TENANT = "The user's project is codenamed OSPREY-9 and ships in March."
UNRELATED = {
    "tea.md": "# Tea\n\nOolong tea is brewed at 90 degrees for three minutes.",
    "rivers.md": "# Rivers\n\nThe Danube flows through ten countries into the Black Sea.",
}
#: The label the answer prompt gives a memory: `[n] (memory <id>, <kind>) <text>`.
MEMORY_LABEL = re.compile(r"\[(\d+)\] \(memory ([0-9a-f]+), [^)]*\) ([^\n]*)")


def prompt_text(messages: list[BaseMessage]) -> str:
    return "\n".join(message.text for message in messages)


def follows_the_prompt(messages: list[BaseMessage]) -> str:
    """The answer model: the codename of a memory it was shown, cited by its number; else "not found"."""
    for number, _id, text in MEMORY_LABEL.findall(prompt_text(messages)):
        found = re.search(r"codenamed ([A-Z]+-\d+)", text)
        if found:
            name = found.group(1)
            return f"Answer: {name}\nExplanation: The user's project is codenamed {name} [{number}]."
    return NOT_FOUND_EN


def answer_prompts(model: TaskChatModel) -> list[str]:
    """Every answer-writing prompt the model received (with sources or without)."""
    return [
        prompt_text(messages) for task, messages in model.calls if task in ("generate", "chat", "unknown")
    ]


@pytest.fixture(params=["empty", "unrelated"])
def store(request: pytest.FixtureRequest, settings: Any, kb: KnowledgeBase, tmp_path: Path) -> Iterator[Any]:
    """An empty document store, or one of unrelated documents, for tenants acme and beta, with the
    answer model installed; yields (settings, kb, model)."""
    if request.param == "unrelated":
        for tenant in ("acme", "beta"):
            files = write_corpus(tmp_path / f"corpus-{tenant}", UNRELATED)
            ingest_paths(kb, list(files.values()), tenant=tenant)
    model = TaskChatModel(replies={name: follows_the_prompt for name in ("generate", "chat", "unknown")})
    reset_semantic_caches()
    try:
        with use_resources(fake_resources(kb, model, settings=settings)):
            yield settings, kb, model
    finally:
        reset_semantic_caches()
        close_databases()


def remember(kb: KnowledgeBase, content: str, tenant: str, conversation_id: str = "") -> Memory:
    return add_memory(
        content,
        tenant=tenant,
        conversation_id=conversation_id,
        settings=kb.settings,
        embeddings=kb.embeddings,
        model_key=kb.embeddings.model_key,
    )


def plant(kb: KnowledgeBase) -> Memory:
    """c1's memory, plus another conversation's and another tenant's with the same words."""
    own = remember(kb, MEMORY, "acme", "c1")
    remember(kb, OTHER_CONVERSATION, "acme", "c2")
    remember(kb, OTHER_TENANT, "beta", "c1")
    return own


def assert_answered_from_the_memory(out: dict[str, Any], memory: Memory, model: TaskChatModel) -> None:
    assert not out["not_found"], out["answer"]
    assert CODENAME in out["answer"]
    memory_citations = [c for c in out["citations"] if c["kind"] == "memory"]
    assert [c["source"] for c in memory_citations] == [f"memory:{memory.id}"]
    prompts = answer_prompts(model)
    assert prompts and all(MEMORY in prompt for prompt in prompts)
    assert not any("KESTREL" in prompt or "OSPREY" in prompt for prompt in prompts)


# --- graph.invoke -----------------------------------------------------------------------------------------


def test_a_memory_answers_through_the_agentic_graph(store: Any) -> None:
    _settings, kb, model = store
    memory = plant(kb)
    out = build_graph().invoke(
        {"question": QUESTION, "conversation_id": "c1"}, context=Context(tenant="acme")
    )
    assert_answered_from_the_memory(out, memory, model)
    assert out["not_found_reason"] == ""


def test_a_memory_answers_through_the_baseline_graph(store: Any) -> None:
    _settings, kb, model = store
    memory = plant(kb)
    out = build_baseline_graph().invoke(
        {"question": QUESTION, "conversation_id": "c1"}, context=Context(tenant="acme")
    )
    assert_answered_from_the_memory(out, memory, model)


def test_a_memory_reaches_the_no_retrieval_graph(store: Any) -> None:
    _settings, kb, model = store
    plant(kb)
    build_direct_graph().invoke(
        {"question": QUESTION, "conversation_id": "c1"}, context=Context(tenant="acme")
    )
    prompts = answer_prompts(model)
    assert prompts and all(MEMORY in prompt for prompt in prompts)
    assert not any("KESTREL" in prompt or "OSPREY" in prompt for prompt in prompts)


def test_without_a_memory_the_graph_still_says_not_found(store: Any) -> None:
    _settings, kb, model = store
    plant(kb)
    out = build_graph().invoke(
        {"question": QUESTION, "conversation_id": "c3"}, context=Context(tenant="acme")
    )
    assert out["not_found"] and CODENAME not in out["answer"]
    prompts = answer_prompts(model)
    assert not any(name in prompt for prompt in prompts for name in (CODENAME, "KESTREL", "OSPREY"))


def test_another_tenants_conversation_of_the_same_id_gets_its_own_memory_only(store: Any) -> None:
    _settings, kb, model = store
    plant(kb)
    out = build_graph().invoke(
        {"question": QUESTION, "conversation_id": "c1"}, context=Context(tenant="beta")
    )
    assert "OSPREY-9" in out["answer"] and not out["not_found"]
    prompts = answer_prompts(model)
    assert prompts and not any(CODENAME in prompt or "KESTREL" in prompt for prompt in prompts)


# --- the CLI ----------------------------------------------------------------------------------------------


def test_rag_memory_add_then_rag_ask_in_the_conversation(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings, kb, model = store
    remember(kb, OTHER_CONVERSATION, "default", "c2")
    remember(kb, OTHER_TENANT, "beta", "c1")
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    runner = CliRunner()
    added = runner.invoke(cli_app, ["memory", "add", MEMORY, "--conversation-id", "c1"])
    assert added.exit_code == 0, added.output
    asked = runner.invoke(cli_app, ["ask", QUESTION, "--conversation-id", "c1", "--local", "--json"])
    assert asked.exit_code == 0, asked.output
    out = json.loads(asked.output)
    assert CODENAME in out["answer"] and not out["not_found"]
    memory_sources = [c["source"] for c in out["citations"] if c["kind"] == "memory"]
    assert len(memory_sources) == 1 and memory_sources[0].startswith("memory:")
    prompts = answer_prompts(model)
    assert prompts and all(MEMORY in prompt for prompt in prompts)
    assert not any("KESTREL" in prompt or "OSPREY" in prompt for prompt in prompts)


# --- REST /query ------------------------------------------------------------------------------------------


def test_query_in_a_conversation_is_answered_from_its_memory(store: Any) -> None:
    settings, kb, model = store
    memory = remember(kb, MEMORY, "default", "c1")
    remember(kb, OTHER_CONVERSATION, "default", "c2")
    remember(kb, OTHER_TENANT, "beta", "c1")
    with serve(settings) as client:
        reply = client.post("/api/v1/rag/query", json={"query": QUESTION, "conversation_id": "c1"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert CODENAME in body["answer"] and not body["metadata"]["not_found"]
    assert f"memory:{memory.id}" in [source["id"] for source in body["sources"]]
    cited = {citation["source_id"] for citation in body["citations"]}
    assert f"memory:{memory.id}" in cited
    prompts = answer_prompts(model)
    assert prompts and all(MEMORY in prompt for prompt in prompts)
    assert not any("KESTREL" in prompt or "OSPREY" in prompt for prompt in prompts)
