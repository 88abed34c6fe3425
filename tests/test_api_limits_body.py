"""Request bodies and abandoned requests (JSON bodies, uploads, clients that leave).

- The API key is checked from the headers before any byte of the body is read (401), and bodies are capped:
  over RAG_API_MAX_JSON_BYTES / RAG_API_MAX_UPLOAD_BYTES is 413 naming the limit, refused by Content-Length
  at once or, for a chunked body, as soon as the bytes received pass the cap. Checked on the raw ASGI app
  with a `receive` that counts what the app took, and over a real server for uploads (nothing stored).
- A client that disconnects mid-stream leaves no question without its answer in the thread: the turn is
  rolled back, a 499 is logged and counted (rag_client_disconnects_total); an upload whose client leaves
  stops its ingestion (ingest_paths' should_stop) and keeps no file it did not finish; so does raw text
  (/documents/text), which stops before its next embedding batch and stores nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from langchain_core.messages import BaseMessage
from prometheus_client.parser import text_string_to_metric_families

from config.settings import Settings
from graphs.runner import Session
from nodes.resources import Resources
from retrieval import chunk_records
from retrieval.ingest import IngestSummary, ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.api import routes_documents
from service.api.app import create_app
from tests.conftest import write_corpus
from tests.fakes import HashEmbeddings, StreamingTaskModel, TaskChatModel
from tests.helpers.api_server import serve_app

KEY = "k-acme"
HEADERS = {"X-API-Key": KEY}
REPLY = "Jupiter is the largest planet in the Solar System [1]."
QUESTION = "What is the largest planet in the Solar System?"
FOLLOW_UP = "How many moons does Jupiter have?"
ANOTHER = "Which planet has 95 moons?"
CORPUS = {"jupiter.md": "# Jupiter\n\nJupiter is the largest planet in the Solar System. It has 95 moons."}
#: The start of a multipart upload of one file (its data follows).
MULTIPART_START = (
    b'--xyz\r\nContent-Disposition: form-data; name="files"; filename="big.md"\r\n'
    b"Content-Type: text/markdown\r\n\r\n"
)
#: Seconds a test waits for something the server does in the background (generous: never a timing claim).
PATIENCE_S = 15


# --- raw ASGI ---------------------------------------------------------------------------------------------


class Upload:
    """An ASGI request: headers and a body served in chunks by `receive`, counting what the app took."""

    def __init__(
        self,
        chunks: int,
        chunk_bytes: int = 1 << 20,
        headers: dict[str, str] | None = None,
        first: bytes = b"",
    ) -> None:
        self.left, self.chunk, self.first = chunks, b"x" * chunk_bytes, first
        self.headers = headers or {}
        self.received = 0

    async def receive(self) -> dict[str, Any]:
        if self.left == 0:
            return {"type": "http.disconnect"}
        self.left -= 1
        body, self.first = self.first + self.chunk, b""
        self.received += len(body)
        return {"type": "http.request", "body": body, "more_body": self.left > 0}


def call(app: FastAPI, path: str, request: Upload) -> tuple[int, dict[str, str], dict[str, Any]]:
    """POST `request` to `app` through ASGI (no server): the status, headers and JSON body."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(name.lower().encode(), value.encode()) for name, value in request.headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "app": app,
    }
    asyncio.run(app(scope, request.receive, send))  # type: ignore[arg-type]
    start = next(message for message in sent if message["type"] == "http.response.start")
    headers = {name.decode().lower(): value.decode() for name, value in start["headers"]}
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    return start["status"], headers, json.loads(body)


@pytest.fixture
def keyed_app(make_settings: Callable[..., Settings]) -> Callable[..., FastAPI]:
    """`keyed_app(**settings)`: the API with one key (no server, no lifespan: nothing is loaded)."""

    def build(**overrides: Any) -> FastAPI:
        return create_app(make_settings(api_keys=f"{KEY}:acme", **overrides))

    return build


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/api/v1/documents", "multipart/form-data; boundary=xyz"),
        ("/api/v1/rag/generate", "application/json"),
        ("/api/v1/documents/text", "application/json"),
    ],
)
@pytest.mark.parametrize("chunked", [False, True])
def test_a_request_without_a_key_is_401_before_its_body_is_read(
    keyed_app: Callable[..., FastAPI], path: str, content_type: str, chunked: bool
) -> None:
    request = Upload(chunks=60, headers={"Content-Type": content_type})  # 60 MB
    if chunked:
        request.headers["Transfer-Encoding"] = "chunked"
    else:
        request.headers["Content-Length"] = str(60 << 20)
    status, headers, body = call(keyed_app(), path, request)
    assert status == 401 and body["error"] == "Unauthorized" and "X-API-Key" in body["message"]
    assert request.received == 0  # not one byte of the body was taken
    assert headers["connection"] == "close"  # the server need not read the rest


def test_an_unknown_key_is_401_before_the_body_too(keyed_app: Callable[..., FastAPI]) -> None:
    request = Upload(chunks=5, headers={"Content-Length": str(5 << 20), "X-API-Key": "stolen"})
    status, _headers, body = call(keyed_app(), "/api/v1/documents", request)
    assert status == 401 and body["message"] == "unknown API key" and request.received == 0


def test_a_json_body_over_its_stated_length_cap_is_413_unread(keyed_app: Callable[..., FastAPI]) -> None:
    request = Upload(
        chunks=3,
        chunk_bytes=2000,
        headers={**HEADERS, "Content-Type": "application/json", "Content-Length": "6000"},
    )
    status, headers, body = call(keyed_app(api_max_json_bytes=4096), "/api/v1/rag/generate", request)
    assert status == 413 and body["error"] == "PayloadTooLarge"
    assert "4096 bytes" in body["message"] and "RAG_API_MAX_JSON_BYTES" in body["message"]
    assert request.received == 0 and headers["connection"] == "close"


def test_a_chunked_json_body_stops_being_read_at_its_cap(keyed_app: Callable[..., FastAPI]) -> None:
    request = Upload(
        chunks=100,
        chunk_bytes=1000,
        headers={**HEADERS, "Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    status, _headers, body = call(keyed_app(api_max_json_bytes=4096), "/api/v1/documents/text", request)
    assert status == 413 and "RAG_API_MAX_JSON_BYTES" in body["message"], body
    assert request.received <= 4096 + 1000  # the chunk that passed the cap, and no more


def test_a_chunked_upload_stops_being_read_at_the_upload_cap(keyed_app: Callable[..., FastAPI]) -> None:
    request = Upload(
        chunks=50,
        chunk_bytes=1 << 16,
        first=MULTIPART_START,
        headers={
            **HEADERS,
            "Content-Type": "multipart/form-data; boundary=xyz",
            "Transfer-Encoding": "chunked",
        },
    )
    app = keyed_app(api_max_upload_bytes=1 << 18, api_max_json_bytes=1024)
    status, _headers, body = call(app, "/api/v1/documents", request)
    assert status == 413 and f"{1 << 18} bytes (RAG_API_MAX_UPLOAD_BYTES)" in body["message"], body
    assert request.received <= (1 << 18) + (1 << 16) + len(MULTIPART_START)


def test_the_upload_cap_is_the_upload_routes_alone(keyed_app: Callable[..., FastAPI]) -> None:
    # A multipart body sent to a JSON route gets the JSON cap, whatever it claims to be.
    request = Upload(
        chunks=1,
        chunk_bytes=8192,
        headers={**HEADERS, "Content-Type": "multipart/form-data; boundary=xyz", "Content-Length": "8192"},
    )
    app = keyed_app(api_max_upload_bytes=1 << 20, api_max_json_bytes=4096)
    status, _headers, body = call(app, "/api/v1/rag/generate", request)
    assert status == 413 and "RAG_API_MAX_JSON_BYTES" in body["message"]


# --- over a real server -----------------------------------------------------------------------------------


class Api:
    """A running server, its settings and model."""

    def __init__(
        self, client: httpx.Client, resources: Resources, model: TaskChatModel, app: FastAPI
    ) -> None:
        self.client, self.resources, self.model, self.app = client, resources, model, app
        self.settings: Settings = app.state.api.settings

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample of /metrics (0 when absent)."""
        for family in text_string_to_metric_families(self.client.get("/metrics").text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return 0.0

    def messages(self, thread_id: str) -> list[tuple[str, str]]:
        """The thread's history as (type, text) pairs, read through the API's own runner (a second SQLite
        connection in the test could hold a read lock that stalls the server's writes)."""
        session: Session = self.app.state.api.engine.session()
        history = session.history(thread_id)
        return [(message.type, str(message.content)) for message in history.get("messages", [])]


@pytest.fixture
def start_api(
    tmp_path: Path, install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]
) -> Iterator[Callable[..., Api]]:
    """`start_api(model=None, **settings)`: a uvicorn server over a one-document corpus, fake models."""
    with ExitStack() as servers:

        def start(model: TaskChatModel | None = None, **overrides: Any) -> Api:
            model = model or StreamingTaskModel(replies={"generate": REPLY})
            resources = install(model, strength="weak")
            resources.knowledge_base = make_kb(resources.settings)
            files = write_corpus(tmp_path / "corpus", CORPUS)
            ingest_paths(resources.knowledge_base, list(files.values()))
            app = create_app(resources.settings.model_copy(update=overrides))
            return Api(servers.enter_context(serve_app(app)), resources, model, app)

        yield start


def test_an_upload_over_the_cap_is_413_and_stores_nothing(start_api: Callable[..., Api]) -> None:
    api = start_api(api_max_upload_bytes=4096)
    text = "# Kelp\n\n" + "Kelp forests grow along cold coasts. " * 300  # ~11 KB, under RAG_MAX_FILE_BYTES
    reply = api.client.post("/api/v1/documents", files={"files": ("kelp.md", text, "text/markdown")})
    assert reply.status_code == 413, reply.text
    assert (
        reply.json()["message"] == "request body too large: more than 4096 bytes (RAG_API_MAX_UPLOAD_BYTES)"
    )
    sources = [document["source"] for document in api.client.get("/api/v1/documents").json()["documents"]]
    assert not any(source.endswith("kelp.md") for source in sources)
    assert not list((api.settings.data_dir / "uploads").rglob("kelp.md"))
    assert api.metric("rag_requests_total", method="POST", route="/api/v1/documents", status="413") == 1


def test_bodies_under_the_caps_are_served(start_api: Callable[..., Api]) -> None:
    api = start_api(api_max_upload_bytes=8192, api_max_json_bytes=2048)
    upload = api.client.post("/api/v1/documents", files={"files": ("kelp.md", "# Kelp\n\nKelp grows fast.")})
    assert upload.status_code == 200 and upload.json()["indexed"] == 1, upload.text
    text = api.client.post("/api/v1/documents/text", json={"text": "Saturn has rings of ice."})
    assert text.status_code == 200, text.text
    assert api.client.post("/api/v1/documents/text", json={"text": "x" * 3000}).status_code == 413


def test_a_key_with_a_body_is_checked_then_the_route_decides(start_api: Callable[..., Api]) -> None:
    api = start_api(api_keys=f"{KEY}:default")
    text = {"text": "Saturn has rings of ice."}
    assert api.client.post("/api/v1/documents/text", json=text).status_code == 401
    assert api.client.post("/api/v1/documents/text", json=text, headers=HEADERS).status_code == 200
    other = api.client.post("/api/v1/documents/text", json={**text, "tenant_id": "globex"}, headers=HEADERS)
    assert other.status_code == 403  # the tenant named in the body: still the route's check
    public = api.client.get("/api/v1/rag/health")  # needs no key, and then says only up or down
    assert (public.status_code, public.json()) == (200, {"status": "up"})
    assert api.client.get("/health").status_code == 200


# --- a client that leaves mid-stream ----------------------------------------------------------------------


class HeldModel:
    """The generate reply: a prompt holding `trigger` waits inside the model until `release` is set."""

    def __init__(self, trigger: str = "") -> None:
        self.trigger = trigger
        self.release, self.inside = threading.Event(), threading.Event()

    def __call__(self, messages: list[BaseMessage]) -> str:
        if self.trigger in "\n".join(str(message.content) for message in messages):
            self.inside.set()
            self.release.wait(PATIENCE_S)
        return REPLY


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("keep", [0, 1])  # 1: the pre-turn checkpoint is pruned when the stopped run saves
def test_a_stream_left_mid_answer_is_rolled_back_logged_and_counted(
    start_api: Callable[..., Api], caplog: pytest.LogCaptureFixture, keep: int
) -> None:
    held = HeldModel(trigger=FOLLOW_UP)
    api = start_api(StreamingTaskModel(replies={"generate": held}), checkpoint_keep=keep)
    first = api.client.post("/api/v1/rag/generate", json={"query": QUESTION, "thread_id": "t-left"})
    assert first.status_code == 200, first.text
    whole_turn = api.messages("t-left")
    assert [kind for kind, _ in whole_turn] == ["human", "ai"]

    caplog.set_level(logging.WARNING, logger="service.api.runtime")
    with api.client.stream(
        "POST", "/api/v1/rag/generate/events", json={"query": FOLLOW_UP, "thread_id": "t-left"}
    ) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()  # kept: a dropped line iterator would close the connection now
        next(line for line in lines if line.startswith("event:"))
        assert held.inside.wait(PATIENCE_S)  # the run is inside the model: its question saved when it stops
    wait_for(lambda: api.metric("rag_client_disconnects_total", route="generate_events") == 1, "the 499")
    assert any("499 POST /api/v1/rag/generate/events" in record.message for record in caplog.records)
    held.release.set()  # the model call ends; the run stops at its next step

    # The next turn waits for the thread until the stopped run has let it go (after its rollback), then goes
    # on from the last whole turn: no question without its answer in between.
    again = api.client.post("/api/v1/rag/generate", json={"query": ANOTHER, "thread_id": "t-left"})
    assert again.status_code == 200, again.text
    assert api.messages("t-left")[:2] == whole_turn
    assert [(kind, text) for kind, text in api.messages("t-left")][2:3] == [("human", ANOTHER)]
    assert len(api.messages("t-left")) == 4


def test_a_run_past_its_limit_leaves_no_new_thread_behind(start_api: Callable[..., Api]) -> None:
    held = HeldModel(trigger=QUESTION)
    api = start_api(StreamingTaskModel(replies={"generate": held}), api_run_timeout_s=3)
    try:
        reply = api.client.post("/api/v1/rag/generate", json={"query": QUESTION, "thread_id": "t-late"})
        assert reply.status_code == 504, reply.text
    finally:
        held.release.set()
    again = api.client.post("/api/v1/rag/generate", json={"query": ANOTHER, "thread_id": "t-late"})
    assert again.status_code == 200, again.text
    assert [(kind, text) for kind, text in api.messages("t-late")][:1] == [("human", ANOTHER)]
    assert len(api.messages("t-late")) == 2


# --- an upload whose client leaves ------------------------------------------------------------------------


def test_an_upload_whose_client_leaves_stops_its_ingestion(
    install: Callable[..., Resources],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    resources = install(TaskChatModel(), strength="weak")
    resources.knowledge_base = make_kb(resources.settings)
    app = create_app(resources.settings)
    asked: list[bool] = []

    def ingest_until_stopped(*_args: Any, should_stop: Callable[[], bool] | None = None, **_kw: Any) -> Any:
        deadline = time.monotonic() + PATIENCE_S
        while not (should_stop is not None and should_stop()):
            assert time.monotonic() < deadline, "ingestion was never told to stop"
            time.sleep(0.01)
        asked.append(True)
        return IngestSummary(stopped=True)

    monkeypatch.setattr(routes_documents, "ingest_paths", ingest_until_stopped)
    body = MULTIPART_START + b"# Kelp\n\nKelp grows fast.\r\n--xyz--\r\n"
    # The whole body, then the client is gone (the next receive is http.disconnect).
    request = Upload(
        chunks=1,
        chunk_bytes=0,
        first=body,
        headers={"Content-Type": "multipart/form-data; boundary=xyz", "Content-Length": str(len(body))},
    )
    status, _headers, reply = call(app, "/api/v1/documents", request)
    assert asked == [True]
    assert status == 499 and reply["error"] == "ClientDisconnected", reply
    assert "0 of 1 files done when ingestion stopped" in reply["message"]
    assert not list((resources.settings.data_dir / "uploads").rglob("big.md"))  # unfinished: not kept
    assert any("499 POST /api/v1/documents" in record.message for record in caplog.records)
    samples = text_string_to_metric_families(app.state.api.metrics.exposition().decode())
    counted = [s.value for f in samples for s in f.samples if s.name == "rag_client_disconnects_total"]
    assert counted == [1.0]


class EmbedsUntilTheClientLeft(HashEmbeddings):
    """Embeds its first batch only once the server has seen the client leave (`left` set), so that the
    check before the next batch is the one that must stop the indexing."""

    def __init__(self, left: threading.Event) -> None:
        super().__init__()
        self.left = left

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        assert self.left.wait(PATIENCE_S), "the server never saw the client leave"
        return super().embed_documents(texts)


def test_raw_text_whose_client_leaves_stops_indexing_and_stores_nothing(
    install: Callable[..., Resources],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    left = threading.Event()
    resources = install(TaskChatModel(), strength="weak")
    embedder = EmbedsUntilTheClientLeft(left)
    kb = make_kb(resources.settings, embedder)
    resources.knowledge_base = kb
    watch = routes_documents._set_when_gone

    async def watch_and_tell(request: Any, gone: threading.Event) -> None:
        await watch(request, gone)
        left.set()

    monkeypatch.setattr(routes_documents, "_set_when_gone", watch_and_tell)
    monkeypatch.setattr(chunk_records, "EMBED_BATCH_CHUNKS", 1)  # one chunk per batch: a check between chunks
    text = "\n\n".join(f"## Part {n}\n\n" + f"Kelp forest number {n} grows quickly. " * 40 for n in range(4))
    body = json.dumps({"text": text, "doc_id": "kelp", "title": "Kelp"}).encode()
    request = Upload(
        chunks=1,
        chunk_bytes=0,
        first=body,
        headers={"Content-Type": "application/json", "Content-Length": str(len(body))},
    )
    status, _headers, reply = call(app := create_app(resources.settings), "/api/v1/documents/text", request)
    assert status == 499 and reply["error"] == "ClientDisconnected", reply
    # Four parts, one chunk each at least: stopped before the first batch or the second, never past it.
    assert embedder.document_calls <= 1
    assert kb.catalog.documents() == []  # nothing half stored
    assert any("499 POST /api/v1/documents/text" in record.message for record in caplog.records)
    samples = text_string_to_metric_families(app.state.api.metrics.exposition().decode())
    counted = [s.value for f in samples for s in f.samples if s.name == "rag_client_disconnects_total"]
    assert counted == [1.0]
