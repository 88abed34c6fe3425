"""Deterministic stand-ins for the embedding model, so retrieval tests run in milliseconds without torch.

Why hashed bag-of-words: texts that share words get similar vectors (cosine = shared-word overlap), which is
all the dense path needs to be testable, and the vectors are stable across processes (hashlib, not the
salted built-in `hash`). Calls are counted so tests can prove the embedding cache saved work.
"""

from __future__ import annotations

import hashlib
import re

from langchain_core.embeddings import Embeddings

from retrieval.embeddings import EmbeddingError

FAKE_DIMENSION = 256
#: Latin words and single CJK characters (Chinese has no spaces, so characters are the words here).
_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff]")


def _bucket(word: str) -> int:
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % FAKE_DIMENSION


def hashed_vector(text: str) -> list[float]:
    """L2-normalised word counts hashed into FAKE_DIMENSION buckets; a text without words gets bucket 0,
    so no vector is ever zero (Chroma's cosine distance is undefined for a zero vector)."""
    vector = [0.0] * FAKE_DIMENSION
    words = _WORD.findall(text.lower())
    for word in words:
        vector[_bucket(word)] += 1.0
    if not words:
        vector[0] = 1.0
    norm = sum(value * value for value in vector) ** 0.5
    return [value / norm for value in vector]


class HashEmbeddings(Embeddings):
    """Fake embedding model; records every text it was asked to embed."""

    def __init__(self) -> None:
        self.document_calls = 0
        self.query_calls = 0
        self.embedded_texts: list[str] = []

    def reset_counts(self) -> None:
        """Forget the calls so far (after a setup ingest)."""
        self.document_calls = 0
        self.query_calls = 0
        self.embedded_texts = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for passages."""
        self.document_calls += 1
        self.embedded_texts.extend(texts)
        return [hashed_vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """Vector for a query (same space as passages)."""
        self.query_calls += 1
        return hashed_vector(text)


class FailingEmbeddings(Embeddings):
    """A model that is down: every call raises the engine's EmbeddingError."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Always fails."""
        raise EmbeddingError("fake embedding model is down")

    def embed_query(self, text: str) -> list[float]:
        """Always fails."""
        raise EmbeddingError("fake embedding model is down")
