"""Window pooling (retrieval/window_pooling.py): a text longer than the model's window is embedded by
overlapping windows of the model's own tokens, and its vector is the normalised mean of the windows'.

The fake model's tokens are whitespace-separated words and its window is 4 words, so every expected window
below is worked out by hand."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from config.settings import load_settings
from retrieval import embeddings as embeddings_module
from retrieval.embedding_errors import EmbeddingError
from retrieval.embeddings import MiniLMEmbeddings, base_embeddings
from retrieval.window_pooling import (
    WindowOverlapError,
    WindowPooledEmbeddings,
    mean_pooled,
    split_windows,
    window_starts,
)

WORDS = [f"w{i}" for i in range(10)]


class WordWindow:
    """A fake model tokenizer: one token per word, a window of `window` words."""

    def __init__(self, window: int = 4) -> None:
        self.window = window

    def window_tokens(self) -> int:
        return self.window

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return [(match.start(), match.end()) for match in re.finditer(r"\S+", text)]


class RecordingEmbeddings(Embeddings):
    """Each text's vector is [number of words, index of its first word, 1]; records every batch."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.queries: list[str] = []

    @staticmethod
    def vector(text: str) -> list[float]:
        words = text.split()
        return [float(len(words)), float(int(words[0][1:])), 1.0]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return [self.vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self.vector(text)


def unit(vector: list[float]) -> list[float]:
    array = np.asarray(vector, dtype=np.float64)
    return (array / np.linalg.norm(array)).tolist()


def test_window_starts_use_the_fewest_full_windows_spread_evenly() -> None:
    assert window_starts(4, 4, 1) == [0]  # fits: one window
    # 10 tokens, window 4, overlap 1: ceil((10 - 1) / 3) = 3 windows, starts 0, 3, 6 (each shares 1 token).
    assert window_starts(10, 4, 1) == [0, 3, 6]
    # 11 tokens: ceil(10 / 3) = 4 windows over 7 start positions: 0, 2, 4, 7 (steps within 4 - 1 = 3).
    assert window_starts(11, 4, 1) == [0, 2, 4, 7]
    # MiniLM's window (254 text tokens), overlap 32, a 600-token chunk: 3 windows, the last ending at 600.
    starts = window_starts(600, 254, 32)
    assert starts == [0, 173, 346] and starts[-1] + 254 == 600


@pytest.mark.parametrize("tokens", range(5, 60))
@pytest.mark.parametrize(("window", "overlap"), [(4, 0), (4, 1), (4, 3), (7, 2)])
def test_windows_cover_every_token_and_share_at_least_the_overlap(
    tokens: int, window: int, overlap: int
) -> None:
    starts = window_starts(tokens, window, overlap)
    if tokens <= window:
        assert starts == [0]
        return
    assert starts[0] == 0 and starts[-1] + window == tokens
    steps = [later - earlier for earlier, later in zip(starts, starts[1:], strict=False)]
    assert all(0 < step <= window - overlap for step in steps)
    fewer = len(starts) - 1
    assert fewer * (window - overlap) < tokens - overlap  # one window fewer could not cover the text


def test_an_overlap_not_below_the_window_is_one_clear_embedding_error() -> None:
    with pytest.raises(WindowOverlapError, match="RAG_EMBEDDING_WINDOW_OVERLAP=4 .* 4-token window"):
        window_starts(10, 4, 4)
    assert issubclass(WindowOverlapError, EmbeddingError)


def test_split_windows_cuts_text_at_token_offsets() -> None:
    text = "  " + "  ".join(WORDS) + "\n"
    assert split_windows("w0 w1  w2 w3", WordWindow().token_offsets("w0 w1  w2 w3"), 4, 1) == ["w0 w1  w2 w3"]
    windows = split_windows(text, WordWindow().token_offsets(text), 4, 1)
    assert windows == ["w0  w1  w2  w3", "w3  w4  w5  w6", "w6  w7  w8  w9"]


def test_mean_pooled_is_the_mean_scaled_to_unit_length() -> None:
    pooled = mean_pooled([[1.0, 0.0], [0.0, 1.0]])
    assert pooled == pytest.approx([math.sqrt(0.5), math.sqrt(0.5)], abs=1e-6)
    assert mean_pooled([[3.0, 4.0], [3.0, 4.0]]) == pytest.approx([0.6, 0.8], abs=1e-6)
    assert mean_pooled([[1.0, 0.0], [-1.0, 0.0]]) == [0.0, 0.0]  # a zero mean stays zero


def test_long_texts_are_pooled_short_ones_embedded_as_they_are_in_one_batch() -> None:
    inner = RecordingEmbeddings()
    pooled = WindowPooledEmbeddings(inner, WordWindow(), overlap=1)
    long_text = " ".join(WORDS)
    short = "w1 w2"
    vectors = pooled.embed_documents([short, long_text, "w3 w4 w5 w6"])
    # One call to the model with every window of every text, in order.
    assert inner.batches == [["w1 w2", "w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9", "w3 w4 w5 w6"]]
    assert vectors[0] == [2.0, 1.0, 1.0]  # within the window: the model's own vector, untouched
    assert vectors[2] == [4.0, 3.0, 1.0]
    # The long text: mean of [4, 0, 1], [4, 3, 1], [4, 6, 1] = [4, 3, 1], normalised.
    assert vectors[1] == pytest.approx(unit([4.0, 3.0, 1.0]), abs=1e-6)
    assert np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=1e-6)


def test_a_long_query_is_pooled_over_query_embeddings() -> None:
    inner = RecordingEmbeddings()
    pooled = WindowPooledEmbeddings(inner, WordWindow(), overlap=1)
    assert pooled.embed_query("w2 w3") == [2.0, 2.0, 1.0]
    assert pooled.embed_query(" ".join(WORDS)) == pytest.approx(unit([4.0, 3.0, 1.0]), abs=1e-6)
    assert inner.queries == ["w2 w3", "w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert inner.batches == []


def test_minilm_comes_wrapped_in_window_pooling_without_loading_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh MiniLM, not the process-wide one an earlier test of the session may have loaded.
    monkeypatch.setattr(embeddings_module, "_minilm", embeddings_module._minilm.__wrapped__)
    model, key = base_embeddings(load_settings())
    assert isinstance(model, WindowPooledEmbeddings)
    assert isinstance(model.inner, MiniLMEmbeddings) and model.inner._model is None  # loaded on first use
    assert (model.overlap, key) == (32, "minilm-l6-v2")  # the default keeps the cache and indexes valid
    monkeypatch.setenv("RAG_EMBEDDING_WINDOW_OVERLAP", "64")
    model, key = base_embeddings(load_settings())
    assert isinstance(model, WindowPooledEmbeddings) and model.overlap == 64
    assert key == "minilm-l6-v2/window-overlap=64"  # other pooled vectors: other cache entries
