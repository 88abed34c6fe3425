"""`python -m benchmarks keyword-pruning`: what query-term pruning costs in ranking quality, on real SciFact.

Pruning (persistence/keyword_pruning.py) only applies to large indexes, and the only large corpus here is
synthetic (`python -m benchmarks scale`), whose relevance is unknown. So its price is measured on real SciFact
(11k
chunks, keyword search alone) with each policy scaled to the same share of the corpus it would have at a
given size: the posting budget B at S chunks keeps terms whose frequencies add up to B/S of the corpus, so
on SciFact's N chunks the budget is B x N / S; the document-frequency share is a share already. That assumes
SciFact's term statistics at N chunks look like a corpus of S chunks at the same shares, which Zipf-shaped
vocabularies roughly do; it is a proxy, reported as one.

Reported on both qrels splits: train (SciFact has no dev split; the budget was chosen by latency on the
synthetic corpus, not here) and test. The rows are: every term (the exact ranking served below
`bm25_prune_min_chunks`), the share rule alone, and the settings' full policy as it acts at each size, with
and without the rescoring of the best candidates (persistence/bm25.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.data import iter_beir_corpus
from benchmarks.keyword_backends import DEV_SPLIT, corpus_chunks, load_catalog, quality
from config.settings import Settings
from evals.datasets import load_beir
from evals.environment import machine_description
from persistence.catalog import Catalog
from persistence.keyword_index import BM25_TITLE_WEIGHT
from persistence.keyword_pruning import (
    BM25_MAX_DF_FRACTION,
    BM25_MAX_QUERY_POSTINGS,
    BM25_MIN_QUERY_TERMS,
    BM25_RESCORE_POOL,
    PruningPolicy,
    pruning_policy,
)
from retrieval.chunking import MIN_CHUNK_FRACTION, ChunkingConfig

#: Corpus sizes (chunks) whose pruning is reproduced on SciFact: those of `python -m benchmarks scale`'s
#: stores.
DEFAULT_SCALE_SIZES = (50_500, 505_000)
REPORT_SPLITS = (DEV_SPLIT, "test")

Progress = Callable[[str], None]


def scaled_policies(
    settings: Settings, n_chunks: int, sizes: Sequence[int]
) -> dict[str, PruningPolicy | None]:
    """Name -> policy: every term, the share rule alone, and the settings' policy as it acts at each size
    (its posting budget scaled by n_chunks / size; applied at any size: SciFact is below the minimum)."""
    configured = pruning_policy(settings)
    policies: dict[str, PruningPolicy | None] = {
        "every term": None,
        f"df share <= {configured.max_df_fraction} only (no budget, no rescoring)": PruningPolicy(
            0, configured.max_df_fraction, configured.min_terms
        ),
    }
    for size in sizes:
        budget = None
        if configured.max_postings is not None:
            budget = max(1, round(configured.max_postings * n_chunks / size))
        scaled = PruningPolicy(
            0, configured.max_df_fraction, configured.min_terms, budget, configured.rescore_pool
        )
        policies[f"settings as at {size} chunks (budget {budget}, rescore {scaled.rescore_pool})"] = scaled
        if scaled.rescore_pool:
            policies[f"  same, no rescoring (budget {budget})"] = replace(scaled, rescore_pool=0)
    return policies


def run_keyword_pruning_eval(
    settings: Settings,
    *,
    scifact_dir: Path,
    work_dir: Path,
    sizes: Sequence[int] = DEFAULT_SCALE_SIZES,
    progress: Progress = lambda _message: None,
) -> dict[str, Any]:
    """nDCG@10, Recall@10/100, MRR@10 of FTS5 keyword search on SciFact under each policy, both splits."""
    splits = {split: load_beir(scifact_dir, split) for split in REPORT_SPLITS}
    first = splits[DEV_SPLIT]
    config = ChunkingConfig(settings.chunk_size, settings.chunk_overlap, MIN_CHUNK_FRACTION)
    documents = corpus_chunks(iter_beir_corpus(first.corpus_path), config)
    n_chunks = sum(len(document) for document in documents)
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / f"pruning-{uuid.uuid4().hex[:8]}.sqlite"
    results: dict[str, Any] = {}
    try:
        progress(f"loading {n_chunks} chunks")
        loader = Catalog(path)
        try:
            load_catalog(loader, documents, 0)
        finally:
            loader.close()
        for name, policy in scaled_policies(settings, n_chunks, sizes).items():
            progress(name)
            catalog = Catalog(path, pruning=policy)  # the same file, searched under this policy
            try:
                results[name] = {
                    split: quality(catalog, data.queries, data.qrels, BM25_TITLE_WEIGHT)
                    for split, data in splits.items()
                }
            finally:
                catalog.close()
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return {
        "benchmark": "keyword_pruning",
        "dataset": "BEIR SciFact, keyword (FTS5 BM25) search alone; train qrels = dev, test qrels reported",
        "judged_queries": {split: len(data.qrels) for split, data in splits.items()},
        "corpus_chunks": n_chunks,
        "settings": {
            "bm25_max_df_fraction": BM25_MAX_DF_FRACTION,
            "bm25_min_query_terms": BM25_MIN_QUERY_TERMS,
            "bm25_max_query_postings": BM25_MAX_QUERY_POSTINGS,
            "bm25_rescore_pool": BM25_RESCORE_POOL,
        },
        "machine": machine_description(),
        "policies": results,
    }
