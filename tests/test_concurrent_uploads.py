"""Concurrent uploads of one file name into one tenant's collection: each reply reports its own bytes
(SHA-256, status, chunks, the catalog's hash), and what stays stored and indexed is one whole upload
(service.api.routes_documents, under retrieval.ingest_lock).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from nodes.resources import Resources
from retrieval.knowledge_base import KnowledgeBase
from retrieval.public_source import upload_folder
from service.api.app import create_app
from tests.fakes import TaskChatModel
from tests.helpers.api_server import serve_app

#: Uploads sent at once, each with different bytes under the same name.
UPLOADS = 6
NAME = "harbour.md"


@pytest.fixture
def api(install: Callable[..., Resources], make_kb: Callable[..., KnowledgeBase]) -> Iterator[httpx.Client]:
    resources = install(TaskChatModel(), strength="weak")
    resources.knowledge_base = make_kb(resources.settings)
    with serve_app(create_app(resources.settings)) as client:
        yield client


def version(index: int) -> bytes:
    """Upload `index`'s bytes: a different text (and number of paragraphs) per upload."""
    paragraphs = [f"Version {index} of the harbour notes, paragraph {n}: kelp farm {index * 7 + n}." for n in
                  range(index + 1)]  # fmt: skip
    return ("# Harbour\n\n" + "\n\n".join(paragraphs)).encode()


def upload(api: httpx.Client, data: bytes) -> dict[str, Any]:
    reply = httpx.post(
        f"{api.base_url}/api/v1/documents",
        files={"files": (NAME, data, "text/markdown")},
        data={"collection": "notes"},
        timeout=120,
    )
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def test_six_uploads_of_one_name_each_report_their_own_bytes(api: httpx.Client, tmp_path: Path) -> None:
    contents = [version(index) for index in range(UPLOADS)]
    with ThreadPoolExecutor(UPLOADS) as pool:
        replies = list(pool.map(lambda data: upload(api, data), contents))
    reported = []
    for data, reply in zip(contents, replies, strict=True):
        (document,) = reply["documents"]
        assert document["sha256"] == hashlib.sha256(data).hexdigest()
        # Every upload's bytes differ from whatever preceded them, so each was indexed (never "skipped").
        assert document["status"] == "indexed" and reply["indexed"] == 1
        assert document["chunks"] >= 1 and document["file_hash"]
        reported.append(document)
    assert len({document["file_hash"] for document in reported}) == UPLOADS
    (listed,) = api.get("/api/v1/documents", params={"collection": "notes"}).json()["documents"]
    # Listings show an upload's place in the tenant's upload folder, never the server path.
    stored_path = upload_folder(tmp_path / "rag", "default") / listed["source"]
    stored = stored_path.read_bytes()
    assert stored in contents
    (last,) = [document for document in reported if document["file_hash"] == listed["file_hash"]]
    assert last["sha256"] == hashlib.sha256(stored).hexdigest()
    assert listed["chunks"] == last["chunks"]
    leftovers = sorted(path.name for path in stored_path.parent.iterdir() if path.name != NAME)
    assert leftovers == []  # no staged copy or backup left behind

    # "skipped" only for the bytes indexed now; another upload's bytes are indexed again.
    again = upload(api, stored)["documents"][0]
    assert (again["status"], again["sha256"]) == ("skipped", last["sha256"])
    other = next(data for data in contents if data != stored)
    assert upload(api, other)["documents"][0]["status"] == "indexed"


def test_one_name_twice_in_one_upload_is_refused(api: httpx.Client) -> None:
    reply = api.post(
        "/api/v1/documents",
        files=[
            ("files", (NAME, version(1), "text/markdown")),
            ("files", (NAME, version(2), "text/markdown")),
        ],
    )
    assert reply.status_code == 422, reply.text
    assert NAME in reply.json()["message"]
