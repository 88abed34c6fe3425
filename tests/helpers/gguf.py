"""Read the key/value header of a GGUF file (tests): whether packaged weights are a chat model.

The format is a short sequence of typed values (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md);
tensor data and large arrays (the vocabulary) are skipped, never kept in memory.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import IO, Any

GGUF_MAGIC = b"GGUF"
#: Value type ids of the format -> struct code of the scalar types.
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING = 8
_ARRAY = 9
#: Arrays longer than this (token lists, merges) are skipped and reported by their length only.
MAX_KEPT_ARRAY = 64


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands."""


def _read(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise GGUFError("file ends inside the GGUF header")
    return data


def _string(stream: IO[bytes]) -> str:
    (length,) = struct.unpack("<Q", _read(stream, 8))
    return _read(stream, length).decode("utf-8", errors="replace")


def _value(stream: IO[bytes], kind: int) -> Any:
    if kind in _SCALARS:
        code = _SCALARS[kind]
        return struct.unpack(code, _read(stream, struct.calcsize(code)))[0]
    if kind == _STRING:
        return _string(stream)
    if kind == _ARRAY:
        item_kind, count = struct.unpack("<IQ", _read(stream, 12))
        if count > MAX_KEPT_ARRAY:
            if item_kind in _SCALARS:
                stream.seek(struct.calcsize(_SCALARS[item_kind]) * count, 1)
            else:
                for _ in range(count):
                    _value(stream, item_kind)
            return f"<array of {count}>"
        return [_value(stream, item_kind) for _ in range(count)]
    raise GGUFError(f"unknown GGUF value type {kind}")


def read_gguf_metadata(path: Path) -> dict[str, Any]:
    """The header's key/value pairs (long arrays replaced by '<array of N>'). Raises GGUFError."""
    with path.open("rb") as stream:
        if _read(stream, 4) != GGUF_MAGIC:
            raise GGUFError(f"{path} is not a GGUF file (bad magic)")
        version, _tensors, count = struct.unpack("<IQQ", _read(stream, 20))
        if version < 2:
            raise GGUFError(f"{path}: GGUF version {version} is not supported")
        metadata: dict[str, Any] = {}
        for _ in range(count):
            key = _string(stream)
            (kind,) = struct.unpack("<I", _read(stream, 4))
            metadata[key] = _value(stream, kind)
        return metadata
