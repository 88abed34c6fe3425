"""How a retrieved passage or a recalled memory reads in an answer prompt, and how copies of it are cleaned
out of an answer. A source is a header line `[2] (File: setup.md, Page: 3, Section: Install, Score: 0.82)`
(fields cleaned to stay one line, cut to HEADER_FIELD_CHARS), then its neutralised text (retrieval.injection),
ending with TRUNCATION_MARKER when cut; a memory is one line numbered like a source. Weak models echo
headers into answers: strip_source_headers takes them out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePath

from retrieval.injection import neutralize
from state.schemas import RetrievedDoc

#: Between two source blocks.
SOURCE_SEPARATOR = "\n\n"
#: What ends a passage cut to fit the budget (after its last kept token), counted in the budget.
TRUNCATION_MARKER = " […truncated]"
#: Characters of a section name in a source header (longer ones are cut with an ellipsis).
HEADER_FIELD_CHARS = 80
#: A source header line copied into an answer by a weak model ("[1] (File: a.md, Page: 2)").
#: The label goes with it only at the start of a line (elsewhere "[1]" may be a real citation).
_HEADER_ECHO = re.compile(r"(?m)^[ \t]*\[\d+\][ \t]*\(File: [^)\n]*\)[ \t]*|[ \t]*\(File: [^)\n]*\)[ \t]*")
#: The truncation marker copied into an answer.
_MARKER_ECHO = re.compile(r"[ \t]*\[…truncated\]")
#: What a header field may not hold: brackets would end the header early, line breaks would split it.
_HEADER_UNSAFE = re.compile(r"[()\[\]\s]+")
_SPACE_RUN = re.compile(r"[ \t]{2,}")
_SPACE_BEFORE_PUNCT = re.compile(r"[ \t]+(?=\n|[.,;:!?。，；：！？])")


def header_field(value: object, limit: int = HEADER_FIELD_CHARS) -> str:
    """A metadata value fit for a header: brackets and whitespace runs become one space, cut to `limit`
    characters with an ellipsis ("" for a missing value)."""
    return clipped(_HEADER_UNSAFE.sub(" ", str(value or "")).strip(), limit)


def format_score(score: float) -> str:
    """A retrieval score in three significant digits (0.82, 0.0164 for a fused rank score)."""
    return f"{score:.3g}"


def source_header(label: int, doc: RetrievedDoc) -> str:
    """`[n] (File: name, Page: p, Section: s, Score: x)`: the page only when it is known (> 0), the section
    (heading, else chapter) only when the chunk has one, the score always (the search's, as ranked)."""
    name = PurePath(doc.get("source") or "").name or doc.get("title") or "unknown"
    fields = [f"File: {header_field(name)}"]
    page = doc.get("page") or 0
    if page > 0:
        fields.append(f"Page: {page}")
    metadata = doc.get("metadata") or {}
    section = header_field(metadata.get("section") or metadata.get("chapter"))
    if section:
        fields.append(f"Section: {section}")
    fields.append(f"Score: {format_score(float(doc.get('score') or 0.0))}")
    return f"[{label}] ({', '.join(fields)})"


def strip_source_headers(text: str) -> str:
    """`text` without copies of source header lines or truncation markers (weak models echo them into their
    answers)."""
    cleaned = _MARKER_ECHO.sub("", _HEADER_ECHO.sub(" ", text))
    return _SPACE_BEFORE_PUNCT.sub("", _SPACE_RUN.sub(" ", cleaned)).strip()


def format_source(label: int, doc: RetrievedDoc, text: str | None = None) -> str:
    """The block of one source: its header line, then its text (or the given truncated text), neutralised:
    a passage is untrusted data inside the prompt's fence, so look-alikes of the fence, chat role markers and
    source headers in it are defanged (retrieval.injection.neutralize) before it is counted and packed."""
    return f"{source_header(label, doc)}\n{neutralize(doc['text'] if text is None else text)}"


def format_memory(label: int, doc: RetrievedDoc, text: str | None = None) -> str:
    """The line of one recalled memory: `[n] (memory 12, preference) text`, neutralised like a source (a
    memory is data the caller wrote, not an instruction to the model)."""
    kind = doc["metadata"].get("memory_kind") or "note"
    body = neutralize(doc["text"] if text is None else text)
    return f"[{label}] ({doc.get('title') or 'memory'}, {kind}) {body}"


#: Writes one numbered block (label, document, text or None for the document's own): a source or a memory.
Formatter = Callable[[int, RetrievedDoc, "str | None"], str]


def clipped(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis (header fields, prompt_info's section texts)."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…" if limit > 0 else ""
