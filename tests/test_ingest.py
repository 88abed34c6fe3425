"""Ingestion: incremental re-indexing, pruning, bad files, a failing model, events, and the metadata schema.

The fake model counts what it embeds, so "nothing was embedded" and "only the changed chunk was embedded"
are observed directly; Chroma's ids are compared with the catalog's so the two stores never drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from config.settings import Settings
from core.types import CHUNK_METADATA_DEFAULTS
from persistence.catalog import chunks_table
from persistence.vector_store import chroma_client, chroma_collection_name
from retrieval.embeddings import EmbeddingError
from retrieval.indexing import index_event
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.loaders import LoaderError
from retrieval.search import Searcher
from retrieval.tokens import count_tokens
from tests.conftest import SAMPLE_CORPUS, write_corpus
from tests.fakes import FailingEmbeddings, HashEmbeddings

# Three paragraphs of 25-30 tokens: with chunk size 40 and no overlap, each paragraph is exactly one chunk
# (any two together exceed 40), so editing one paragraph changes exactly one chunk.
PARAGRAPHS = [
    "Alpha paragraph: the lighthouse keeper climbed the spiral stairs every evening to light the great lamp "
    "above the rocky northern shore.",
    "Beta paragraph: fishing boats returned before the storm, their holds full of silver herring and their "
    "crews tired after a long day.",
    "Gamma paragraph: the harbour master wrote the oldword tally in his ledger and locked the office before "
    "walking home along the pier.",
]


def chunk_rows(kb: KnowledgeBase) -> list[dict[str, Any]]:
    """Every chunk row of the catalog (metadata decoded)."""
    with kb.catalog.engine.connect() as connection:
        rows = connection.execute(chunks_table.select()).mappings().all()
    return [{**row, "metadata": json.loads(row["metadata"])} for row in rows]


def chroma_records(
    kb: KnowledgeBase, collection: str = "default", tenant: str = "default"
) -> dict[str, dict[str, Any]]:
    """Chroma's view of one tenant's collection: id -> metadata."""
    stored = chroma_client(kb.settings).get_collection(chroma_collection_name(tenant, collection))
    result = stored.get(include=["metadatas"])
    return dict(zip(result["ids"], result["metadatas"], strict=True))


def assert_stores_agree(kb: KnowledgeBase) -> None:
    """The catalog and Chroma hold exactly the same chunk ids."""
    catalog_ids = {row["chunk_id"] for row in chunk_rows(kb)}
    assert set(chroma_records(kb)) == catalog_ids
    assert kb.vectors.count("default", "default") == kb.catalog.count_chunks() == len(catalog_ids)


def found(kb: KnowledgeBase, query: str, mode: str = "bm25", k: int = 10) -> list[str]:
    """Texts of the hits for `query`."""
    return [hit.text for hit in Searcher(kb).search(query, mode=mode, k=k).hits]  # type: ignore[arg-type]


def fake(kb: KnowledgeBase) -> HashEmbeddings:
    """The fake model behind `kb` (to read its call counts)."""
    assert isinstance(kb.base_model, HashEmbeddings)
    return kb.base_model


@pytest.fixture
def small_chunks(make_settings: Callable[..., Settings]) -> Settings:
    """Chunk size 40, no overlap: paragraph edits map to single chunks."""
    return make_settings(chunk_size=40, chunk_overlap=0)


def test_paragraph_fixture_sizes() -> None:
    sizes = [count_tokens(paragraph) for paragraph in PARAGRAPHS]
    assert all(20 < size <= 40 for size in sizes)
    assert all(a + b > 40 for a in sizes for b in sizes)


# --- incremental ---------------------------------------------------------------------------------------


def test_reingesting_unchanged_files_skips_them_without_embedding(kb: KnowledgeBase, tmp_path: Path) -> None:
    write_corpus(tmp_path / "docs", {"a.md": "# A\n\nApples are red.", "b.txt": "Bananas are yellow."})
    first = ingest_paths(kb, [tmp_path / "docs"])
    assert (first.count("indexed"), first.count("skipped")) == (2, 0)
    chunks_before = kb.catalog.count_chunks()
    fake(kb).reset_counts()

    second = ingest_paths(kb, [tmp_path / "docs"])
    assert (second.count("indexed"), second.count("skipped"), second.chunks) == (0, 2, 0)
    assert fake(kb).document_calls == 0 and fake(kb).embedded_texts == []
    assert kb.catalog.count_chunks() == chunks_before


def test_modified_file_alone_is_reindexed_and_its_old_chunks_vanish(
    small_chunks: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    kb = make_kb(small_chunks)
    files = write_corpus(
        tmp_path / "docs",
        {"log.txt": "\n\n".join(PARAGRAPHS), "other.md": "# Other\n\nUnrelated kelp forests sway."},
    )
    ingest_paths(kb, [tmp_path / "docs"])
    assert kb.catalog.document("default", "default", str(files["log.txt"])).n_chunks == 3  # type: ignore[union-attr]
    assert found(kb, "oldword")
    fake(kb).reset_counts()

    files["log.txt"].write_text("\n\n".join(PARAGRAPHS).replace("oldword", "newword"), encoding="utf-8")
    summary = ingest_paths(kb, [tmp_path / "docs"])
    status = {Path(result.source).name: result.status for result in summary.results}
    assert status == {"log.txt": "indexed", "other.md": "skipped"}
    # Only the edited paragraph's chunk was embedded; the two unchanged ones came from the cache.
    assert len(fake(kb).embedded_texts) == 1
    assert "newword" in fake(kb).embedded_texts[0]

    for mode in ("bm25", "dense", "hybrid"):
        assert not any("oldword" in text for text in found(kb, "oldword tally", mode=mode, k=50)), mode
    assert any("newword" in text for text in found(kb, "newword"))
    assert kb.catalog.count_chunks() == 4
    assert_stores_agree(kb)


def test_shrunk_file_loses_its_stale_vectors(
    small_chunks: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    kb = make_kb(small_chunks)
    files = write_corpus(tmp_path / "docs", {"log.txt": "\n\n".join(PARAGRAPHS)})
    ingest_paths(kb, [tmp_path / "docs"])
    assert len(chroma_records(kb)) == 3
    files["log.txt"].write_text(PARAGRAPHS[0], encoding="utf-8")
    ingest_paths(kb, [tmp_path / "docs"])
    assert len(chroma_records(kb)) == 1
    assert_stores_agree(kb)
    assert found(kb, "herring", mode="dense", k=10) == [PARAGRAPHS[0]]  # the only chunk left


def test_changing_the_chunking_reindexes_unchanged_files(
    make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    write_corpus(tmp_path / "docs", {"log.txt": "\n\n".join(PARAGRAPHS)})
    ingest_paths(make_kb(make_settings(chunk_size=40, chunk_overlap=0)), [tmp_path / "docs"])
    summary = ingest_paths(make_kb(make_settings(chunk_size=200, chunk_overlap=0)), [tmp_path / "docs"])
    assert summary.count("indexed") == 1  # the index signature changed: same bytes, new chunks
    assert summary.chunks == 1


# --- pruning -------------------------------------------------------------------------------------------


def test_prune_removes_deleted_files_only_under_the_given_roots(kb: KnowledgeBase, tmp_path: Path) -> None:
    # "docs2" shares the prefix of "docs": a string-prefix test would wrongly count it as under "docs".
    docs = write_corpus(tmp_path / "docs", {"keep.md": "# K\n\nkeepword", "gone.md": "# G\n\ngoneword"})
    docs2 = write_corpus(tmp_path / "docs2", {"far.md": "# F\n\nfarword"})
    ingest_paths(kb, [tmp_path / "docs", tmp_path / "docs2"])
    docs["gone.md"].unlink()
    docs2["far.md"].unlink()

    without_prune = ingest_paths(kb, [tmp_path / "docs"])
    assert without_prune.count("pruned") == 0
    assert found(kb, "goneword")

    summary = ingest_paths(kb, [tmp_path / "docs"], prune=True)
    assert [(result.source, result.status) for result in summary.results if result.status == "pruned"] == [
        (str(docs["gone.md"]), "pruned")
    ]
    sources = {record.source for record in kb.catalog.documents("default", "default")}
    assert sources == {str(docs["keep.md"]), str(docs2["far.md"])}
    assert found(kb, "goneword") == []
    assert all("goneword" not in text for text in found(kb, "goneword", mode="dense", k=50))
    assert found(kb, "farword")
    assert_stores_agree(kb)


def test_prune_is_scoped_to_the_collection(kb: KnowledgeBase, tmp_path: Path) -> None:
    files = write_corpus(tmp_path / "docs", {"a.md": "# A\n\nalphaword"})
    ingest_paths(kb, [tmp_path / "docs"], collection="first")
    ingest_paths(kb, [tmp_path / "docs"], collection="second")
    files["a.md"].unlink()
    summary = ingest_paths(kb, [tmp_path / "docs"], collection="first", prune=True)
    assert summary.count("pruned") == 1
    assert [record.collection for record in kb.catalog.documents("default")] == ["second"]


# --- bad files -----------------------------------------------------------------------------------------

BAD_FILES: dict[str, str | bytes] = {
    "corrupt.pdf": b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage\n%%EOF",
    "binary.txt": bytes(range(256)) * 4,
    "empty.md": "",
    "invalid.jsonl": '{"_id": "1", "text": "fine"}\n{not json\n',
}
BAD_REASONS = {
    "corrupt.pdf": "corrupt PDF",
    "binary.txt": "binary file",
    "empty.md": "empty document",
    "invalid.jsonl": "invalid JSON on line 2",
}


def test_bad_files_fail_alone_with_a_reason(kb: KnowledgeBase, tmp_path: Path) -> None:
    write_corpus(tmp_path / "docs", {"keep.md": "# Keep\n\nThe steadfast tortoise wins."})
    ingest_paths(kb, [tmp_path / "docs"])
    write_corpus(tmp_path / "docs", {**BAD_FILES, "fresh.md": "# Fresh\n\nA nimble hare sprints."})

    summary = ingest_paths(kb, [tmp_path / "docs"])
    by_name = {Path(result.source).name: result for result in summary.results}
    assert {name: result.status for name, result in by_name.items()} == {
        "keep.md": "skipped",
        "fresh.md": "indexed",
        **{name: "failed" for name in BAD_FILES},
    }
    for name, reason in BAD_REASONS.items():
        assert reason in (by_name[name].reason or ""), (name, by_name[name].reason)
    assert {failure["source"] for failure in summary.as_dict()["failures"]} == {  # type: ignore[union-attr]
        str((tmp_path / "docs" / name).resolve()) for name in BAD_FILES
    }
    assert any("steadfast" in text for text in found(kb, "steadfast tortoise"))
    assert any("nimble" in text for text in found(kb, "nimble hare"))
    assert {record.source for record in kb.catalog.documents()} == {
        str((tmp_path / "docs" / name).resolve()) for name in ("keep.md", "fresh.md")
    }
    assert_stores_agree(kb)


def test_file_that_turns_bad_keeps_its_indexed_content(kb: KnowledgeBase, tmp_path: Path) -> None:
    files = write_corpus(tmp_path / "docs", {"keep.md": "# Keep\n\nThe steadfast tortoise wins."})
    ingest_paths(kb, [tmp_path / "docs"])
    files["keep.md"].write_bytes(b"\x00\x01\x02 binary junk \x00")
    summary = ingest_paths(kb, [tmp_path / "docs"])
    assert [result.status for result in summary.results] == ["failed"]
    for mode in ("bm25", "dense"):
        assert any("steadfast" in text for text in found(kb, "steadfast tortoise", mode=mode)), mode


def test_failing_model_leaves_old_content_intact(
    settings: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    kb = make_kb(settings)
    files = write_corpus(tmp_path / "docs", {"doc.md": "# Doc\n\nThe original wording stands."})
    ingest_paths(kb, [tmp_path / "docs"])
    chunks_before = {row["chunk_id"]: row["text"] for row in chunk_rows(kb)}
    files["doc.md"].write_text("# Doc\n\nThe replacement wording arrives.", encoding="utf-8")

    broken = make_kb(settings, FailingEmbeddings())
    with pytest.raises(EmbeddingError):
        ingest_paths(broken, [tmp_path / "docs"])

    assert {row["chunk_id"]: row["text"] for row in chunk_rows(kb)} == chunks_before
    assert_stores_agree(kb)
    for mode in ("bm25", "dense"):
        assert any("original" in text for text in found(kb, "original wording", mode=mode)), mode
        assert not any("replacement" in text for text in found(kb, "replacement", mode=mode)), mode
    # The file is still "changed", so a run with a working model picks it up.
    retry = ingest_paths(kb, [tmp_path / "docs"])
    assert [result.status for result in retry.results] == ["indexed"]
    assert any("replacement" in text for text in found(kb, "replacement"))


def test_missing_path_is_an_error(kb: KnowledgeBase, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-folder"):
        ingest_paths(kb, [tmp_path / "no-such-folder"])


# --- events, schema, records ---------------------------------------------------------------------------


def test_event_is_one_chunk_even_when_long(kb: KnowledgeBase) -> None:
    sentence = "The caravan crossed the dunes at night while the stars wheeled slowly overhead. "
    text = (sentence * 60).strip()
    assert count_tokens(text) > 4 * kb.settings.chunk_size
    source = index_event(kb, text, tenant="default", collection="default", title="Caravan")
    rows = [row for row in chunk_rows(kb) if row["metadata"]["source"] == source]
    assert len(rows) == 1
    assert rows[0]["text"] == text
    assert rows[0]["metadata"]["doc_type"] == "event"
    assert kb.catalog.document("default", "default", source).n_chunks == 1  # type: ignore[union-attr]
    assert_stores_agree(kb)
    with pytest.raises(LoaderError, match="empty event"):
        index_event(kb, "   ", tenant="default", collection="default")


def test_every_chunk_carries_the_full_metadata_schema(kb: KnowledgeBase) -> None:
    summary = ingest_paths(kb, [SAMPLE_CORPUS], tenant="acme", collection="samples")
    assert summary.count("failed") == 0 and summary.count("indexed") == 7
    index_event(kb, "A short note.", tenant="acme", collection="samples")
    rows = chunk_rows(kb)
    chroma = chroma_records(kb, "samples", tenant="acme")
    assert set(chroma) == {row["chunk_id"] for row in rows}
    for row in rows:
        for metadata in (row["metadata"], chroma[row["chunk_id"]]):
            assert set(CHUNK_METADATA_DEFAULTS) <= set(metadata), row["chunk_id"]
            for key, default in CHUNK_METADATA_DEFAULTS.items():
                assert isinstance(metadata[key], type(default)), (key, metadata[key])
            assert (metadata["tenant"], metadata["collection"]) == ("acme", "samples")
    doc_types = {row["metadata"]["doc_type"] for row in rows}
    assert {"md", "txt", "html", "pdf", "docx", "record", "event"} <= doc_types
    assert {row["metadata"]["page"] for row in rows if row["metadata"]["doc_type"] == "pdf"} >= {1, 2}
    hits = Searcher(kb).search("planet", tenant="acme", mode="hybrid", k=5).hits
    assert hits and all(set(CHUNK_METADATA_DEFAULTS) <= set(hit.metadata) for hit in hits)


def test_jsonl_records_take_their_doc_id_from_underscore_id(kb: KnowledgeBase, tmp_path: Path) -> None:
    records = [
        {"_id": "x1", "id": "not-this", "text": "First record text."},
        {"id": "y2", "text": "Second record text."},
        {"text": "Third record text, without any id."},
    ]
    files = write_corpus(tmp_path, {"r.jsonl": "\n".join(json.dumps(record) for record in records)})
    ingest_paths(kb, [files["r.jsonl"]])
    doc_ids = sorted(row["metadata"]["doc_id"] for row in chunk_rows(kb))
    assert doc_ids == ["2", "x1", "y2"]  # the third falls back to its index in the file

    ingest_paths(kb, [SAMPLE_CORPUS / "faq.jsonl"])
    faq = {
        row["metadata"]["doc_id"]
        for row in chunk_rows(kb)
        if row["metadata"]["source"] == str((SAMPLE_CORPUS / "faq.jsonl").resolve())
    }
    assert faq == {"faq-1", "faq-2", "faq-3", "faq-4", "faq-5", "faq-6", "event-2024-04-08"}
