"""Word documents (.docx): paragraphs and tables in order, in sections at Heading styles. The bytes are a zip
already checked and re-stored by `discovery.inflate_zip`; tests patch `Document` here to prove that.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from docx import Document
from docx.table import Table

from core.types import LoadedDocument
from retrieval.loaders.guard import LoaderError, LoadGuard, StopRequested
from retrieval.loaders.sections import file_document, heading_sections

_DOCX_HEADING_LEVEL_RE = re.compile(r"(\d+)")


def load_docx(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """DOCX paragraphs and tables in document order, split into sections at Heading styles (libxml2 caps the
    nesting, and no recursion happens here)."""
    try:
        document = Document(io.BytesIO(data))
        blocks: list[tuple[str, int | None]] = []
        for block in document.iter_inner_content():
            guard.tick()
            blocks.append(
                _docx_table_text(block, guard) if isinstance(block, Table) else _docx_paragraph(block)
            )
        core_title = document.core_properties.title or ""
    except (LoaderError, StopRequested):
        raise
    except Exception as exc:  # python-docx and its zip/XML layers raise many types on damaged files.
        if "Excessive depth" in str(exc):  # lxml's XMLSyntaxError, in libxml2's words
            raise LoaderError(
                "corrupt DOCX: XML nested deeper than 256 levels (the XML parser's limit)"
            ) from exc
        raise LoaderError(f"corrupt DOCX: {str(exc) or type(exc).__name__}") from exc
    preamble: list[str] = []
    parts: list[tuple[int, str, list[str]]] = []
    title_style_text = ""
    for text, level in blocks:
        if level == 0:
            title_style_text = title_style_text or text
            level = None
        if level is not None:
            parts.append((level, text, []))
        elif parts:
            parts[-1][2].append(text)
        else:
            preamble.append(text)
    first_chapter = next((heading for level, heading, _ in parts if level == 1), "")
    title = core_title.strip() or title_style_text or first_chapter or path.stem
    triples = [(level, heading, "\n\n".join(body)) for level, heading, body in parts]
    sections = heading_sections(triples, "\n\n".join(preamble))
    return [file_document(path, title, "docx", sections)]


def _docx_paragraph(paragraph: Any) -> tuple[str, int | None]:
    """Paragraph text and its heading level: 0 for the Title style, None for body text."""
    text = paragraph.text.strip()
    style_name = (paragraph.style.name if paragraph.style is not None else "") or ""
    lowered = style_name.lower()
    if not text:
        return "", None
    if lowered == "title":
        return text, 0
    if lowered.startswith("heading"):
        match = _DOCX_HEADING_LEVEL_RE.search(style_name)
        return text, int(match.group(1)) if match else 1
    return text, None


def _docx_table_text(table: Any, guard: LoadGuard) -> tuple[str, None]:
    """Table rows as lines of ' | '-joined cells; merged cells (repeated objects) appear once."""
    lines: list[str] = []
    for row in table.rows:
        guard.tick()
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # python-docx's underlying <w:tc> element: merged cells are distinct objects sharing one element
            if id(cell._tc) in seen:  # noqa: SLF001
                continue
            seen.add(id(cell._tc))  # noqa: SLF001
            cell_text = " ".join(cell.text.split())
            if cell_text:
                cells.append(cell_text)
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines), None
