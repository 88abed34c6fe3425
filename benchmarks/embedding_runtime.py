"""MiniLM on torch (sentence-transformers) against MiniLM's int8 ONNX graph (onnxruntime): start-up, encode
rate, agreement of the vectors and retrieval quality, so the embedding runtime is chosen by measurement.

Figures:
- `startup_s`: a fresh interpreter that imports the runtime, loads the model and returns the first query
  vector (wall seconds of the whole process, as a user's `rag ask` pays them), runtimes alternating;
- `encode`: chunks/s and CPU ms per chunk encoding the same product chunks of SciFact, the two runtimes
  alternating block by block in one process (so a change of load on shared cores hits both alike);
- `agreement`: cosine between the two runtimes' vectors of the same chunks and queries;
- `retrieval`: nDCG@10 / Recall@100 per search mode on a SciFact subset (every document judged for a test
  query, plus distractors drawn with a fixed seed), ingested by the product (chunks of RAG_CHUNK_SIZE, both
  indexes) three ways: torch documents and queries, ONNX documents and queries, torch documents with ONNX
  queries (one index, one model key);
- `ingest_chunks_per_s`: the product's ingest rate of that subset under each document runtime.

    python -m benchmarks.embedding_runtime [--docs 1200] [--startup-runs 5]
        [--json results/embedding_runtime.json]

The torch side needs the torch extra (`pip install -e '.[torch]'`), which the engine itself no longer uses.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from langchain_core.embeddings import Embeddings

from config.settings import Settings, get_settings
from evals.datasets import load_beir, open_text
from evals.environment import machine_description
from evals.eval_index import ingest_corpus
from evals.metrics import dedupe_to_documents, ndcg_at_k, recall_at_k
from retrieval.embeddings import (
    DEFAULT_WINDOW_OVERLAP,
    EMBEDDING_BATCH_SIZE,
    MiniLMEmbeddings,
    SentenceTransformerEmbeddings,
)
from retrieval.knowledge_base import KnowledgeBase
from retrieval.onnx_minilm import OnnxMiniLMEmbeddings
from retrieval.search import Searcher
from retrieval.window_pooling import WindowPooledEmbeddings

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCIFACT = REPO_ROOT.parent / "shared" / "data" / "beir-scifact"
#: Documents of the SciFact subset (judged ones first, then seeded distractors); SciFact has 5,183.
DEFAULT_DOCS = 1200
DISTRACTOR_SEED = 13
DEFAULT_STARTUP_RUNS = 5
#: Chunks each runtime encodes in the interleaved rate measurement, and the block size of the alternation.
ENCODE_CHUNKS = 256
ENCODE_BLOCK = 32
MODES = ("bm25", "dense", "hybrid")
SEARCH_K = 150
COLLECTION = "eval"
#: The adoption rule: ONNX may cost at most this share of torch's retrieval quality and of its encode rate.
MAX_QUALITY_LOSS = 0.05
MAX_INGEST_LOSS = 0.20
STARTUP_QUERY = "Which planet is the largest in the Solar System?"
#: The child process of one start-up run: the runtime's class from the product, one query vector.
STARTUP_CODE = {
    "torch": "from retrieval.embeddings import SentenceTransformerEmbeddings as M; m = M(None)",
    "onnx": "from retrieval.onnx_minilm import OnnxMiniLMEmbeddings as M; m = M()",
}
SECONDS_CODE = "import sys; m.embed_query(sys.argv[1])"


def measure_startup(runs: int) -> dict[str, dict[str, float]]:
    """Median and spread of a fresh process's wall seconds to the first query vector, per runtime."""
    times: dict[str, list[float]] = {name: [] for name in STARTUP_CODE}
    for _ in range(runs):
        for name, code in STARTUP_CODE.items():
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", f"{code}; {SECONDS_CODE}", STARTUP_QUERY], cwd=REPO_ROOT, check=True
            )
            times[name].append(time.perf_counter() - started)
    return {
        name: {
            "median_s": round(statistics.median(v), 3),
            "min_s": round(min(v), 3),
            "max_s": round(max(v), 3),
        }
        for name, v in times.items()
    }


def write_subset(scifact: Path, docs: int, folder: Path) -> Path:
    """A BEIR folder holding every document judged for a test query plus seeded distractors (`docs` in all),
    the test queries and their judgements; written once per size."""
    if (folder / "corpus.jsonl").is_file():
        return folder
    dataset = load_beir(scifact)
    judged = {doc for relevance in dataset.qrels.values() for doc in relevance}
    with open_text(dataset.corpus_path) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    others = [record for record in records if record["_id"] not in judged]
    random.Random(DISTRACTOR_SEED).shuffle(others)
    chosen = [record for record in records if record["_id"] in judged]
    chosen += others[: max(0, docs - len(chosen))]
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query_id, text in dataset.queries.items():
            handle.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for query_id, relevance in dataset.qrels.items():
            handle.writelines(f"{query_id}\t{doc}\t{score}\n" for doc, score in relevance.items())
    partial = folder / "corpus.jsonl.partial"
    with partial.open("w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in chosen)
    partial.replace(folder / "corpus.jsonl")
    return folder


def sample_chunks(kb: KnowledgeBase, count: int) -> list[str]:
    """The first `count` chunk texts of the ingested subset, as the product cut them."""
    texts: list[str] = []
    for record in kb.catalog.documents(collection=COLLECTION):
        texts.extend(
            chunk.text for chunk in kb.catalog.source_chunks(record.tenant, record.collection, record.source)
        )
        if len(texts) >= count:
            break
    return texts[:count]


def measure_encode(texts: Sequence[str], models: dict[str, Embeddings]) -> dict[str, dict[str, float]]:
    """Chunks/s (wall) and CPU ms per chunk of each model over `texts`, alternating blocks."""
    wall = dict.fromkeys(models, 0.0)
    cpu = dict.fromkeys(models, 0.0)
    for start in range(0, len(texts), ENCODE_BLOCK):
        block = list(texts[start : start + ENCODE_BLOCK])
        for name, model in models.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            model.embed_documents(block)
            wall[name] += time.perf_counter() - began
            cpu[name] += time.process_time() - began_cpu
    return {
        name: {
            "chunks_per_s": round(len(texts) / wall[name], 2),
            "cpu_ms_per_chunk": round(1000 * cpu[name] / len(texts), 1),
        }
        for name in models
    }


def cosines(first: Sequence[Sequence[float]], second: Sequence[Sequence[float]]) -> dict[str, float]:
    """Mean and minimum cosine of paired unit vectors."""
    values = (np.asarray(first) * np.asarray(second)).sum(axis=1)
    return {"mean": round(float(values.mean()), 5), "min": round(float(values.min()), 5), "n": len(values)}


def _index(
    settings: Settings, root: Path, name: str, documents: SentenceTransformerEmbeddings | OnnxMiniLMEmbeddings
) -> KnowledgeBase:
    pooled = WindowPooledEmbeddings(documents, documents, settings.embedding_window_overlap)
    indexed = settings.model_copy(update={"data_dir": root / name})
    return KnowledgeBase(indexed, base_model=pooled, model_key=MiniLMEmbeddings.model_key)


def score(
    kb: KnowledgeBase,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    embed: Callable[[str], list[float]],
) -> dict[str, dict[str, float]]:
    """nDCG@10 and Recall@100 per mode, with query vectors from `embed`."""
    searcher = Searcher(kb)
    per_mode: dict[str, dict[str, list[float]]] = {mode: {"ndcg@10": [], "recall@100": []} for mode in MODES}
    for query_id, text in queries.items():
        vector = embed(text)
        for mode in MODES:
            hits = searcher.search(
                text, k=SEARCH_K, mode=mode, collections=[COLLECTION], query_vector=vector
            ).hits
            ranked = dedupe_to_documents(hit.doc_id for hit in hits)
            per_mode[mode]["ndcg@10"].append(ndcg_at_k(ranked, qrels[query_id], 10))
            per_mode[mode]["recall@100"].append(recall_at_k(ranked, qrels[query_id], 100))
    return {
        mode: {name: round(sum(values) / len(values), 4) for name, values in metrics.items()}
        for mode, metrics in per_mode.items()
    }


def measure_retrieval(subset: Path, settings: Settings, root: Path) -> dict[str, Any]:
    """Ingest the subset under each document runtime, score the three configurations, and compare the
    runtimes' vectors and encode rates on the product's own chunks."""
    dataset = load_beir(subset)
    torch_model = SentenceTransformerEmbeddings(None, batch_size=EMBEDDING_BATCH_SIZE)
    onnx_model = OnnxMiniLMEmbeddings(batch_size=EMBEDDING_BATCH_SIZE)
    overlap = settings.embedding_window_overlap
    torch_queries = WindowPooledEmbeddings(torch_model, torch_model, overlap)
    onnx_queries = WindowPooledEmbeddings(onnx_model, onnx_model, overlap)
    ingest: dict[str, dict[str, float]] = {}
    scores: dict[str, Any] = {}
    for name, model in (("torch", torch_model), ("onnx", onnx_model)):
        kb = _index(settings, root, name, model)
        try:
            model.embed_documents(["warm-up"])
            summary = ingest_corpus(kb, dataset.corpus_path, collection=COLLECTION)
            if summary.chunks:
                ingest[name] = {
                    "chunks": summary.chunks,
                    "seconds": round(summary.seconds, 1),
                    "chunks_per_s": round(summary.chunks_per_second, 2),
                }
                (root / f"{name}-ingest.json").write_text(json.dumps(ingest[name]))
            else:
                ingest[name] = json.loads((root / f"{name}-ingest.json").read_text())
            own = torch_queries if name == "torch" else onnx_queries
            scores[f"{name} documents, {name} queries"] = score(
                kb, dataset.queries, dataset.qrels, own.embed_query
            )
            if name == "torch":
                scores["torch documents, onnx queries"] = score(
                    kb, dataset.queries, dataset.qrels, onnx_queries.embed_query
                )
                chunks = sample_chunks(kb, ENCODE_CHUNKS)
        finally:
            kb.close()
    queries = list(dataset.queries.values())
    return {
        "subset_documents": sum(1 for _ in subset.joinpath("corpus.jsonl").open(encoding="utf-8")),
        "queries": len(queries),
        "ingest": ingest,
        "scores": scores,
        "agreement": {
            "chunks": cosines(torch_model.embed_documents(chunks), onnx_model.embed_documents(chunks)),
            "queries": cosines(torch_model.embed_documents(queries), onnx_model.embed_documents(queries)),
        },
        "encode": measure_encode(chunks, {"torch": torch_model, "onnx": onnx_model}),
    }


def verdict(report: dict[str, Any]) -> dict[str, Any]:
    """The adoption rule over a report: ONNX replaces torch when it starts sooner, keeps at least
    1 - MAX_QUALITY_LOSS of torch's hybrid nDCG@10 and at least 1 - MAX_INGEST_LOSS of its encode rate
    (the interleaved measurement: the sequential ingests ran under different loads)."""
    scores = report["scores"]
    quality = (
        scores["onnx documents, onnx queries"]["hybrid"]["ndcg@10"]
        / scores["torch documents, torch queries"]["hybrid"]["ndcg@10"]
    )
    rate = report["encode"]["onnx"]["chunks_per_s"] / report["encode"]["torch"]["chunks_per_s"]
    startup = report["startup"]["onnx"]["median_s"] < report["startup"]["torch"]["median_s"]
    return {
        "onnx_starts_sooner": startup,
        "hybrid_ndcg_onnx_over_torch": round(quality, 4),
        "encode_rate_onnx_over_torch": round(rate, 3),
        "adopt_onnx": startup and quality >= 1 - MAX_QUALITY_LOSS and rate >= 1 - MAX_INGEST_LOSS,
    }


def main(
    scifact: Annotated[Path, typer.Option(help="BEIR SciFact folder.")] = DEFAULT_SCIFACT,
    docs: Annotated[int, typer.Option(min=100, help="Documents of the SciFact subset.")] = DEFAULT_DOCS,
    startup_runs: Annotated[
        int, typer.Option(min=1, help="Fresh processes per runtime.")
    ] = DEFAULT_STARTUP_RUNS,
    work: Annotated[Path | None, typer.Option(help="Folder for the subset and its indexes.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report here.")] = None,
) -> None:
    """Start-up, encode rate, agreement and retrieval quality of MiniLM on torch and on int8 ONNX."""
    settings = get_settings()
    if settings.embedding_window_overlap != DEFAULT_WINDOW_OVERLAP:
        raise typer.BadParameter("run with the default RAG_EMBEDDING_WINDOW_OVERLAP")
    root = (work or settings.data_dir / "eval" / "embedding-runtime").resolve()
    subset = write_subset(scifact, docs, root / f"scifact-{docs}")
    startup = measure_startup(startup_runs)
    typer.echo(json.dumps({"startup": startup}), err=True)
    report: dict[str, Any] = {
        "machine": machine_description(),
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
        "startup": startup,
        **measure_retrieval(subset, settings, root / f"scifact-{docs}-indexes"),
    }
    report["verdict"] = verdict(report)
    typer.echo(json.dumps(report, indent=2))
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    typer.run(main)
