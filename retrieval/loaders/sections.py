"""Sections and documents as every format builds them: headings split a file into sections, empty ones
are dropped, and a file with no text at all is an error rather than a silent skip."""

from __future__ import annotations

from pathlib import Path

from core.types import LoadedDocument, Section
from retrieval.loaders.decoding import normalise
from retrieval.loaders.guard import LoaderError


def require_text(sections: list[Section]) -> list[Section]:
    """Drop empty sections; a document left with none is an error, not a silent skip."""
    kept = [section for section in sections if section.text]
    if not kept:
        raise LoaderError("empty document: no text")
    return kept


def heading_sections(parts: list[tuple[int, str, str]], preamble: str) -> list[Section]:
    """Sections from (level, heading, body) triples, the heading leading its text; `section` is the nearest
    heading, `chapter` the nearest level-1 one. A section that is only a heading is dropped."""
    sections = [Section(text=normalise(preamble))]
    chapter: str | None = None
    for level, heading, body in parts:
        if level == 1:
            chapter = heading
        body = normalise(body)
        if body:
            sections.append(Section(text=f"{heading}\n\n{body}", section=heading, chapter=chapter))
    kept = [section for section in sections if section.text]
    if kept:
        return kept
    # Only headings: keep them as text rather than calling the document empty.
    headings = "\n\n".join(heading for _, heading, _ in parts)
    return require_text([Section(text=normalise(headings))])


def file_document(path: Path, title: str, doc_type: str, sections: list[Section]) -> LoadedDocument:
    """A document that is a whole file: its id is the path."""
    return LoadedDocument(
        source=str(path),
        title=title or path.stem,
        doc_type=doc_type,
        sections=require_text(sections),
        doc_id=str(path),
    )
