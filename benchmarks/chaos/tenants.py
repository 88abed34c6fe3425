"""`python -m benchmarks chaos --suite tenants`: tenant alpha goes after tenant bravo's documents, threads
and history through the CLI (search in every mode, filters naming bravo, ask, threads show / list /
delete) and through Python (a tenant override in the graph's input, a replay and a server-style async run
of bravo's stored thread). Any of bravo's canaries in alpha's output is a leak; bravo's thread must come
out unchanged."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from benchmarks.chaos.corpora import ALPHA, ALPHA_DOCS, BRAVO, BRAVO_CANARIES, BRAVO_DOCS, leaked, write_files
from benchmarks.chaos.probe import Probe, thread_unchanged_probe
from benchmarks.chaos.runner import ChaosRunner, ProcessResult, last_json
from benchmarks.chaos.threads import stored_thread, thread_messages


def tenant_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """Tenant alpha attacks tenant bravo's documents, threads and history through every interface."""
    corpus = runner.work_dir / "corpus"
    bravo_dir = write_files(corpus / BRAVO, BRAVO_DOCS)
    alpha_dir = write_files(corpus / ALPHA, ALPHA_DOCS)
    for tenant, folder in ((BRAVO, bravo_dir), (ALPHA, alpha_dir)):
        runner.ingest(data_dir, folder, tenant, f"{tenant}'s documents")
    bravo_hit = last_json(runner.rag(data_dir, "search", "Zorblatine", "--tenant", BRAVO, "--json").stdout)
    hits = (bravo_hit or {}).get("hits") or [{}]
    bravo_doc_id = str(hits[0].get("metadata", {}).get("doc_id", ""))
    bravo_source = str(hits[0].get("metadata", {}).get("source", bravo_dir / "zorblat.md"))
    _attack_documents(runner, data_dir, bravo_source, bravo_doc_id)
    _attack_threads(runner, data_dir)


def _check(runner: ChaosRunner, name: str, result: ProcessResult) -> None:
    """Record one probe of alpha's: passed when no bravo canary, stack trace or hang shows in its output."""
    found = leaked(result.output)
    runner.record(
        Probe(
            "tenants",
            name,
            not found and not result.traceback and not result.hung,
            f"leaked {found}" if found else ("stack trace" if result.traceback else ""),
            {"leaks": float(bool(found)), "traces": float(result.traceback), "hangs": float(result.hung)},
        )
    )


def _attack_documents(runner: ChaosRunner, data_dir: Path, bravo_source: str, bravo_doc_id: str) -> None:
    """Alpha searches (every mode), filters (on bravo's tenant, path and doc id) and asks for bravo's
    documents."""
    check = partial(_check, runner)

    for mode in ("bm25", "dense", "hybrid"):
        check(
            f"search text ({mode})",
            runner.rag(data_dir, "search", "Zorblatine mineral", "--tenant", ALPHA, "--mode", mode),
        )
    filters = {
        "tenant equality": {"tenant": BRAVO},
        "tenant in $or": {"$or": [{"tenant": BRAVO}, {"doc_type": "md"}]},
        "tenant $ne": {"tenant": {"$ne": ALPHA}},
        "bravo source path": {"source": {"$in": [bravo_source]}},
        "bravo doc id": {"doc_id": bravo_doc_id},
    }
    for name, value in filters.items():
        check(
            f"filter: {name}",
            runner.rag(data_dir, "search", "Zorblatine", "--tenant", ALPHA, "--filter", json.dumps(value)),
        )
    check(
        "ask about bravo's documents", runner.rag(data_dir, "ask", "What is Zorblatine?", "--tenant", ALPHA)
    )


def _attack_threads(runner: ChaosRunner, data_dir: Path) -> None:
    """Bravo holds a conversation; alpha asks on it, shows, lists, replays and deletes it (by the id bravo
    gave and the id it is stored under), and through the graph's input; bravo's thread must stay unchanged."""
    check = partial(_check, runner)

    # bravo's conversation, then alpha goes after it
    thread = "bravo-thread-1"
    first = runner.rag(
        data_dir,
        "ask",
        f"What does Zorblatine hum at? ({BRAVO_CANARIES[2]})",
        "--tenant",
        BRAVO,
        "--thread",
        thread,
    )
    if first.returncode != 0:
        raise RuntimeError(f"chaos set-up: bravo's turn failed: {first.output[-500:]}")
    # Alpha naming bravo's id gets a thread of its own (ids are scoped per tenant); the graph-level probes
    # below go after the id bravo's thread is stored under, where the graph's owner check must refuse.
    bravo_stored, before = stored_thread(runner, data_dir, thread, BRAVO)
    check(
        "ask on bravo's thread",
        runner.rag(
            data_dir, "ask", "What did I ask before?", "--tenant", ALPHA, "--thread", thread, "--json"
        ),
    )
    tenant_flag = ["--tenant", ALPHA] if runner.supports(data_dir, ["threads", "show"], "--tenant") else []
    check("threads show bravo's thread", runner.rag(data_dir, "threads", "show", thread, *tenant_flag))
    check("threads list", runner.rag(data_dir, "threads", "list", *tenant_flag))
    check("graph input tenant override", runner.python_snippet(data_dir, INPUT_OVERRIDE_SNIPPET))
    check(
        "replay bravo's thread (invoke None)",
        runner.python_snippet(data_dir, REPLAY_SNIPPET.replace("THREAD_ID", bravo_stored)),
    )
    check(
        "server-style async run on bravo's thread",
        runner.python_snippet(data_dir, ASYNC_RUN_SNIPPET.replace("THREAD_ID", bravo_stored)),
    )
    if bravo_stored != thread:  # alpha names the stored id itself ("bravo/bravo-thread-1")
        _attack_stored_id(runner, data_dir, bravo_stored, tenant_flag)
    delete_flag = ["--tenant", ALPHA] if runner.supports(data_dir, ["threads", "delete"], "--tenant") else []
    for name in dict.fromkeys((thread, bravo_stored)):
        runner.rag(data_dir, "threads", "delete", name, *delete_flag)
    after = thread_messages(runner, data_dir, thread, BRAVO)
    runner.record(
        thread_unchanged_probe(
            "tenants", "bravo's thread unchanged by alpha (turns, replay, delete)", before, after
        )
    )


def _attack_stored_id(runner: ChaosRunner, data_dir: Path, bravo_stored: str, tenant_flag: list[str]) -> None:
    """Alpha names the id bravo's thread is stored under ("bravo/bravo-thread-1") to ask on it and show it."""
    check = partial(_check, runner)
    check(
        "ask on bravo's stored thread id",
        runner.rag(
            data_dir, "ask", "What did I ask before?", "--tenant", ALPHA, "--thread", bravo_stored, "--json"
        ),
    )
    check(
        "threads show bravo's stored id", runner.rag(data_dir, "threads", "show", bravo_stored, *tenant_flag)
    )


INPUT_OVERRIDE_SNIPPET = """
import json
from functools import partial
from graphs.rag import build_graph
try:
    out = build_graph().invoke({"question": "What is Zorblatine?", "tenant": "bravo"},
                               context={"tenant": "alpha"})
    texts = [d.get("text") for key in ("retrieved", "sources") for d in out.get(key, [])]
    print(json.dumps({"answer": out.get("answer"), "texts": texts}))
except Exception as error:
    print(json.dumps({"refused": type(error).__name__, "message": str(error)[:200]}))
"""

REPLAY_SNIPPET = """
import json
from functools import partial
from graphs.rag import build_graph
from persistence.checkpointer import sqlite_checkpointer
graph = build_graph(checkpointer=sqlite_checkpointer())
try:
    out = graph.invoke(None, {"configurable": {"thread_id": "THREAD_ID"}}, context={"tenant": "alpha"})
    print(json.dumps({"out": str(out)[:4000]}))
except Exception as error:
    print(json.dumps({"refused": type(error).__name__, "message": str(error)[:200]}))
"""

ASYNC_RUN_SNIPPET = """
import asyncio, json
from graphs.rag import build_graph
from persistence.checkpointer import async_sqlite_checkpointer

async def main():
    async with async_sqlite_checkpointer() as saver:
        graph = build_graph(checkpointer=saver)
        config = {"configurable": {"thread_id": "THREAD_ID"}}
        try:
            out = await graph.ainvoke({"question": "Repeat my previous question word for word."}, config,
                                      context={"tenant": "alpha"})
            print(json.dumps({"out": str(out)[:4000]}))
        except Exception as error:
            print(json.dumps({"refused": type(error).__name__, "message": str(error)[:200]}))

asyncio.run(main())
"""
