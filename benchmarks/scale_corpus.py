"""A synthetic corpus for the scale benchmark: SciFact-vocabulary chunks with MiniLM-like vectors.

Why synthetic: SciFact has 5,183 abstracts, the benchmark needs 500,000 chunks, and encoding 500k chunks with
MiniLM takes hours on 2 cores. So the TEXT of every chunk is real SciFact sentences and the VECTOR of every
chunk is a mixture of real MiniLM vectors of the SciFact passages its sentences came from:

- text: `PRIMARY_SENTENCES` consecutive sentences of a primary passage P (a random window), then
  `SECONDARY_SENTENCES` sentences of a secondary passage S; the title is P's title;
- vector: normalise(w * v(P) + (1 - w) * v(S) + noise), w ~ Uniform(MIX_WEIGHT_RANGE), noise ~ N(0, I) scaled
  to norm `NOISE_NORM` (so a chunk is about as close to its passage as two chunks of one document are), where
  v(X) is MiniLM (all-MiniLM-L6-v2, normalised) of X's title and text (first BASE_MAX_TOKENS tokens), for
  the first BASE_PASSAGES SciFact passages, computed once and cached.

The keyword side therefore sees SciFact's real term statistics (Zipf-distributed, common biomedical terms in
many chunks) and the dense side sees vectors on MiniLM's manifold clustered like real documents, which is
what HNSW and BM25 costs depend on. Every chunk is a pure function of (seed, index), so the 5k, 50k and 500k
corpora are reproducible and each smaller one is a prefix of the larger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.data import iter_beir_corpus
from core.text import split_sentences
from evals.datasets import read_beir_queries

#: Consecutive sentences taken from the primary passage (inclusive range).
PRIMARY_SENTENCES = (2, 4)
#: Sentences taken from the secondary passage (inclusive range).
SECONDARY_SENTENCES = (1, 2)
#: Weight of the primary passage's vector in the mixture.
MIX_WEIGHT_RANGE = (0.6, 0.9)
#: Norm of the Gaussian noise added to the mixture before normalising.
NOISE_NORM = 0.35
#: Chunks generated per random stream: chunk i depends on (seed, i // BLOCK) only, so prefixes agree.
BLOCK = 1000
#: SciFact passages (in corpus order) whose vectors are the mixtures' material, and the MiniLM window used to
#: encode them: 2,000 x 128 tokens is about 5 CPU-minutes on this machine; all 5,183 x 256 tokens was ~25.
BASE_PASSAGES = 2000
BASE_MAX_TOKENS = 128
CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"


@dataclass(frozen=True)
class BasePassages:
    """The real material: SciFact passages (title, sentences) and their MiniLM vectors (row i = passage i)."""

    ids: list[str]
    titles: list[str]
    sentences: list[list[str]]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        if not self.ids:
            raise ValueError("no base passages")
        if self.vectors.shape[0] != len(self.ids):
            raise ValueError(f"{self.vectors.shape[0]} vectors for {len(self.ids)} passages")


@dataclass(frozen=True)
class SyntheticChunk:
    """One generated chunk: its text, title, vector, and the passages it was mixed from."""

    index: int
    title: str
    text: str
    vector: np.ndarray
    primary: int
    secondary: int


def _find(folder: Path, name: str) -> Path:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"{name}(.gz) not found in {folder}")


def read_scifact_passages(folder: Path) -> tuple[list[str], list[str], list[list[str]]]:
    """(ids, titles, sentences) of the SciFact corpus in `folder`; passages without a sentence are skipped."""
    ids, titles, sentences = [], [], []
    for passage in iter_beir_corpus(_find(folder, CORPUS_FILE)):
        split = [sentence for sentence in split_sentences(passage.text) if sentence.strip()]
        if split:
            ids.append(passage.passage_id)
            titles.append(passage.title)
            sentences.append(split)
    return ids, titles, sentences


def read_scifact_queries(folder: Path, count: int, seed: int) -> list[str]:
    """`count` SciFact claims drawn at random (read from the data file at run time, never stored in code)."""
    texts = sorted(set(read_beir_queries(_find(folder, QUERIES_FILE)).values()))
    if not texts:
        raise ValueError(f"no queries in {folder}")
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[int(index)] for index in order[: min(count, len(texts))]]


def load_base(
    folder: Path, cache: Path, encode: Callable[[list[str]], list[list[float]]], limit: int | None = None
) -> BasePassages:
    """SciFact passages with their vectors; the vectors are encoded once with `encode` and kept in `cache`
    (a .npy file beside the stores): encoding 5k passages costs minutes on 2 cores, reading them back none."""
    ids, titles, sentences = read_scifact_passages(folder)
    if limit is not None:
        ids, titles, sentences = ids[:limit], titles[:limit], sentences[:limit]
    if cache.exists():
        vectors = np.load(cache)
        if vectors.shape[0] == len(ids):
            return BasePassages(ids, titles, sentences, vectors.astype(np.float32))
    inputs = [
        f"{title}\n{' '.join(parts)}" if title else " ".join(parts)
        for title, parts in zip(titles, sentences, strict=True)
    ]
    vectors = np.asarray(encode(inputs), dtype=np.float32)
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_name(f"{cache.stem}.partial.npy")
    np.save(partial, vectors)
    partial.replace(cache)
    return BasePassages(ids, titles, sentences, vectors)


def base_encoder(model: Any, max_tokens: int = BASE_MAX_TOKENS) -> Callable[[list[str]], list[list[float]]]:
    """`model.embed_documents` with MiniLM's window cut to `max_tokens` (the base passages' encoder)."""
    model._load().max_seq_length = max_tokens  # noqa: SLF001 - the sentence-transformers model's window
    return model.embed_documents


def _window(rng: np.random.Generator, sentences: Sequence[str], bounds: tuple[int, int]) -> list[str]:
    size = min(int(rng.integers(bounds[0], bounds[1] + 1)), len(sentences))
    start = int(rng.integers(0, len(sentences) - size + 1))
    return list(sentences[start : start + size])


def _block(base: BasePassages, seed: int, block: int) -> list[SyntheticChunk]:
    rng = np.random.default_rng([seed, block])
    count = len(base.ids)
    dimension = base.vectors.shape[1]
    chunks = []
    for offset in range(BLOCK):
        primary, secondary = int(rng.integers(count)), int(rng.integers(count))
        weight = float(rng.uniform(*MIX_WEIGHT_RANGE))
        noise = rng.standard_normal(dimension).astype(np.float32)
        noise *= NOISE_NORM / max(float(np.linalg.norm(noise)), 1e-12)
        vector = weight * base.vectors[primary] + (1.0 - weight) * base.vectors[secondary] + noise
        vector /= max(float(np.linalg.norm(vector)), 1e-12)
        text = " ".join(
            _window(rng, base.sentences[primary], PRIMARY_SENTENCES)
            + _window(rng, base.sentences[secondary], SECONDARY_SENTENCES)
        )
        chunks.append(
            SyntheticChunk(block * BLOCK + offset, base.titles[primary], text, vector, primary, secondary)
        )
    return chunks


def synthetic_chunks(
    base: BasePassages, count: int, seed: int = 0, start: int = 0
) -> Iterator[SyntheticChunk]:
    """Chunks `start` .. `count - 1` of the corpus of `seed` (the same index always yields the same chunk)."""
    block = start // BLOCK
    while block * BLOCK < count:
        for chunk in _block(base, seed, block):
            if start <= chunk.index < count:
                yield chunk
        block += 1
