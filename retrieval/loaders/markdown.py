"""Markdown (.md, .markdown): sections at ATX headings, read line by line."""

from __future__ import annotations

import re
from pathlib import Path

from core.types import LoadedDocument
from retrieval.loaders.decoding import decode_text, normalise
from retrieval.loaders.guard import LoadGuard
from retrieval.loaders.sections import file_document, heading_sections

# The closing `#`s of a heading are removed in Python (`_markdown_heading_text`): a lazy group followed by
# optional spaces backtracked quadratically (a 20,000-space heading line took 5.7 s).
_MARKDOWN_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+)$")
_MARKDOWN_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")


def load_markdown(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """Markdown split at ATX headings (outside code fences), read line by line (no depth to cap); title is the
    first level-1 heading."""
    lines = normalise(decode_text(data)).split("\n")
    preamble: list[str] = []
    parts: list[tuple[int, str, list[str]]] = []
    in_fence = False
    for line in lines:
        guard.tick()
        if _MARKDOWN_FENCE_RE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _MARKDOWN_HEADING_RE.match(line)
        if match:
            parts.append((len(match.group(1)), _markdown_heading_text(match.group(2)), []))
        elif parts:
            parts[-1][2].append(line)
        else:
            preamble.append(line)
    title = next((heading for level, heading, _ in parts if level == 1), path.stem)
    triples = [(level, heading, "\n".join(body)) for level, heading, body in parts]
    sections = heading_sections(triples, "\n".join(preamble))
    return [file_document(path, title, "md", sections)]


def _markdown_heading_text(rest: str) -> str:
    """A heading's text without its optional closing `#`s (`## Title ##`), which must follow a space."""
    text = rest.rstrip(" \t")
    body = text.rstrip("#")
    if body != text and body and body[-1] in " \t":
        text = body
    return text.strip()
