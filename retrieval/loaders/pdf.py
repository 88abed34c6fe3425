"""PDF (.pdf): one section per page with text, numbered for citations; pypdf's errors become reasons."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from pypdf import PdfReader

from core.types import LoadedDocument, Section
from retrieval.loaders.decoding import normalise
from retrieval.loaders.guard import LoaderError, LoadGuard, StopRequested
from retrieval.loaders.sections import file_document

#: PDF titles that PDF writers fill in by default; they say nothing, so the file stem is used instead.
PLACEHOLDER_PDF_TITLES = frozenset({"", "untitled", "untitled document"})


def load_pdf(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """One section per PDF page that has text, with its 1-based page number for citations; the guard is
    checked between pages (one page's extraction is one pypdf call)."""
    # pypdf logs a warning for every recoverable defect; the outcome is reported through LoaderError.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            _decrypt_without_password(reader)
        pages: list[str] = []
        for page in reader.pages:
            guard.check()
            pages.append(normalise(page.extract_text() or ""))
        metadata_title = (reader.metadata.title if reader.metadata else None) or ""
    except (LoaderError, StopRequested):
        raise
    except RecursionError as exc:
        raise LoaderError("corrupt PDF: objects nested too deeply") from exc
    except Exception as exc:  # pypdf raises many types on damaged files; all mean the same to the user.
        raise LoaderError(f"corrupt PDF: {str(exc) or type(exc).__name__}") from exc
    sections = [Section(text=text, page=number) for number, text in enumerate(pages, start=1) if text]
    if not sections:
        raise LoaderError("PDF has no text layer (scanned?)")
    title = str(metadata_title).strip()
    if title.lower() in PLACEHOLDER_PDF_TITLES:
        title = path.stem
    return [file_document(path, title, "pdf", sections)]


def _decrypt_without_password(reader: PdfReader) -> None:
    """Open PDFs encrypted only against editing (empty user password); others need a password."""
    try:
        opened = reader.decrypt("")
    except Exception as exc:  # e.g. AES without the optional cryptography package.
        raise LoaderError(f"encrypted PDF: {str(exc) or type(exc).__name__}") from exc
    if not opened:
        raise LoaderError("encrypted PDF: a password is required")
