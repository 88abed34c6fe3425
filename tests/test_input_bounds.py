"""Bounds on user input that reaches the stores: document metadata (core.metadata), memory ids, conversation
ids and upload file names. Over a bound, a request is a 422 naming it before any work; a file's record keeps
what fits, with one warning per file, and the tenant's Chroma collection stays readable."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.settings import Settings
from core.metadata import (
    MAX_METADATA_KEYS,
    MetadataBoundError,
    bound_record_metadata,
    validate_document_metadata,
)
from core.types import is_custom_metadata_key
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher
from service.api.routes_documents import MAX_UPLOAD_NAME_BYTES
from service.cli import app as cli_app
from tests.conftest import write_corpus
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings
from tests.helpers.api_server import serve
from tests.helpers.rag_world import QUESTION, World, world

WORD = "albatross"
#: Fields of the oversized record: the count that once left a collection unreadable.
MANY_FIELDS = 12_000


@pytest.fixture
def env(settings: Settings, kb: KnowledgeBase, tmp_path: Path) -> Iterator[World]:
    """The small indexed world with the fake chat model installed (no model call unless a turn runs)."""
    with world(settings, kb, tmp_path) as built:
        yield built


# --- core.metadata ----------------------------------------------------------------------------------------


def test_request_metadata_within_the_bounds_is_kept_unchanged() -> None:
    own = {f"k{i}": i for i in range(32)}
    given = {**own, "chapter": "One", "page": 3, "level": "detail", "flag": True, "ratio": 0.5}
    with pytest.raises(MetadataBoundError):  # k0..k31, flag and ratio: 34 keys of its own
        validate_document_metadata(given)
    within = {**{f"k{i}": i for i in range(30)}, "chapter": "One", "page": 3, "flag": True, "ratio": 0.5}
    assert validate_document_metadata(within) == within  # chapter and page are the schema's: not counted


@pytest.mark.parametrize(
    ("metadata", "field", "bound"),
    [
        ({f"k{i}": "v" for i in range(33)}, "metadata", "at most 32 keys"),
        ({"big": 2**63}, "metadata.big", "signed 64 bits"),
        ({"small": -(2**63) - 1}, "metadata.small", "signed 64 bits"),
        ({"nan": math.nan}, "metadata.nan", "finite"),
        ({"inf": math.inf}, "metadata.inf", "finite"),
        ({"long": "x" * 1001}, "metadata.long", "at most 1000 characters"),
        ({"k" * 65: 1}, "metadata." + "k" * 64, "at most 64 characters"),
        ({"source": "forged"}, "metadata.source", "not a settable metadata key"),
        ({"list": [1, 2]}, "metadata.list", "a string, an integer"),
    ],
)
def test_request_metadata_over_a_bound_names_the_key_and_the_bound(
    metadata: dict[str, object], field: str, bound: str
) -> None:
    with pytest.raises(MetadataBoundError, match=bound) as raised:
        validate_document_metadata(metadata)
    assert raised.value.field == field


def test_the_extremes_of_the_bounds_are_accepted() -> None:
    edge = {"top": 2**63 - 1, "bottom": -(2**63), "text": "x" * 1000, "k" * 64: 1.5}
    assert validate_document_metadata(edge) == edge
    assert is_custom_metadata_key("k" * 64) and not is_custom_metadata_key("k" * 65)


def test_a_record_keeps_what_fits_and_names_what_it_left_out() -> None:
    record: dict[str, object] = {"chapter": "One", **{f"f{i}": i for i in range(40)}, "huge": 2**64}
    bounded = bound_record_metadata(record)
    assert list(bounded.kept) == ["chapter", *(f"f{i}" for i in range(32))]
    assert bounded.dropped == (*(f"f{i}" for i in range(32, 40)), "huge")


# --- JSONL ingestion ----------------------------------------------------------------------------------------


def test_a_record_with_12000_fields_is_indexed_without_them_and_the_store_stays_readable(
    settings: Settings, kb: KnowledgeBase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wide = {"id": "wide", "text": f"The {WORD} glides over the southern ocean.", "category": "birds"}
    wide |= {f"field_{i}": i for i in range(MANY_FIELDS)}
    also_wide = {"id": "also", "text": "Penguins cannot fly.", **{f"g{i}": "v" for i in range(40)}}
    plain = {"id": "plain", "text": "Gulls nest on cliffs.", "category": "birds"}
    lines = "\n".join(json.dumps(record) for record in (wide, also_wide, plain))
    assert len(lines) > 150_000
    files = write_corpus(tmp_path / "corpus", {"birds.jsonl": lines})
    with caplog.at_level(logging.WARNING, logger="retrieval.ingest"):
        summary = ingest_paths(kb, list(files.values()))
    (result,) = summary.results
    assert result.status == "indexed" and result.chunks == 3
    left_out = (MANY_FIELDS + 1 - MAX_METADATA_KEYS) + (40 - MAX_METADATA_KEYS)  # `category` is kept
    assert result.warning is not None and result.warning.startswith(
        f"{left_out} metadata fields of 2 records"
    )
    assert summary.as_dict()["warnings"] == [{"source": result.source, "warning": result.warning}]
    assert len([r for r in caplog.records if "metadata fields" in r.getMessage()]) == 1  # one per file
    kb.close()

    reopened = KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    try:
        for mode in ("dense", "hybrid"):
            hits = Searcher(reopened).search(WORD, k=3, mode=mode).hits  # type: ignore[arg-type]
            assert hits and hits[0].metadata["doc_id"] == "wide", mode
        by_id = {hit.metadata["doc_id"]: hit.metadata for hit in Searcher(reopened).search(WORD, k=3).hits}
        own = {key for key in by_id["wide"] if key.startswith("field_")}
        assert own == {f"field_{i}" for i in range(MAX_METADATA_KEYS - 1)}
        assert by_id["wide"]["category"] == "birds"
        filtered = Searcher(reopened).search(WORD, k=3, mode="dense", filters={"field_0": 0}).hits
        assert [hit.metadata["doc_id"] for hit in filtered] == ["wide"]
    finally:
        reopened.close()


def test_a_file_within_the_bounds_has_no_warning(kb: KnowledgeBase, tmp_path: Path) -> None:
    files = write_corpus(tmp_path / "c", {"r.jsonl": json.dumps({"id": "a", "text": "Short.", "k": 1})})
    summary = ingest_paths(kb, list(files.values()))
    assert summary.results[0].warning is None and summary.as_dict()["warnings"] == []


def test_the_cli_prints_the_warning_once_per_file(
    settings: Settings,
    make_kb: Callable[..., KnowledgeBase],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, s=None: make_kb(s or settings)))
    records = [{"id": str(n), "text": f"Record {n}.", **{f"f{i}": i for i in range(50)}} for n in range(3)]
    files = write_corpus(tmp_path / "c", {"wide.jsonl": "\n".join(json.dumps(r) for r in records)})
    result = CliRunner().invoke(cli_app, ["ingest", str(files["wide.jsonl"])])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "metadata fields" in line]
    assert len(lines) == 1 and "54 metadata fields of 3 records left out" in lines[0]


# --- REST API -----------------------------------------------------------------------------------------------


def test_text_with_10000_metadata_keys_is_422_and_nothing_is_stored(env: World) -> None:
    body = {
        "text": f"The {WORD} sleeps on the wing.",
        "doc_id": "wide",
        "metadata": {f"k{i}": i for i in range(10_000)},
    }
    with serve(env.settings) as client:
        reply = client.post("/api/v1/documents/text", json=body)
        assert reply.status_code == 422, reply.text
        assert "at most 32 keys" in reply.text and "10000 given" in reply.text
        sources = [doc["source"] for doc in client.get("/api/v1/documents").json()["documents"]]
        assert not any(source.startswith("text:") for source in sources)
        big = client.post("/api/v1/documents/text", json={**body, "metadata": {"n": 2**64}})
        assert big.status_code == 422 and "metadata.n" in big.text
        fits = client.post("/api/v1/documents/text", json={**body, "metadata": {"k0": 2**63 - 1}})
        assert fits.status_code == 200, fits.text
    assert env.generate_calls() == 0


@pytest.mark.parametrize("memory_id", ["1" * 23, str(2**63), "0", "-1"])
def test_a_memory_id_that_cannot_exist_is_a_4xx(env: World, memory_id: str) -> None:
    with serve(env.settings) as client:
        reply = client.delete("/api/v1/memories", params={"id": memory_id})
        assert 400 <= reply.status_code < 500, reply.text
        assert "id" in reply.json()["message"]


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, {"nested": 1}, [1]])
def test_conversation_metadata_over_the_bounds_is_422_before_the_turn(env: World, value: object) -> None:
    body = {"query": QUESTION, "conversation_metadata": {"character_id": value}}
    with serve(env.settings) as client:
        reply = client.post("/api/v1/rag/generate", json=body)
        assert reply.status_code == 422, reply.text
        assert "character_id" in reply.text
        summary = client.post("/api/v1/conversations/t-1/summarize", json={"character_id": value})
        assert summary.status_code == 422, summary.text
    assert env.model.tasks() == []  # no model call: the turn never started


def test_an_upload_name_over_the_bound_is_422_and_one_at_the_bound_works(env: World) -> None:
    too_long = "n" * 300 + ".md"
    at_bound = "b" * (MAX_UPLOAD_NAME_BYTES - len(".md")) + ".md"
    content = f"# Birds\n\nThe {WORD} rides the wind for hours."
    with serve(env.settings) as client:
        reply = client.post(
            "/api/v1/documents", files={"files": (too_long, content.encode(), "text/markdown")}
        )
        assert reply.status_code == 422, reply.text
        assert f"at most {MAX_UPLOAD_NAME_BYTES} bytes" in reply.text
        for _ in range(2):  # the second upload keeps a backup of the first under a longer derived name
            ok = client.post(
                "/api/v1/documents", files={"files": (at_bound, f"{content} {_}".encode(), "text/markdown")}
            )
            assert ok.status_code == 200 and ok.json()["indexed"] == 1, ok.text
        wide = {"id": "w", "text": f"The {WORD} again.", **{f"f{i}": i for i in range(40)}}
        reply = client.post(
            "/api/v1/documents",
            files={"files": ("wide.jsonl", json.dumps(wide).encode(), "application/json")},
        )
        assert reply.status_code == 200, reply.text
        (warning,) = reply.json()["warnings"]
        assert warning["warning"].startswith("8 metadata fields of 1 record left out")
    uploads = env.settings.data_dir / "uploads"
    assert sorted(path.name for path in uploads.rglob("*") if path.is_file()) == sorted(
        [at_bound, "wide.jsonl"]
    )
