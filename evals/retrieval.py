"""`rag eval retrieval`: retrieval quality and speed per search mode on a BEIR folder or CMRC 2018.

The index (evals/eval_index.py) is reused while dataset and settings are unchanged; the first-ingest numbers
are stored beside it so a rerun still reports them. With a rerank model one more row, RERANK_MODE: the hybrid
list's first RERANK_CANDIDATES reordered as /api/v1/search does, timed as search plus rerank.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from config.settings import SearchMode, Settings
from evals.datasets import cmrc_as_retrieval, load_beir
from evals.environment import machine_description
from evals.eval_index import (
    ProgressFactory,
    eval_root,
    file_fingerprint,
    index_settings,
    ingest_corpus,
    no_progress,
    write_corpus_once,
)
from evals.metrics import dedupe_to_documents, linear_percentile, mrr_at_k, ndcg_at_k, recall_at_k
from evals.splits import ALL_SPLITS, check_split, split_of
from retrieval.knowledge_base import KnowledgeBase
from retrieval.rerank import RERANK_CANDIDATES, RERANK_PASSAGE_CHARS, rerank
from retrieval.search import Searcher

EVAL_COLLECTION = "eval"
#: Chunks fetched per query for the quality metrics: enough documents for Recall@100 after deduplication.
EVAL_SEARCH_K = 150
#: k of the timed search, fixed so the figures stay comparable whatever RAG_TOP_K says.
LATENCY_K = 10
#: Recall@k cutoffs reported: BEIR's own (10, 100), and CMRC's shorter lists (one answer passage per query).
BEIR_RECALL_CUTOFFS: tuple[int, ...] = (10, 100)
CMRC_RECALL_CUTOFFS: tuple[int, ...] = (1, 5, 10)
RERANK_MODE = "hybrid+rerank"
INGEST_STATS_FILE = "first_ingest.json"


@dataclass
class RetrievalDataset:
    """A corpus file in the ingestion format, queries and graded relevance by document id."""

    name: str
    corpus_file: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    kind: str
    """beir | cmrc"""


def load_retrieval_dataset(path: Path, work_dir: Path) -> RetrievalDataset:
    """A BEIR folder, or a CMRC 2018 / SQuAD-format file whose contexts become the corpus."""
    if path.is_dir():
        beir = load_beir(path)
        return RetrievalDataset(path.name, beir.corpus_path, beir.queries, beir.qrels, "beir")
    if not path.exists():
        raise FileNotFoundError(f"dataset not found: {path}")
    passages, queries, qrels = cmrc_as_retrieval(path)
    name = path.name.split(".")[0]
    corpus = write_corpus_once(passages, work_dir / f"{name}-{file_fingerprint(path)}-corpus.jsonl")
    return RetrievalDataset(name, corpus, queries, qrels, "cmrc")


def _ingest(kb: KnowledgeBase, dataset: RetrievalDataset, progress: ProgressFactory) -> dict[str, float]:
    """Ingest (or confirm) the corpus; return first-ingest and re-ingest numbers."""
    stats_path = kb.settings.data_dir / INGEST_STATS_FILE
    kb.embeddings.embed_documents(["warm-up"])  # model loading is not ingest time
    first = ingest_corpus(kb, dataset.corpus_file, collection=EVAL_COLLECTION, progress=progress)
    if first.chunks:
        stats = {"seconds": first.seconds, "chunks": first.chunks, "chunks_per_s": first.chunks_per_second}
        stats_path.parent.mkdir(parents=True, exist_ok=True)
        stats_path.write_text(json.dumps(stats))
    elif stats_path.exists():
        stats = json.loads(stats_path.read_text())
    else:
        stats = {"seconds": float("nan"), "chunks": kb.catalog.count_chunks(), "chunks_per_s": float("nan")}
    again = ingest_corpus(kb, dataset.corpus_file, collection=EVAL_COLLECTION)
    reingest = max(again.seconds, 1e-6)
    return {
        "ingest_seconds": round(stats["seconds"], 2),
        "chunks": stats["chunks"],
        "ingest_chunks_per_s": round(stats["chunks_per_s"], 2),
        "reingest_seconds": round(reingest, 4),
        "reingest_speedup": round(stats["seconds"] / reingest, 1),
    }


def run_retrieval_eval(
    dataset_path: Path,
    settings: Settings,
    *,
    modes: Sequence[SearchMode] = ("bm25", "dense", "hybrid"),
    limit: int | None = None,
    progress: ProgressFactory = no_progress,
    rerank_model: BaseChatModel | None = None,
    split: str = ALL_SPLITS,
) -> dict[str, Any]:
    """Ingest the dataset (reused when unchanged), run every judged query of `split` (up to `limit`) in every
    mode, and with `rerank_model` rerank the hybrid list too; return the report."""
    check_split(split)
    dataset = load_retrieval_dataset(dataset_path, eval_root(settings))
    kb = KnowledgeBase.open(index_settings(settings, dataset.name, dataset.corpus_file))
    try:
        ingest = _ingest(kb, dataset, progress)
        searcher = Searcher(kb)
        query_ids = _query_ids(dataset, split, limit)
        per_mode, reranked_queries, embed_ms = _score_queries(
            searcher, settings, dataset, query_ids, modes=modes, rerank_model=rerank_model, progress=progress
        )
        rerank_figures = {
            "queries_reranked": reranked_queries,
            "candidates": RERANK_CANDIDATES,
            "passage_chars": RERANK_PASSAGE_CHARS,
        }
        return {
            "dataset": dataset.name,
            "kind": dataset.kind,
            "queries": len(query_ids),
            "split": split,
            "machine": machine_description(),
            "embedding": settings.embedding_provider,
            "chunk_size": settings.chunk_size,
            "chunk_overlap": settings.chunk_overlap,
            "chunker": settings.chunker,
            "latency_k": LATENCY_K,
            "modes": _mode_summaries(per_mode),
            **({"rerank": rerank_figures} if rerank_model is not None else {}),
            "embed_query_ms": round(linear_percentile(embed_ms, 50), 2) if embed_ms else 0.0,
            **ingest,
        }
    finally:
        kb.close()


def _query_ids(dataset: RetrievalDataset, split: str, limit: int | None) -> list[str]:
    """The judged queries evaluated: those of the split (all for ALL_SPLITS), the first `limit` of them."""
    judged = [qid for qid in dataset.queries if qid in dataset.qrels]
    return [qid for qid in judged if split in (ALL_SPLITS, split_of(qid))][: limit or None]


def _score_queries(
    searcher: Searcher,
    settings: Settings,
    dataset: RetrievalDataset,
    query_ids: list[str],
    *,
    modes: Sequence[SearchMode],
    rerank_model: BaseChatModel | None,
    progress: ProgressFactory,
) -> tuple[dict[str, dict[str, list[float]]], int, list[float]]:
    """Score every query in every mode (and the reranked hybrid list with `rerank_model`): (scores and
    latencies per report row, queries reranked, query-embedding milliseconds)."""
    recall_cutoffs = BEIR_RECALL_CUTOFFS if dataset.kind == "beir" else CMRC_RECALL_CUTOFFS
    report_names = [*modes, RERANK_MODE] if rerank_model is not None else list(modes)
    per_mode: dict[str, dict[str, list[float]]] = {name: {} for name in report_names}
    reranked_queries = 0
    embed_ms: list[float] = []
    advance = progress("queries", len(query_ids))
    for qid in query_ids:
        reranked_queries += _score_query(
            searcher,
            settings,
            dataset.queries[qid],
            dataset.qrels[qid],
            modes=modes,
            embed_ms=embed_ms,
            per_mode=per_mode,
            recall_cutoffs=recall_cutoffs,
            rerank_model=rerank_model,
        )
        advance(1)
    return per_mode, reranked_queries, embed_ms


def _score_query(
    searcher: Searcher,
    settings: Settings,
    text: str,
    relevance: dict[str, int],
    *,
    modes: Sequence[SearchMode],
    embed_ms: list[float],
    per_mode: dict[str, dict[str, list[float]]],
    recall_cutoffs: Sequence[int],
    rerank_model: BaseChatModel | None,
) -> int:
    """Embed one query (timed into `embed_ms`), search it in every mode (reranking the hybrid list with
    `rerank_model`), adding scores and latency to `per_mode`; return how many lists were reranked (0 or 1)."""
    started = time.perf_counter()
    vector = searcher.embed_query(text) if any(mode != "bm25" for mode in modes) else None
    embed_ms.append((time.perf_counter() - started) * 1000)
    reranked_queries = 0
    for mode in modes:
        # Latency is timed on a user-sized search (k = LATENCY_K); quality needs a deeper list.
        started = time.perf_counter()
        searcher.search(text, k=LATENCY_K, mode=mode, collections=[EVAL_COLLECTION], query_vector=vector)
        elapsed = (time.perf_counter() - started) * 1000
        result = searcher.search(
            text, k=EVAL_SEARCH_K, mode=mode, collections=[EVAL_COLLECTION], query_vector=vector
        )
        ranked = dedupe_to_documents(hit.doc_id for hit in result.hits)
        _score(per_mode[mode], ranked, relevance, elapsed, recall_cutoffs)
        if mode == "hybrid" and rerank_model is not None:
            candidates = result.hits[:RERANK_CANDIDATES]
            outcome = rerank(rerank_model, text, candidates, passage_chars=RERANK_PASSAGE_CHARS)
            reranked_queries += outcome.reranked
            hits = [*outcome.hits, *result.hits[len(candidates) :]]
            ranked = dedupe_to_documents(hit.doc_id for hit in hits)
            spent = elapsed + outcome.elapsed_ms
            _score(per_mode[RERANK_MODE], ranked, relevance, spent, recall_cutoffs)
    return reranked_queries


def _mode_summaries(per_mode: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Each mode's mean scores and its p50 / p95 search latency (the latencies are popped from `per_mode`)."""
    report_modes = {}
    for report_name, scores in per_mode.items():
        latencies = scores.pop("latency_ms", [])
        summary = {name: round(sum(values) / len(values), 4) for name, values in scores.items() if values}
        summary["p50_ms"] = round(linear_percentile(latencies, 50), 2) if latencies else 0.0
        summary["p95_ms"] = round(linear_percentile(latencies, 95), 2) if latencies else 0.0
        report_modes[report_name] = summary
    return report_modes


def _score(
    scores: dict[str, list[float]],
    ranked: list[str],
    relevance: dict[str, int],
    latency_ms: float,
    recall_cutoffs: Sequence[int],
) -> None:
    """Append one query's metrics (nDCG@10, MRR@10, Recall@cutoffs) and latency to a mode's lists."""
    scores.setdefault("latency_ms", []).append(latency_ms)
    scores.setdefault("ndcg@10", []).append(ndcg_at_k(ranked, relevance, 10))
    scores.setdefault("mrr@10", []).append(mrr_at_k(ranked, relevance, 10))
    for cutoff in recall_cutoffs:
        scores.setdefault(f"recall@{cutoff}", []).append(recall_at_k(ranked, relevance, cutoff))
