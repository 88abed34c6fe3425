"""The scale benchmark's corpus generator, store builder and timing code, on a few hundred chunks."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from benchmarks import scale, scale_corpus, scale_stores
from benchmarks.scale_corpus import BasePassages
from config.settings import Settings
from retrieval.knowledge_base import KnowledgeBase
from retrieval.search import Searcher

DIMENSION = 16
#: Invented passages (one topic word per passage, so a hit's origin is recognisable).
TOPICS = ["glacier", "enzyme", "volcano", "telescope", "orchard", "protein", "harbour", "algorithm"]


def passage_sentences(topic: str) -> list[str]:
    return [
        f"The {topic} study measured seasonal change in {topic} samples.",
        f"Researchers compared the {topic} cohort with a control group.",
        f"Results for the {topic} group were consistent across sites.",
        f"A second {topic} trial repeated the first design.",
    ]


@pytest.fixture
def base() -> BasePassages:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((len(TOPICS), DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return BasePassages(
        ids=[f"p{index}" for index in range(len(TOPICS))],
        titles=[f"On the {topic}" for topic in TOPICS],
        sentences=[passage_sentences(topic) for topic in TOPICS],
        vectors=vectors,
    )


def test_chunks_are_deterministic_and_each_corpus_is_a_prefix_of_the_larger(base: BasePassages) -> None:
    small = list(scale_corpus.synthetic_chunks(base, 120, seed=3))
    large = list(scale_corpus.synthetic_chunks(base, 2500, seed=3))
    other_seed = list(scale_corpus.synthetic_chunks(base, 120, seed=4))
    assert [chunk.index for chunk in small] == list(range(120))
    assert len(large) == 2500
    assert [chunk.text for chunk in small] == [chunk.text for chunk in large[:120]]
    assert all(np.array_equal(a.vector, b.vector) for a, b in zip(small, large, strict=False))
    assert [chunk.text for chunk in small] != [chunk.text for chunk in other_seed]
    tail = list(scale_corpus.synthetic_chunks(base, 2500, seed=3, start=1990))
    assert [chunk.index for chunk in tail] == list(range(1990, 2500))
    assert tail[0].text == large[1990].text


def test_chunk_text_and_vector_come_from_its_two_passages(base: BasePassages) -> None:
    chunks = list(scale_corpus.synthetic_chunks(base, 300, seed=1))
    for chunk in chunks:
        assert abs(float(np.linalg.norm(chunk.vector)) - 1.0) < 1e-5
        assert chunk.title == base.titles[chunk.primary]
        allowed = set(base.sentences[chunk.primary]) | set(base.sentences[chunk.secondary])
        pieces = [piece.strip() for piece in chunk.text.replace(". ", ".\n").splitlines()]
        assert pieces and all(piece in allowed for piece in pieces)
        assert TOPICS[chunk.primary] in chunk.text
    # The vector leans towards its primary passage: closer to it than to a passage it was not mixed from.
    closer = 0
    for chunk in chunks:
        unrelated = next(i for i in range(len(TOPICS)) if i not in (chunk.primary, chunk.secondary))
        closer += float(chunk.vector @ base.vectors[chunk.primary]) > float(
            chunk.vector @ base.vectors[unrelated]
        )
    assert closer >= 0.95 * len(chunks)


def test_base_vectors_are_encoded_once_and_read_back_from_the_cache(tmp_path: Path) -> None:
    folder = tmp_path / "scifact"
    folder.mkdir()
    lines = [
        {"_id": str(index), "title": f"On the {topic}", "text": " ".join(passage_sentences(topic))}
        for index, topic in enumerate(TOPICS[:3])
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> list[list[float]]:
        calls.append(texts)
        return [[float(len(text)), 1.0] for text in texts]

    cache = tmp_path / "vectors.npy"
    first = scale_corpus.load_base(folder, cache, encode)
    second = scale_corpus.load_base(folder, cache, encode)
    assert len(calls) == 1 and len(calls[0]) == 3
    assert calls[0][0].startswith("On the glacier\nThe glacier study")
    assert first.sentences[1] == passage_sentences("enzyme")
    assert np.array_equal(first.vectors, second.vectors)


def test_queries_are_read_from_the_data_file_at_random(tmp_path: Path) -> None:
    lines = [
        {"_id": str(index), "text": f"Does the {topic} change?", "metadata": {}}
        for index, topic in enumerate(TOPICS)
    ]
    (tmp_path / "queries.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
    )
    picked = scale_corpus.read_scifact_queries(tmp_path, 5, seed=2)
    assert len(picked) == len(set(picked)) == 5
    assert set(picked) <= {line["text"] for line in lines}
    assert picked == scale_corpus.read_scifact_queries(tmp_path, 5, seed=2)
    assert len(scale_corpus.read_scifact_queries(tmp_path, 50, seed=2)) == len(TOPICS)


def test_mode_summary_percentiles() -> None:
    timings = scale.ModeTimings(
        total_ms=[4.0, 1.0, 3.0, 2.0], stages_ms={"bm25_ms": [1.0, 3.0]}, hits=[10, 10, 8, 8]
    )
    summary = timings.summary()
    assert summary["queries"] == 4
    assert summary["p50_ms"] == 2.5
    assert summary["p95_ms"] == pytest.approx(3.85)
    assert summary["mean_ms"] == 2.5
    assert summary["stage_p50_ms"] == {"bm25_ms": 2.0}
    assert summary["mean_hits"] == 9.0


def test_store_is_built_through_the_product_once_and_searches_stay_in_the_tenant(
    base: BasePassages,
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    tmp_path: Path,
) -> None:
    settings = scale_stores.store_settings(make_settings(), tmp_path / "scale", 300)
    kb = make_kb(settings)
    record = scale_stores.build_store(kb, base, 300, seed=0)
    assert record["chunks_written"] == 300 + scale_stores.CHUNKS_PER_SOURCE
    assert kb.catalog.count_chunks(scale_stores.SCALE_TENANT) == 300
    assert kb.catalog.count_chunks(scale_stores.OTHER_TENANT) == scale_stores.CHUNKS_PER_SOURCE
    assert kb.vectors.count(scale_stores.SCALE_TENANT, scale_stores.SCALE_COLLECTION) == 300
    assert len(kb.catalog.documents(scale_stores.SCALE_TENANT)) == 300 // scale_stores.CHUNKS_PER_SOURCE
    assert scale_stores.build_store(kb, base, 300, seed=0) == record  # reused, not rebuilt
    assert kb.catalog.count_chunks(scale_stores.SCALE_TENANT) == 300

    # Query: a glacier sentence with the glacier passage's vector; every mode finds glacier chunks, only
    # of the measured tenant.
    queries = [(passage_sentences("glacier")[0], base.vectors[0].tolist())] * 3
    searcher = Searcher(kb)
    for mode in scale.MODES:
        timings = scale.time_searches(searcher, queries, mode, tenant=scale_stores.SCALE_TENANT, warmup=1)
        assert len(timings.total_ms) == 3 and timings.hits == [scale.LATENCY_K] * 3
        hits = searcher.search(
            queries[0][0], k=10, mode=mode, tenant=scale_stores.SCALE_TENANT, query_vector=queries[0][1]
        ).hits
        assert all(hit.metadata["tenant"] == scale_stores.SCALE_TENANT for hit in hits)
        assert hits[0].metadata["title"] == "On the glacier"
    assert set(timings.stages_ms) >= {"dense_ms", "bm25_ms", "fuse_ms"}


def test_an_interrupted_build_is_removed_before_a_rebuild(tmp_path: Path) -> None:
    folder = tmp_path / "embedded-300"
    (folder / "chroma").mkdir(parents=True)
    scale_stores.fresh_dir(folder)
    assert not folder.exists()
    (folder / "chroma").mkdir(parents=True)
    (folder / scale_stores.MARKER_FILE).write_text('{"size": 300}', encoding="utf-8")
    scale_stores.fresh_dir(folder)
    assert (folder / "chroma").exists()


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--sizes", "5k"], "--sizes"),
        (["--sizes", "0"], "--sizes"),
        (["--setup", "cloud"], "--setup"),
        (["--queries", "0"], "--queries"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(arguments: list[str], named: str) -> None:
    from typer.testing import CliRunner

    from benchmarks.commands import app
    from service.cli import EXIT_BAD_INPUT

    result = CliRunner().invoke(app, ["scale", *arguments])
    assert result.exit_code == EXIT_BAD_INPUT
    assert named in result.output
    assert "Traceback" not in result.output
