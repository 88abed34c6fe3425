"""Bytes to text: UTF-8 / UTF-16 / GB18030 decoding, a binary sniff, and the light clean-up every format
shares (paragraph breaks kept, since chunking splits on blank lines first)."""

from __future__ import annotations

import re

from retrieval.loaders.guard import LoaderError

#: Bytes inspected to tell text from binary (enough to catch any real binary header).
BINARY_SNIFF_BYTES = 8192
#: Share of control characters above which a file is taken as binary rather than text.
MAX_CONTROL_RATIO = 0.30
#: Control bytes that plain text legitimately contains (tab, newline, vertical tab, form feed, CR, ESC).
TEXT_CONTROL_BYTES = frozenset(b"\t\n\v\f\r\x1b")

UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_EXCESS_NEWLINES_RE = re.compile(r"\n{3,}")
# Matches only from the start of a run of spaces: without the look-behind, a long run inside a line was
# rescanned from each of its spaces (quadratic: 20,000 spaces before a word took 1.7 s).
_TRAILING_SPACE_RE = re.compile(r"(?<![ \t\u3000])[ \t\u3000]++$", re.MULTILINE)


def _looks_binary(data: bytes) -> bool:
    """NUL bytes or a high share of control characters in the first bytes mean a binary file."""
    head = data[:BINARY_SNIFF_BYTES]
    if not head:
        return False
    if b"\x00" in head:
        return True
    controls = sum(1 for byte in head if (byte < 0x20 or byte == 0x7F) and byte not in TEXT_CONTROL_BYTES)
    return controls / len(head) > MAX_CONTROL_RATIO


def decode_text(data: bytes) -> str:
    """Decode bytes as UTF-8 (BOM optional), UTF-16 (BOM required) or, for Chinese files of Windows tools,
    GB18030 (only for bytes that are not binary and decode without a single error)."""
    if data.startswith(UTF8_BOM):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise LoaderError("undecodable text: UTF-8 BOM but invalid UTF-8") from exc
    if data.startswith(UTF16_BOMS):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise LoaderError("undecodable text: UTF-16 BOM but invalid UTF-16") from exc
    if _looks_binary(data):
        raise LoaderError("binary file (not text)")
    for encoding in ("utf-8", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise LoaderError("undecodable text: not UTF-8 / UTF-16 / GB18030")


def normalise(text: str) -> str:
    """Light clean-up that keeps paragraph breaks, since chunking splits on blank lines first."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _TRAILING_SPACE_RE.sub("", text)
    text = _EXCESS_NEWLINES_RE.sub("\n\n", text)
    return text.strip()
