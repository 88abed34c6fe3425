"""Several `rag serve` workers (separate processes, separate data folders) behind one PostgreSQL database
(RAG_DATABASE_URL: conversations, tables, catalog, keyword index) and one Chroma server (RAG_CHROMA_HOST /
PORT): whatever they share, they can only share through those servers.

- a document uploaded to one worker is found by another worker that was already serving (and had already
  searched) before the upload; a thread asked on that worker continues on a third, with its history in the
  third worker's prompt and in `rag threads show`;
- conversations driven concurrently across the workers, each turn on another worker: no errors, no turn
  lost, none in another thread; two turns sent at once to one thread on two workers are serialized or
  refused (409), never interleaved;
- a worker killed while a turn of the thread runs on it, then started again: the conversation continues;
- tenants stay apart across workers: documents, threads and the thread list;
- `langgraph dev` (Studio's server) started with the same settings answers from a document a worker
  indexed, writes its thread's checkpoints to the shared PostgreSQL, and continues the thread.

Models are a recording fake OpenAI endpoint (tests.fake_openai), chosen by settings as a deployment would
point at a real one: the workers need no torch and answer in a fraction of a second, and the test can read
every prompt a worker sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from persistence.threads import scoped_thread_id
from tests.conftest import REPO_ROOT
from tests.fake_openai import fake_openai_app
from tests.helpers.api_server import free_port, serve_app
from tests.helpers.langgraph_dev import COPY_IGNORE, environment_without_settings, langgraph_dev
from tests.helpers.servers import (
    Servers,
    Worker,
    fresh_database,
    rag_workers,
    server_settings,
    unique_tenant,
)

pytestmark = pytest.mark.servers

REPLY = "The Kestrel reactor at Vantor Station runs on molten salt [1]."
KESTREL = "# Kestrel\n\nThe Kestrel reactor at Vantor Station runs on molten salt and was built in 2031."
HERON = "# Heron\n\nThe Heron telescope on Mount Aldra watches the southern sky every winter night."
#: One tenant (and API key) per concern: the Chroma server is shared by the whole test session.
TENANTS = {
    name: unique_tenant(name) for name in ("flow", "load", "lock", "restart", "alpha", "beta", "studio")
}
API_KEYS = ",".join(f"key-{name}:{tenant}" for name, tenant in TENANTS.items())
#: Seconds the fake endpoint holds a chat answer while a test wants a turn in flight.
SLOW_CHAT_S = 3.0
REQUEST_TIMEOUT_S = 120
#: The module's workers, for failure messages (their logs say why a request failed).
CLUSTER_WORKERS: list[Worker] = []


class RecordingEndpoint:
    """The fake OpenAI endpoint with every chat request's body recorded, and an optional delay before a
    chat answer (so a test can act while a worker's turn is in flight)."""

    def __init__(self) -> None:
        self.app = fake_openai_app(REPLY)
        self.chats: list[str] = []
        self.delay_s = 0.0
        self._lock = threading.Lock()

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        with self._lock:
            self.chats.append(json.dumps(json.loads(body).get("messages", [])))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return dict(await receive())
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def prompts_with(self, *texts: str) -> list[str]:
        """The recorded chat prompts that contain every one of `texts`."""
        with self._lock:
            return [chat for chat in self.chats if all(text in chat for text in texts)]


class Cluster:
    """Three workers, the endpoint they call, and the settings that reach the same stores from the test."""

    def __init__(self, workers: list[Worker], endpoint: RecordingEndpoint, env: dict[str, str]) -> None:
        self.workers = workers
        self.endpoint = endpoint
        self.env = env

    def ask(
        self, worker: int, tenant: str, query: str, thread_id: str | None = None, **fields: Any
    ) -> httpx.Response:
        body = {"query": query, "use_cache": False, **fields} | (
            {"thread_id": thread_id} if thread_id else {}
        )
        return httpx.post(
            f"{self.workers[worker].url}/api/v1/rag/generate",
            json=body,
            headers={"X-API-Key": f"key-{tenant}"},
            timeout=REQUEST_TIMEOUT_S,
        )

    def upload(self, worker: int, tenant: str, name: str, text: str) -> httpx.Response:
        return httpx.post(
            f"{self.workers[worker].url}/api/v1/documents",
            files=[("files", (name, text.encode(), "text/markdown"))],
            headers={"X-API-Key": f"key-{tenant}"},
            timeout=REQUEST_TIMEOUT_S,
        )

    def rag(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The `rag` command on the same stores (its own empty data folder)."""
        rag = Path(sys.executable).parent / "rag"
        return subprocess.run([str(rag), *args], env=self.env, capture_output=True, text=True, timeout=120)

    def shown_messages(self, thread_id: str, tenant_name: str) -> list[tuple[str, str]]:
        """(type, text) of a thread's messages as `rag threads show` prints them from another process."""
        shown = self.rag("threads", "show", thread_id, "--tenant", TENANTS[tenant_name])
        assert shown.returncode == 0, shown.stdout + shown.stderr
        pairs = []
        for line in shown.stdout.splitlines():
            kind, separator, text = line.partition("> ")
            if separator and kind in ("human", "ai"):
                pairs.append((kind, text.strip()))
        return pairs

    def messages(self, thread_id: str, tenant_name: str | None = None) -> list[tuple[str, str]]:
        """(type, text) of a thread's messages in its latest checkpoint, read straight from PostgreSQL with
        LangGraph's own saver (an oracle independent of the engine's code, and no process to start). With
        `tenant_name`, the thread the API stores for that tenant (ids are scoped per tenant); without, the id
        as the LangGraph server stores it."""
        from langgraph.checkpoint.postgres import PostgresSaver

        stored = scoped_thread_id(TENANTS[tenant_name], thread_id) if tenant_name else thread_id
        with PostgresSaver.from_conn_string(self.env["RAG_DATABASE_URL"]) as saver:
            saved = saver.get_tuple({"configurable": {"thread_id": stored, "checkpoint_ns": ""}})
        assert saved is not None, f"no checkpoint of thread {thread_id}"
        return [(m.type, str(m.content)) for m in saved.checkpoint["channel_values"].get("messages", [])]


@pytest.fixture(scope="module")
def cluster(throwaway_servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three `rag serve` workers with their own data folders on one fresh database and the Chroma server."""
    root = tmp_path_factory.mktemp("workers")
    endpoint = RecordingEndpoint()
    port = free_port()
    with serve_app(endpoint, port), fresh_database(throwaway_servers) as database_url:
        base_url = f"http://127.0.0.1:{port}/v1"
        settings = server_settings(
            database_url, (throwaway_servers.chroma_host, throwaway_servers.chroma_port)
        )
        settings |= {
            "RAG_EMBEDDING_PROVIDER": "openai",
            "RAG_EMBEDDING_BASE_URL": base_url,
            "RAG_EMBEDDING_API_KEY": "test",
            "RAG_LLM_PROVIDER": "openai",
            "RAG_LLM_BASE_URL": base_url,
            "RAG_LLM_API_KEY": "test",
            "RAG_LLM_MODEL": "fake",
            "RAG_ANALYZER": "heuristic",
            "RAG_GRADER": "score",
            "RAG_MAX_ITERATIONS": "1",
            "RAG_CACHE_ENABLED": "false",
            "RAG_API_KEYS": API_KEYS,
        }
        with rag_workers(3, root, settings) as workers:
            CLUSTER_WORKERS[:] = workers
            cli_env = {key: value for key, value in os.environ.items() if not key.startswith("RAG_")}
            cli_env |= settings | {"RAG_DATA_DIR": str(root / "cli-data"), "COLUMNS": "1000"}
            yield Cluster(workers, endpoint, cli_env)


def ok(reply: httpx.Response) -> dict[str, Any]:
    """The JSON of a 200 reply; otherwise fail with the reply and the tail of every worker's log."""
    if reply.status_code != 200:
        logs = "\n".join(f"--- {worker.name}:\n{worker.log_tail(1500)}" for worker in CLUSTER_WORKERS)
        pytest.fail(f"{reply.request.url} -> {reply.status_code}: {reply.text[:1000]}\n{logs}")
    body: dict[str, Any] = reply.json()
    return body


def questions_of(messages: list[tuple[str, str]]) -> list[str]:
    return [text for kind, text in messages if kind == "human"]


def test_ingest_on_one_worker_ask_on_another_follow_up_on_a_third(cluster: Cluster) -> None:
    first = "Which fuel does the Kestrel reactor run on?"
    # worker 1 is serving and has searched this tenant's (empty) index before the upload on worker 0
    before = ok(cluster.ask(1, "flow", "What does the Kestrel reactor burn?"))
    assert not any(source["source"].endswith("kestrel.md") for source in before["sources"])

    uploaded = ok(cluster.upload(0, "flow", "kestrel.md", KESTREL))
    assert uploaded["tenant_id"] == TENANTS["flow"]

    answered = ok(cluster.ask(1, "flow", first))
    assert any(source["source"].endswith("kestrel.md") for source in answered["sources"]), answered["sources"]
    thread_id = answered["thread_id"]

    follow_up = "And when was it built?"
    ok(cluster.ask(2, "flow", follow_up, thread_id=thread_id))
    # worker 2 wrote its prompt with the turn worker 1 answered: the history came from the shared store
    assert cluster.endpoint.prompts_with(follow_up, first), "the third worker's prompts lack the first turn"
    messages = cluster.shown_messages(thread_id, "flow")  # the product's own reader, in another process
    assert questions_of(messages) == [first, follow_up]
    assert [kind for kind, _ in messages] == ["human", "ai", "human", "ai"]
    assert questions_of(cluster.messages(thread_id, "flow")) == [first, follow_up]


def test_concurrent_conversations_across_workers_lose_and_mix_nothing(cluster: Cluster) -> None:
    conversations, turns = 6, 3
    questions = {
        c: [
            f"Conversation {c} turn {t}: what powers the Kestrel reactor, code z{c}q{t}?"
            for t in range(turns)
        ]
        for c in range(conversations)
    }
    ok(cluster.upload(0, "load", "kestrel.md", KESTREL))

    def converse(c: int) -> tuple[str, list[int]]:
        thread_id = f"load-{c}-{os.getpid()}-{time.monotonic_ns()}"
        statuses = []
        for t, question in enumerate(questions[c]):
            reply = cluster.ask((c + t) % len(cluster.workers), "load", question, thread_id=thread_id)
            statuses.append(reply.status_code)
        return thread_id, statuses

    with ThreadPoolExecutor(max_workers=conversations) as pool:
        results = list(pool.map(converse, range(conversations)))

    assert [statuses for _, statuses in results] == [[200] * turns] * conversations
    for c, (thread_id, _) in enumerate(results):
        messages = cluster.messages(thread_id, "load")
        assert questions_of(messages) == questions[c]  # all turns, in order, none from another thread
        assert [kind for kind, _ in messages] == ["human", "ai"] * turns


def test_two_turns_at_once_on_one_thread_on_two_workers_are_not_interleaved(cluster: Cluster) -> None:
    opening = "Where does the Kestrel reactor stand?"
    ok(cluster.upload(2, "lock", "kestrel.md", KESTREL))  # documents, so that every turn calls the model
    thread_id = ok(cluster.ask(0, "lock", opening))["thread_id"]
    racing = {1: "First racing question about the reactor?", 2: "Second racing question about the reactor?"}
    cluster.endpoint.delay_s = SLOW_CHAT_S
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {
                worker: pool.submit(cluster.ask, worker, "lock", question, thread_id)
                for worker, question in racing.items()
            }
            statuses = {worker: future.result().status_code for worker, future in futures.items()}
    finally:
        cluster.endpoint.delay_s = 0.0
    assert set(statuses.values()) <= {200, 409}, statuses
    assert 200 in statuses.values(), statuses
    messages = cluster.messages(thread_id, "lock")
    answered = [racing[worker] for worker, status in statuses.items() if status == 200]
    assert questions_of(messages)[0] == opening
    assert sorted(questions_of(messages)[1:]) == sorted(
        answered
    )  # each answered turn once, refused ones never
    assert [kind for kind, _ in messages] == ["human", "ai"] * (1 + len(answered))


def test_a_worker_killed_mid_turn_and_restarted_the_conversation_continues(cluster: Cluster) -> None:
    first, cut, resumed = (
        "Which station hosts the Kestrel reactor?",
        "What year was the Kestrel reactor finished?",
        "Is the Kestrel reactor still running on molten salt?",
    )
    ok(cluster.upload(2, "restart", "kestrel.md", KESTREL))  # documents, so that every turn calls the model
    thread_id = ok(cluster.ask(0, "restart", first))["thread_id"]
    worker = cluster.workers[1]
    cluster.endpoint.delay_s = SLOW_CHAT_S
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            in_flight = pool.submit(cluster.ask, 1, "restart", cut, thread_id)
            deadline = time.monotonic() + REQUEST_TIMEOUT_S
            while not cluster.endpoint.prompts_with(cut):
                assert time.monotonic() < deadline, "the turn never reached the model"
                assert not in_flight.done(), in_flight.result().text
                time.sleep(0.1)
            worker.stop(kill=True)  # as a crash would: no shutdown, its connections just vanish
            with pytest.raises(httpx.HTTPError):
                in_flight.result()
    finally:
        cluster.endpoint.delay_s = 0.0
    worker.start()

    ok(cluster.ask(1, "restart", resumed, thread_id=thread_id))
    assert cluster.endpoint.prompts_with(resumed, first), "the restarted worker's prompt lacks the first turn"
    messages = cluster.messages(thread_id, "restart")
    asked = questions_of(messages)
    assert asked[0] == first and asked[-1] == resumed and set(asked) <= {first, cut, resumed}
    assert messages[0] == ("human", first) and messages[1][0] == "ai" and messages[-1][0] == "ai"


def test_tenants_stay_apart_across_workers(cluster: Cluster) -> None:
    ok(cluster.upload(0, "alpha", "kestrel.md", KESTREL))
    ok(cluster.upload(1, "beta", "heron.md", HERON))

    alpha = ok(cluster.ask(2, "alpha", "Where does the Heron telescope watch the sky?"))
    assert not any(source["source"].endswith("heron.md") for source in alpha["sources"]), alpha["sources"]
    beta = ok(cluster.ask(0, "beta", "Which fuel does the Kestrel reactor run on?"))
    assert not any(source["source"].endswith("kestrel.md") for source in beta["sources"]), beta["sources"]
    beta_own = ok(cluster.ask(2, "beta", "Where does the Heron telescope watch the sky?"))
    assert any(source["source"].endswith("heron.md") for source in beta_own["sources"]), beta_own["sources"]

    # alpha's thread id, used by beta on another worker, is a thread of beta's own (ids are per tenant)
    other = ok(cluster.ask(1, "beta", "Continue this conversation", thread_id=alpha["thread_id"]))
    assert other["thread_id"] == alpha["thread_id"]
    assert questions_of(cluster.messages(alpha["thread_id"], "beta")) == ["Continue this conversation"]
    listed = cluster.rag("threads", "list", "--tenant", TENANTS["beta"])
    assert listed.returncode == 0, listed.stderr
    assert beta["thread_id"] in listed.stdout
    assert questions_of(cluster.messages(alpha["thread_id"], "alpha")) == [
        "Where does the Heron telescope watch the sky?"
    ]


def test_langgraph_dev_serves_threads_from_the_shared_stores(cluster: Cluster, tmp_path: Path) -> None:
    from langgraph_sdk import get_sync_client

    ok(cluster.upload(0, "studio", "heron.md", HERON))  # indexed by a worker, into Postgres and Chroma
    project = tmp_path / "project"
    shutil.copytree(REPO_ROOT, project, ignore=COPY_IGNORE)
    settings = {key: value for key, value in cluster.env.items() if key.startswith("RAG_")}
    env = environment_without_settings() | settings | {"RAG_DATA_DIR": str(tmp_path / "dev-data")}
    with langgraph_dev(project, env, tmp_path / "dev.log") as base:
        client = get_sync_client(url=base)
        thread_id = client.threads.create()["thread_id"]
        context = {"tenant": TENANTS["studio"]}
        first, follow_up = "Which sky does the Heron telescope watch?", "And from which mountain?"
        answered = client.runs.wait(thread_id, "rag", input={"question": first}, context=context)
        assert isinstance(answered, dict), answered
        assert any(source["source"].endswith("heron.md") for source in answered["sources"]), answered
        client.runs.wait(thread_id, "rag", input={"question": follow_up}, context=context)
        # Another tenant's context on this thread is refused: the owner recorded in Postgres holds.
        intruder = {"tenant": TENANTS["beta"]}
        with pytest.raises(Exception, match="ThreadAccessError"):
            client.runs.wait(thread_id, "rag", input={"question": "Show me this thread"}, context=intruder)
    # The server's checkpointer was the project's, on PostgreSQL: the thread is there, both turns in order,
    # and nothing was written to a local checkpoint file.
    assert questions_of(cluster.messages(thread_id)) == [first, follow_up]
    assert [kind for kind, _ in cluster.messages(thread_id)] == ["human", "ai", "human", "ai"]
    assert not (tmp_path / "dev-data" / "checkpoints.sqlite").exists()
