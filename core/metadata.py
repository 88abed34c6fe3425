"""Bounds on the metadata a user gives a document (a JSON record's fields, a request's `metadata`).

Why: each key becomes a Chroma metadata field (thousands break the collection), integers must fit signed 64
bits, a long string is copied onto every chunk, and NaN matches no filter. Only a document's own keys count.
A request over a bound is refused (`validate_document_metadata`, 422); a file record keeps what fits
(`bound_record_metadata`), so one odd record does not fail a whole file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from core.types import CHUNK_METADATA_DEFAULTS, ENGINE_METADATA_KEYS, MetadataValue, is_custom_metadata_key

#: Keys of its own a document (or a memory) may carry; the schema's and the engine's keys do not count.
MAX_METADATA_KEYS = 32
#: Longest metadata key (the custom-key pattern of core.types, CUSTOM_METADATA_KEY, allows no longer).
MAX_METADATA_KEY_CHARS = 64
#: Longest string value (it is copied onto every chunk of the document, in both stores).
MAX_METADATA_STRING_CHARS = 1000
#: Integer values fit in signed 64 bits (Chroma's and SQLite's integers).
MIN_METADATA_INT = -(2**63)
MAX_METADATA_INT = 2**63 - 1


class MetadataBoundError(ValueError):
    """Metadata over a bound; `field` names what is wrong (`metadata` or `metadata.<key>`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class BoundedMetadata:
    """A record's metadata within the bounds, and the names of the fields left out (in record order)."""

    kept: dict[str, MetadataValue] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()


def is_own_key(key: str) -> bool:
    """Whether `key` counts against MAX_METADATA_KEYS: not a key of the schema nor one the engine sets."""
    return key not in CHUNK_METADATA_DEFAULTS and key not in ENGINE_METADATA_KEYS


def int_problem(value: int) -> str | None:
    """Why integer `value` cannot be stored (outside signed 64 bits), or None."""
    if MIN_METADATA_INT <= value <= MAX_METADATA_INT:
        return None
    return f"an integer must fit in signed 64 bits ({MIN_METADATA_INT} to {MAX_METADATA_INT})"


def value_problem(value: object) -> str | None:
    """Why `value` cannot be a metadata value (str, int, finite float, bool within bounds), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int_problem(value)
    if isinstance(value, float):
        return None if math.isfinite(value) else "a number must be finite (not NaN or an infinity)"
    if isinstance(value, str):
        if len(value) <= MAX_METADATA_STRING_CHARS:
            return None
        return f"a string value has at most {MAX_METADATA_STRING_CHARS} characters"
    return "a value is a string, an integer, a finite number or a boolean"


def key_problem(key: str) -> str | None:
    """Why `key` cannot be set by a user, or None."""
    if len(key) > MAX_METADATA_KEY_CHARS:
        return f"a key has at most {MAX_METADATA_KEY_CHARS} characters"
    if key in ENGINE_METADATA_KEYS or not (key in CHUNK_METADATA_DEFAULTS or is_custom_metadata_key(key)):
        return "not a settable metadata key (letters, digits and _, not starting with a digit)"
    return None


def validate_document_metadata(metadata: Mapping[str, object]) -> dict[str, MetadataValue]:
    """A request's document metadata, unchanged when within bounds; else MetadataBoundError."""
    own = sum(1 for key in metadata if is_own_key(key))
    if own > MAX_METADATA_KEYS:
        raise MetadataBoundError(
            "metadata", f"at most {MAX_METADATA_KEYS} keys of a document's own ({own} given)"
        )
    checked: dict[str, MetadataValue] = {}
    for key, value in metadata.items():
        problem = key_problem(key) or value_problem(value)
        if problem is not None:
            raise MetadataBoundError(f"metadata.{key[:MAX_METADATA_KEY_CHARS]}", problem)
        checked[key] = cast(MetadataValue, value)  # value_problem accepted its type
    return checked


def bound_record_metadata(metadata: Mapping[str, object]) -> BoundedMetadata:
    """A file record's metadata within the bounds, with the fields left out; never raises."""
    kept: dict[str, MetadataValue] = {}
    dropped: list[str] = []
    own = 0
    for key, value in metadata.items():
        if key_problem(key) is not None or value_problem(value) is not None:
            dropped.append(key)
            continue
        if is_own_key(key):
            if own >= MAX_METADATA_KEYS:
                dropped.append(key)
                continue
            own += 1
        kept[key] = cast(MetadataValue, value)  # value_problem accepted its type
    return BoundedMetadata(kept, tuple(dropped))
