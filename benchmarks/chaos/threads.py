"""Where the chaos benchmark finds a tenant's conversation: the id a thread is stored under (scoped per
tenant, or raw in checkouts older than scoped ids) and its stored messages, read in a child of code_root
straight from the checkpointer. Several suites judge turns by what the thread holds afterwards."""

from __future__ import annotations

from pathlib import Path

from benchmarks.chaos.runner import ChaosRunner, last_json

#: How the engine stores tenant T's thread X (persistence.threads.scoped_thread_id): written out here, because
#: the probes also read checkouts older than that function.
THREAD_SCOPE_SEPARATOR = "/"


def scoped_id(tenant: str, thread: str) -> str:
    """The stored id of a tenant's thread (the runner scopes thread ids per tenant)."""
    return f"{tenant}{THREAD_SCOPE_SEPARATOR}{thread}"


def stored_ids(thread: str, tenant: str | None) -> list[str]:
    """Where a tenant's thread may be stored, in the order to look: its scoped id, then the raw id (what a
    checkout older than scoped ids stores)."""
    return [scoped_id(tenant, thread), thread] if tenant else [thread]


#: Prints a thread's stored messages as JSON, read straight from the checkpointer (no tenant check).
THREAD_MESSAGES_SNIPPET = """
import json
from graphs.rag import build_graph
from persistence.checkpointer import sqlite_checkpointer
graph = build_graph(checkpointer=sqlite_checkpointer())
found = {"thread_id": THREAD_IDS[0], "messages": []}
for thread_id in THREAD_IDS:
    values = graph.get_state({"configurable": {"thread_id": thread_id}}).values or {}
    if values.get("messages"):
        found = {"thread_id": thread_id,
                 "messages": [[m.type, m.content if isinstance(m.content, str) else str(m.content)]
                              for m in values["messages"]]}
        break
print(json.dumps(found))
"""


def stored_thread(
    runner: ChaosRunner, data_dir: Path, thread: str, tenant: str | None
) -> tuple[str, list[list[str]]]:
    """The id a tenant's thread is stored under and its messages, read straight from the checkpointer (no
    tenant check on this path): the scoped id, else the raw one (older checkouts); nothing stored: the scoped
    id and no messages."""
    ids = stored_ids(thread, tenant)
    result = runner.python_snippet(data_dir, THREAD_MESSAGES_SNIPPET.replace("THREAD_IDS", repr(ids)))
    found = last_json(result.stdout)
    if not isinstance(found, dict):
        return ids[0], []
    return str(found.get("thread_id", ids[0])), list(found.get("messages") or [])


def thread_messages(runner: ChaosRunner, data_dir: Path, thread: str, tenant: str | None) -> list[list[str]]:
    """A tenant's thread's stored messages (see stored_thread)."""
    return stored_thread(runner, data_dir, thread, tenant)[1]


def unanswered_questions(messages: list[list[str]]) -> int:
    """Questions of a stored history with no answer right after them (a turn cut off half-written)."""
    return sum(
        1
        for index, (kind, _text) in enumerate(messages)
        if kind == "human" and (index + 1 >= len(messages) or messages[index + 1][0] != "ai")
    )
