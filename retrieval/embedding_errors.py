"""The embedding layer's one error type, in a module of its own so that every embedding module (the models,
window pooling, the model-folder lookup) can raise it without importing the others; `retrieval.embeddings`
re-exports it. The CLI and the API turn it into one line (exit 1, HTTP 503)."""

from __future__ import annotations


class EmbeddingError(RuntimeError):
    """The embedding model could not be found, loaded or configured, or failed to embed."""
