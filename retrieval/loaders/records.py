"""JSON and JSONL records (.json, .jsonl, and their .gz): one document per record that has text, with its id
and scalar fields as metadata, bounded by core.metadata (fields over a bound are left out and counted).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from pathlib import Path
from typing import Any

from core.metadata import bound_record_metadata
from core.types import LoadedDocument, MetadataValue, Section, is_custom_metadata_key
from retrieval.loaders.decoding import decode_text, normalise
from retrieval.loaders.guard import LoaderError, LoadGuard

#: Record fields holding the text, in order of preference.
RECORD_TEXT_FIELDS = ("text", "content", "body", "page_content")
#: Record fields holding the id, in order of preference.
RECORD_ID_FIELDS = ("_id", "id", "doc_id")
#: Keys under which a JSON object may hold its list of records.
RECORD_LIST_KEYS = ("records", "data", "documents")
#: Record fields copied into metadata (scalars only, since Chroma accepts nothing else).
RECORD_METADATA_KEYS = (
    "chapter",
    "section",
    "conversation_id",
    "doc_type",
    "created_at",
    "level",
    "page",
    "category",
    "character_id",
    "background_id",
)
RECORD_DOC_TYPE = "record"
#: Record fields that are content or structure, not metadata (the rest of a record's scalars are kept).
RECORD_CONTENT_KEYS = frozenset({*RECORD_TEXT_FIELDS, *RECORD_ID_FIELDS, "title", "event", "unchunked"})
# A JSON string, quotes included; possessive, and the closing quote optional, so that malformed input
# (an unterminated string, stray backslashes) is still scanned once, never backtracked over.
_JSON_STRING_RE = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)
_JSON_NOT_BRACKET_RE = re.compile(r"[^\[\]{}]+")
_JSON_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def load_json(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """A JSON array of records, an object holding one under records/data/documents, or one record."""
    parsed = _parse_json(decode_text(data), line_number=None, guard=guard)
    if isinstance(parsed, dict):
        listed = next((parsed[key] for key in RECORD_LIST_KEYS if isinstance(parsed.get(key), list)), None)
        records: list[Any] = listed if listed is not None else [parsed]
    elif isinstance(parsed, list):
        records = parsed
    else:
        raise LoaderError("invalid JSON records: expected an array or an object")
    return _record_documents(path, records, guard)


def load_jsonl(path: Path, data: bytes, guard: LoadGuard) -> list[LoadedDocument]:
    """One JSON record per line; one malformed line fails the whole file so nothing half-loads."""
    records: list[Any] = []
    for number, line in enumerate(decode_text(data).splitlines(), start=1):
        guard.tick()
        if not line.strip():
            continue
        records.append(_parse_json(line, line_number=number, guard=guard))
    return _record_documents(path, records, guard)


def _parse_json(text: str, line_number: int | None, guard: LoadGuard) -> Any:
    """Parsed JSON, its nesting measured first (json.loads recurses in C); the error names the line."""
    line = line_number if line_number is not None else 1
    if _json_depth(text, guard.max_depth) > guard.max_depth:
        raise LoaderError(f"invalid JSON on line {line}: {guard.too_deep()}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        reason = exc.msg
        line = line_number if line_number is not None else exc.lineno
    except ValueError as exc:  # over-long integers
        reason = str(exc)
    except RecursionError:  # a recursion limit below the cap, or a deep stack already
        reason = str(guard.too_deep())
    raise LoaderError(f"invalid JSON on line {line}: {reason}")


def _json_depth(text: str, cap: int) -> int:
    """The deepest bracket nesting of JSON `text` outside strings, in a few passes of C code (linear even
    for malformed text); 0 without counting when the text has too few brackets to exceed `cap`."""
    if text.count("[") + text.count("{") <= cap:
        return 0
    brackets = _JSON_NOT_BRACKET_RE.sub("", _JSON_STRING_RE.sub("", text))
    return max(accumulate(map(_JSON_DEPTH_STEP.__getitem__, brackets)), default=0)


def _record_documents(path: Path, records: list[Any], guard: LoadGuard) -> list[LoadedDocument]:
    """Documents for the records that have text; a file where none has text is an error."""
    documents: list[LoadedDocument] = []
    for index, record in enumerate(records):
        guard.tick()
        if isinstance(record, dict) and (document := _record_document(path, index, record)) is not None:
            documents.append(document)
    if not documents:
        raise LoaderError("no records with text (expected a 'text' or 'content' field)")
    return documents


def _record_document(path: Path, index: int, record: dict[str, Any]) -> LoadedDocument | None:
    """One record as a document, or None when it has no text; the title leads the text (BEIR titles hold
    terms)."""
    body = next(
        (value for key in RECORD_TEXT_FIELDS if isinstance(value := record.get(key), str) and value.strip()),
        None,
    )
    if body is None:
        return None
    raw_title = record.get("title")
    title = " ".join(raw_title.split()) if isinstance(raw_title, str) else ""
    text = normalise(f"{title}\n\n{body}" if title else body)
    record_id = next(
        (str(value) for key in RECORD_ID_FIELDS if (value := record.get(key)) is not None and value != ""),
        str(index),
    )
    candidates: dict[str, MetadataValue] = {
        key: value for key in RECORD_METADATA_KEYS if isinstance(value := record.get(key), str | int | float)
    }
    candidates |= {  # the record's own keys (category, session_id, ...): kept and filterable
        key: value
        for key, value in record.items()
        if isinstance(value, str | int | float)
        and key not in RECORD_CONTENT_KEYS
        and is_custom_metadata_key(key)
    }
    bounded = bound_record_metadata(candidates)  # what fits core.metadata's bounds; the rest is counted
    metadata = bounded.kept
    doc_type = record.get("doc_type")
    page = metadata.get("page")
    section = metadata.get("section")
    chapter = metadata.get("chapter")
    return LoadedDocument(
        source=str(path),
        title=title or path.stem,
        doc_type=doc_type if isinstance(doc_type, str) and doc_type else RECORD_DOC_TYPE,
        sections=[
            Section(
                text=text,
                page=page if isinstance(page, int) and not isinstance(page, bool) else None,
                section=section if isinstance(section, str) and section else None,
                chapter=chapter if isinstance(chapter, str) and chapter else None,
            )
        ],
        doc_id=record_id,
        unchunked=bool(record.get("event")) or bool(record.get("unchunked")),
        metadata=metadata,
        metadata_left_out=len(bounded.dropped),
    )
