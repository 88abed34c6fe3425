"""Embedding a text longer than the model's input window (MiniLM: 254 tokens of text), so a 512-token chunk is
not embedded from its first half only: the text is cut into windows of the model's own tokens, each is
embedded, and the vector is their mean, normalised again. The windows are the fewest full-width ones sharing
at least `overlap` tokens, spread evenly (no stub window weighing as much as a full one); a text that fits
one window is embedded as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from langchain_core.embeddings import Embeddings

from retrieval.embedding_errors import EmbeddingError


class TokenWindow(Protocol):
    """What window pooling needs from a model besides embedding: its window and its tokenizer."""

    def window_tokens(self) -> int:
        """Tokens of text one input holds (the model's special tokens excluded)."""
        ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character offsets of each of the model's tokens of `text`, in order."""
        ...


class WindowOverlapError(EmbeddingError):
    """The configured window overlap does not leave the model's window room to advance."""


def window_starts(tokens: int, window: int, overlap: int) -> list[int]:
    """Token index where each window starts: one window if `tokens` fit, else the fewest full windows that
    share at least `overlap` tokens pairwise, spread evenly (floor division keeps every step within
    `window - overlap`, so no pair shares less than `overlap`)."""
    if window < 1:
        raise ValueError(f"window must be positive, got {window}")
    if not 0 <= overlap < window:
        raise WindowOverlapError(
            f"RAG_EMBEDDING_WINDOW_OVERLAP={overlap} must be smaller than the model's {window}-token window"
        )
    if tokens <= window:
        return [0]
    count = math.ceil((tokens - overlap) / (window - overlap))
    return [index * (tokens - window) // (count - 1) for index in range(count)]


def split_windows(text: str, offsets: Sequence[tuple[int, int]], window: int, overlap: int) -> list[str]:
    """`text` itself when its tokens fit in `window`, else its windows' texts (character spans from the first
    token's start to the last token's end, so no character between is lost)."""
    if len(offsets) <= window:
        return [text]
    pieces = []
    for start in window_starts(len(offsets), window, overlap):
        end = min(start + window, len(offsets))
        pieces.append(text[offsets[start][0] : offsets[end - 1][1]])
    return pieces


def mean_pooled(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The mean of `vectors`, scaled to unit length (a zero mean stays zero)."""
    mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    pooled: list[float] = (mean / norm if norm > 0.0 else mean).astype(np.float32).tolist()
    return pooled


class WindowPooledEmbeddings(Embeddings):
    """`inner`'s embeddings, with texts longer than `model`'s window (usually `inner` itself) embedded by
    windows and pooled; all windows of one call go in one batch."""

    def __init__(self, inner: Embeddings, model: TokenWindow, overlap: int) -> None:
        self.inner = inner
        self.model = model
        self.overlap = overlap

    def _windows(self, text: str) -> list[str]:
        return split_windows(text, self.model.token_offsets(text), self.model.window_tokens(), self.overlap)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages; a passage longer than the window is the normalised mean of its windows."""
        windows = [self._windows(text) for text in texts]
        flat = [piece for pieces in windows for piece in pieces]
        vectors = self.inner.embed_documents(flat) if flat else []
        result: list[list[float]] = []
        position = 0
        for pieces in windows:
            own = vectors[position : position + len(pieces)]
            position += len(pieces)
            result.append(list(own[0]) if len(own) == 1 else mean_pooled(own))
        return result

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (a query longer than the window by windows too, each with the query encoding)."""
        pieces = self._windows(text)
        if len(pieces) == 1:
            return self.inner.embed_query(text)
        return mean_pooled([self.inner.embed_query(piece) for piece in pieces])
