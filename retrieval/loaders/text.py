"""Plain text (.txt): one section, which the chunker splits by paragraphs."""

from __future__ import annotations

from pathlib import Path

from core.types import LoadedDocument, Section
from retrieval.loaders.decoding import decode_text, normalise
from retrieval.loaders.guard import LoadGuard
from retrieval.loaders.sections import file_document


def load_txt(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """Plain text is one section; the chunker splits it by paragraphs."""
    text = normalise(decode_text(data))
    return [file_document(path, path.stem, "txt", [Section(text=text)])]
