"""Semantic chunking (the notes assistant's chunker, RAG_CHUNKER=semantic): cut where adjacent sentences'
meaning drifts apart, within the chunk size bounds of the paragraph chunker.

Units are sentences (a paragraph is often a whole chunk already), each embedded with `buffer` neighbours on
each side (a short sentence alone gives a noisy vector). A cut goes where the windows' similarity drops:
above the `percentile`-th percentile of the document's distances (`breakpoint="percentile"`, adapts to the
document), or below `min_similarity` (`"absolute"`). A segment longer than a chunk is packed by the paragraph
chunker; one shorter than `min_fraction * size` joins its more similar neighbour when both fit. No overlap
crosses a semantic cut. Embedding goes through the knowledge base's cache, so re-ingesting re-embeds only new
sentence windows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from retrieval.chunking import ChunkingConfig, Unit, join_parts, pack_units, split_units
from retrieval.tokens import count_tokens

#: Embeds a batch of texts (the knowledge base's `embed_documents`).
Embed = Callable[[list[str]], list[list[float]]]
Breakpoint = Literal["percentile", "absolute"]
#: Percentile breakpoint: cuts go where the drop (1 - cosine) exceeds this percentile of the document's
#: drops (90 = its largest tenth, LangChain SemanticChunker's default).
SEMANTIC_PERCENTILE = 90.0
#: Neighbouring sentences on each side embedded with a sentence when comparing it to the next.
SEMANTIC_BUFFER = 1


@dataclass(frozen=True)
class SemanticPolicy:
    """Where the semantic chunker cuts (see the module docstring); the breakpoint and the absolute
    threshold from RAG_SEMANTIC_BREAKPOINT and RAG_SEMANTIC_MIN_SIMILARITY."""

    breakpoint: Breakpoint = "percentile"
    percentile: float = SEMANTIC_PERCENTILE
    min_similarity: float = 0.5
    buffer: int = SEMANTIC_BUFFER

    def __post_init__(self) -> None:
        if not 0.0 <= self.percentile <= 100.0:
            raise ValueError(f"semantic percentile must be in [0, 100], got {self.percentile}")
        if not -1.0 <= self.min_similarity <= 1.0:
            raise ValueError(f"semantic minimum similarity must be in [-1, 1], got {self.min_similarity}")
        if self.buffer < 0:
            raise ValueError(f"semantic buffer must not be negative, got {self.buffer}")


def adjacent_similarities(texts: Sequence[str], embed: Embed, buffer: int) -> list[float]:
    """Cosine similarity between each sentence's window and the next one's (len(texts) - 1 values)."""
    if len(texts) < 2:
        return []
    windows = [join_parts(list(texts[max(0, i - buffer) : i + buffer + 1])) for i in range(len(texts))]
    vectors = np.asarray(embed(windows), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0.0, 1.0, norms)
    return [float(value) for value in (unit[:-1] * unit[1:]).sum(axis=1)]


def cut_points(similarities: Sequence[float], policy: SemanticPolicy) -> list[int]:
    """Indices i such that a cut goes between sentence i and sentence i + 1."""
    if not similarities:
        return []
    if policy.breakpoint == "absolute":
        return [i for i, value in enumerate(similarities) if value < policy.min_similarity]
    distances = 1.0 - np.asarray(similarities, dtype=np.float64)
    threshold = float(np.percentile(distances, policy.percentile))
    return [i for i, distance in enumerate(distances) if distance > threshold]


def semantic_chunk_text(
    text: str, config: ChunkingConfig, embed: Embed, policy: SemanticPolicy | None = None
) -> list[str]:
    """Chunks of `text` cut at drops of adjacent sentences' similarity, each at most `config.size` tokens."""
    policy = policy or SemanticPolicy()
    units = split_units(text, config, sentences=True)
    if len(units) < 2:
        return [unit.text for unit in units]
    similarities = adjacent_similarities([unit.text for unit in units], embed, policy.buffer)
    starts = [0, *(i + 1 for i in cut_points(similarities, policy)), len(units)]
    segments = [(start, end) for start, end in zip(starts, starts[1:], strict=False)]
    segments = _merge_short_segments(segments, units, similarities, config)
    chunks: list[str] = []
    for start, end in segments:
        chunks.extend(pack_units(units[start:end], config))
    return chunks


def _merge_short_segments(
    segments: list[tuple[int, int]], units: list[Unit], similarities: list[float], config: ChunkingConfig
) -> list[tuple[int, int]]:
    """Fold each segment under `min_fraction * size` tokens into the neighbour across its weaker cut (the
    higher similarity), else into the other one, when the two fit in one chunk; else leave it short."""
    threshold = config.min_fraction * config.size
    counted: dict[tuple[int, int], int] = {}

    def tokens(segment: tuple[int, int]) -> int:
        if segment not in counted:
            start, end = segment
            counted[segment] = count_tokens(join_parts([unit.text for unit in units[start:end]]))
        return counted[segment]

    merged = list(segments)
    index = 0
    while index < len(merged):
        if len(merged) == 1 or tokens(merged[index]) >= threshold:
            index += 1
            continue
        start, end = merged[index]
        # The similarity across a cut is the one between the last sentence before it and the first after it.
        neighbours = []
        if index > 0:
            neighbours.append((similarities[start - 1], index - 1))
        if index + 1 < len(merged):
            neighbours.append((similarities[end - 1], index + 1))
        for _, other in sorted(neighbours, reverse=True):
            first, second = min(index, other), max(index, other)
            joined = (merged[first][0], merged[second][1])
            if tokens(joined) <= config.size:
                merged[first : second + 1] = [joined]
                index = first  # the joined segment may still be short
                break
        else:
            index += 1
    return merged
