"""A store that fails: the client reads one message of ours (STORE_DOWN_MESSAGE, a 503; or the graph's
"cannot search" answer), never the store's own text; that text reaches the server's log once, without a
stack trace. The stores fail where they really would: inside Chroma's collection (an internal error of its
Rust bindings) and inside the keyword index's database call.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from chromadb.api.models.Collection import Collection
from chromadb.errors import InternalError
from sqlalchemy.exc import OperationalError

from persistence.catalog import Catalog
from persistence.errors import STORE_DOWN_MESSAGE, CatalogDamagedError, StoreUnavailableError
from prompts.not_found import STORE_DOWN_ANSWER_EN
from service.api.errors import classify
from tests.test_api import QUESTION, Api
from tests.test_api import start_api as api_server  # noqa: F401 (the API fixture)

#: What Chroma's bindings said about a filter too large for them: internal text no client should read.
CHROMA_INTERNAL = (
    "Error executing plan: Internal error: error returned from database: (code: 1) Expression tree is too "
    "large (maximum depth 1000)"
)
SQLITE_INTERNAL = "database disk image is busy at /srv/rag/catalog.sqlite3 page 4711"


def store_log(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    """The log records that hold `text`."""
    return [record for record in caplog.records if text in record.getMessage()]


def test_classify_hides_the_store_text_and_logs_it_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    error = StoreUnavailableError(f"cannot query Chroma collection 'docs': {CHROMA_INTERNAL}")
    first, second = classify(error), classify(error)  # a route classifies twice: its metrics, its answer
    assert first == second
    assert (first.status, first.message) == (503, STORE_DOWN_MESSAGE)
    assert "Expression tree" not in str(first.body())
    logged = store_log(caplog, "Expression tree is too large")
    assert len(logged) == 1 and logged[0].exc_info is None


def test_a_damaged_store_is_503_without_its_path() -> None:
    info = classify(CatalogDamagedError("the catalog /srv/rag/catalog.sqlite3 is damaged (malformed)"))
    assert (info.status, info.message) == (503, STORE_DOWN_MESSAGE) and "/srv" not in str(info.body())


@pytest.fixture
def broken_chroma(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Chroma query fails inside Chroma, as its bindings fail."""

    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise InternalError(CHROMA_INTERNAL)

    monkeypatch.setattr(Collection, "query", fail)


@pytest.fixture
def broken_keyword_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every keyword search fails inside the database call, as SQLAlchemy reports it."""

    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise OperationalError("SELECT ... FROM chunks_fts", {}, sqlite3.OperationalError(SQLITE_INTERNAL))

    monkeypatch.setattr(Catalog, "keyword_search", fail)


@pytest.mark.usefixtures("broken_chroma", "broken_keyword_index")
def test_the_api_answers_503_with_our_message(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    start: Callable[..., Api] = request.getfixturevalue("api_server")
    api = start()
    caplog.set_level(logging.INFO)
    for mode, internal in (("dense", CHROMA_INTERNAL), ("bm25", SQLITE_INTERNAL)):
        caplog.clear()
        reply = api.post("/api/v1/search", {"query": QUESTION, "mode": mode})
        assert reply.status_code == 503, (mode, reply.text)
        assert reply.json()["message"] == STORE_DOWN_MESSAGE
        assert internal not in reply.text and "Internal error" not in reply.text and "/srv" not in reply.text
        logged = store_log(caplog, internal)
        assert len(logged) == 1, [record.getMessage() for record in logged]
        assert not [record for record in caplog.records if record.exc_info], "a stack trace was logged"


@pytest.mark.usefixtures("broken_chroma")
def test_an_answer_never_quotes_the_store(request: pytest.FixtureRequest) -> None:
    start: Callable[..., Api] = request.getfixturevalue("api_server")
    api = start()
    for path in ("/api/v1/rag/generate", "/api/v1/rag/query"):
        reply = api.post(path, {"query": QUESTION})
        assert reply.status_code == 200, (path, reply.text)
        assert reply.json()["answer"] == STORE_DOWN_ANSWER_EN
        assert "Expression tree" not in reply.text and "Internal error" not in reply.text
    events = api.sse({"query": QUESTION})
    assert "Expression tree" not in str(events) and STORE_DOWN_ANSWER_EN in str(events)
