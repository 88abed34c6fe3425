"""RAG_SEPARATOR and RAG_CHUNKER through the product: settings parsing, the knowledge base's chunker,
ingestion with the semantic chunker, and index identities that keep indexes of different chunkers apart
(while the defaults keep the signatures indexes were built under before these settings existed)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from config.settings import Settings, SettingsError, load_settings
from evals.eval_index import index_settings
from persistence.vector_store import DEFAULT_COLLECTION
from retrieval import chunkers, knowledge_base
from retrieval.chunking import ChunkingConfig, chunk_text
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from tests.fakes import FAKE_MODEL_KEY

HERONS = "Herons stand still in shallow water. A heron strikes fish with its bill. Herons nest in trees."
COMETS = "Comets are balls of ice and dust. A comet grows a tail near the Sun. Comets return for years."


class TopicEmbeddings(Embeddings):
    """Herons point one way, comets at a right angle: adjacent sentences of one topic have similarity 1,
    across topics 0 (a text with both gets the sum)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    @staticmethod
    def vector(text: str) -> list[float]:
        lower = text.lower()
        return [float(lower.count("heron")), float(lower.count("comet")), 0.01]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return [self.vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vector(text)


def unbuffered_unmerged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sentence embedded alone (SEMANTIC_BUFFER 0) and no short chunk merged (MIN_CHUNK_FRACTION 0), so
    the two-topic texts below cut exactly at the topic change."""
    monkeypatch.setattr(chunkers, "SEMANTIC_BUFFER", 0)
    monkeypatch.setattr(knowledge_base, "MIN_CHUNK_FRACTION", 0.0)


# --- RAG_SEPARATOR ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "separators"),
    [
        ("", ()),
        ("\\n", ("\n",)),
        ("---", ("---",)),
        ("\\n\\n\\t\\\\", ("\n\n\t\\",)),
        ('["\\n\\n", "<hr>"]', ("\n\n", "<hr>")),
    ],
)
def test_separators_are_read_from_rag_separator(
    monkeypatch: pytest.MonkeyPatch, value: str, separators: tuple[str, ...]
) -> None:
    monkeypatch.setenv("RAG_SEPARATOR", value)
    assert load_settings().separators == separators


@pytest.mark.parametrize(
    ("value", "expected"),
    [("[1, 2]", "strings only"), ('["a", ', "not one"), ('[""]', "empty separator"), ("[]", "empty")],
)
def test_a_bad_separator_is_one_line_naming_rag_separator(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("RAG_SEPARATOR", value)
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert "RAG_SEPARATOR" in message and expected in message and "\n" not in message


def test_the_chunker_splits_on_the_separators_first() -> None:
    """Without separators a single newline is no paragraph break (the paragraph stays as written); with
    "\\n" each line is a unit, and units are packed whole (the chunk size fits two lines, not three)."""
    lines = ["Mercury is the smallest planet.", "Venus is very hot.", "Mars is red and cold."]
    text = "\n".join(lines) + "\n\n" + "Jupiter is the largest planet."
    jupiter = "Jupiter is the largest planet."
    assert chunk_text(text, ChunkingConfig(200, 0)) == ["\n".join(lines) + " " + jupiter]
    by_line = ChunkingConfig(14, 0, min_fraction=0.0, separators=("\n",))
    assert chunk_text(text, by_line) == [f"{lines[0]} {lines[1]}", f"{lines[2]} {jupiter}"]
    by_rule = ChunkingConfig(200, 0, separators=("---", "\n"))
    assert chunk_text("a b---c d\ne f", by_rule) == ["a b\nc d\ne f"]
    with pytest.raises(ValueError, match="must not be empty"):
        ChunkingConfig(200, 0, separators=("",))


# --- RAG_CHUNKER through the knowledge base and ingestion ----------------------------------------------


def test_the_default_chunker_is_the_paragraph_one(kb: KnowledgeBase) -> None:
    assert kb.settings.chunker == "paragraph"
    assert kb.chunk(f"{HERONS} {COMETS}") == [f"{HERONS} {COMETS}"]
    assert "embeddings" not in kb.__dict__  # the paragraph chunker never opens the embedding model


def test_ingestion_cuts_with_the_semantic_chunker(
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unbuffered_unmerged(monkeypatch)
    model = TopicEmbeddings()
    kb = make_kb(make_settings(chunker="semantic"), model)
    note = tmp_path / "note.txt"
    note.write_text(f"{HERONS} {COMETS}\n")
    summary = ingest_paths(kb, [note])
    assert summary.count("indexed") == 1 and summary.chunks == 2
    ids = kb.catalog.chunk_ids(kb.settings.default_tenant, DEFAULT_COLLECTION)
    stored = kb.catalog.chunks_by_id(sorted(ids), kb.settings.default_tenant)
    assert sorted(chunk.text for chunk in stored.values()) == sorted([COMETS, HERONS])
    # The sentences went through the knowledge base's (cached) model, then the two chunks (under the title).
    assert "Herons stand still in shallow water." in model.texts
    assert any(text.endswith(HERONS) for text in model.texts)


def test_semantic_chunks_stay_within_the_size_and_cut_at_topic_changes(
    make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase]
) -> None:
    kb = make_kb(make_settings(chunker="semantic", chunk_size=16, chunk_overlap=0), TopicEmbeddings())
    chunks = kb.chunk(f"{HERONS} {COMETS}")
    assert len(chunks) > 2
    assert all(not ("heron" in chunk.lower() and "comet" in chunk.lower()) for chunk in chunks)


# --- index identities -----------------------------------------------------------------------------------


def test_default_signatures_are_unchanged_and_other_chunkers_differ(
    make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    """The signature the default settings had before RAG_CHUNKER existed is kept (no re-indexing on
    upgrade); any other chunker or separator gets its own, so their indexes never mix."""
    default = make_kb(make_settings())
    assert default.index_signature() == f"200/32/0.25/{FAKE_MODEL_KEY}"
    variants = [
        {"separator": "\\n"},
        {"chunker": "semantic"},
        {"chunker": "semantic", "semantic_breakpoint": "absolute"},
    ]
    signatures = {make_kb(make_settings(**variant)).index_signature() for variant in variants}
    assert len(signatures) == len(variants) and default.index_signature() not in signatures

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("{}\n")
    folders = {index_settings(make_settings(**variant), "scifact", corpus).data_dir for variant in variants}
    folders.add(index_settings(make_settings(embedding_window_overlap=16), "scifact", corpus).data_dir)
    default_folder = index_settings(make_settings(), "scifact", corpus).data_dir
    assert len(folders) == len(variants) + 1 and default_folder not in folders


def test_the_semantic_cut_is_where_similarity_drops(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unbuffered_unmerged(monkeypatch)
    kb = make_kb(make_settings(chunker="semantic", semantic_breakpoint="absolute"), TopicEmbeddings())
    assert kb.chunk(f"{HERONS} {COMETS}") == [HERONS, COMETS]
    assert math.isclose(kb.settings.semantic_min_similarity, 0.5)


def test_eval_retrieval_indexes_with_the_semantic_chunker_apart_from_the_default(
    tmp_path: Path,
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`RAG_CHUNKER=semantic rag eval retrieval --dataset <BEIR folder>` builds its own index (never the
    paragraph chunker's) and says which chunker it measured."""
    import evals.retrieval as retrieval_eval

    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = [("d1", "Herons", f"{HERONS} {COMETS}"), ("d2", "Comets", COMETS)]
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in corpus)
    )
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "where do herons nest"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    opened: list[KnowledgeBase] = []

    def open_kb(settings: Settings) -> KnowledgeBase:
        opened.append(make_kb(settings, TopicEmbeddings()))
        return opened[-1]

    monkeypatch.setattr(retrieval_eval.KnowledgeBase, "open", staticmethod(open_kb))
    unbuffered_unmerged(monkeypatch)
    semantic = make_settings(chunker="semantic")
    report = retrieval_eval.run_retrieval_eval(folder, semantic, modes=["dense"])
    assert report["chunker"] == "semantic" and report["chunks"] == 3  # d1 cut in two at the topic change
    default = retrieval_eval.run_retrieval_eval(folder, make_settings(), modes=["dense"])
    assert default["chunker"] == "paragraph" and default["chunks"] == 2
    assert opened[0].settings.data_dir != opened[1].settings.data_dir
