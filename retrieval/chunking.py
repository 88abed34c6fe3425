"""Token-sized chunking: paragraphs first, then sentences, then hard token cuts.

Why this order: a paragraph is the unit a writer meant to stand alone, so chunks follow paragraph breaks
whenever a paragraph fits; longer paragraphs are cut at sentence ends (English and Chinese punctuation), and
only a single sentence longer than a chunk is cut mid-sentence. Consecutive chunks share `overlap` tokens so
a fact that straddles a boundary is still retrievable, and chunks shorter than `min_fraction * size` are
merged into a neighbour so tiny fragments do not crowd the results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from retrieval.tokens import count_tokens, decode, encode

PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
#: Sentence ends: ASCII terminators followed by space, or CJK terminators (no space needed in Chinese).
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；…])")
REPLACEMENT_CHARACTER = "\ufffd"


@dataclass(frozen=True)
class ChunkingConfig:
    """Sizes in tiktoken tokens."""

    size: int
    overlap: int
    min_fraction: float = 0.25

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"chunk size must be positive, got {self.size}")
        if not 0 <= self.overlap < self.size:
            raise ValueError(f"chunk overlap must be in [0, size), got {self.overlap} for size {self.size}")


@dataclass
class _Unit:
    text: str
    tokens: int


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, cut after . ! ? ; and their Chinese forms."""
    return [part.strip() for part in SENTENCE_END.split(text) if part and part.strip()]


def _hard_split(text: str, size: int) -> list[_Unit]:
    ids = encode(text)
    pieces = []
    for start in range(0, len(ids), size):
        piece = decode(ids[start : start + size]).strip(REPLACEMENT_CHARACTER).strip()
        if piece:
            pieces.append(_Unit(piece, count_tokens(piece)))
    return pieces


def _units(text: str, size: int) -> list[_Unit]:
    """Paragraphs that fit, else their sentences, else token slices; in reading order."""
    units: list[_Unit] = []
    for paragraph in PARAGRAPH_BREAK.split(text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        tokens = count_tokens(paragraph)
        if tokens <= size:
            units.append(_Unit(paragraph, tokens))
            continue
        for sentence in split_sentences(paragraph):
            sentence_tokens = count_tokens(sentence)
            if sentence_tokens <= size:
                units.append(_Unit(sentence, sentence_tokens))
            else:
                units.extend(_hard_split(sentence, size))
    return units


def _joiner(left: str, right: str) -> str:
    """Blank line between paragraphs; no space between Chinese sentences; else one space."""
    if left.endswith(("。", "！", "？", "；", "…")) or right[:1] and "\u4e00" <= right[0] <= "\u9fff":
        return ""
    return " "


def _tail(text: str, tokens: int) -> str:
    """The last `tokens` tokens of `text` (the overlap carried into the next chunk)."""
    if tokens <= 0:
        return ""
    ids = encode(text)
    return decode(ids[-tokens:]).lstrip(REPLACEMENT_CHARACTER).strip()


def chunk_text(text: str, config: ChunkingConfig) -> list[str]:
    """Split `text` into chunks of at most about `config.size` tokens with `config.overlap` tokens shared."""
    units = _units(text, config.size)
    if not units:
        return []
    pieces: list[_Piece] = []
    current = _Piece("", 0, [], 0)
    for unit in units:
        if current.body and current.tokens + unit.tokens > config.size:
            pieces.append(current)
            overlap = _tail(current.text, config.overlap) if config.overlap else ""
            overlap_tokens = count_tokens(overlap) if overlap else 0
            if overlap_tokens + unit.tokens > config.size:
                overlap, overlap_tokens = "", 0
            current = _Piece(overlap, overlap_tokens, [], 0)
        current.body.append(unit.text)
        current.body_tokens += unit.tokens
    pieces.append(current)
    return [piece.text for piece in _merge_short(pieces, config)]


@dataclass
class _Piece:
    """A chunk under construction: the overlap carried from its predecessor, then its own units."""

    overlap: str
    overlap_tokens: int
    body: list[str]
    body_tokens: int

    @property
    def tokens(self) -> int:
        return self.overlap_tokens + self.body_tokens

    @property
    def text(self) -> str:
        return _join(([self.overlap] if self.overlap else []) + self.body)


def _join(parts: list[str]) -> str:
    text = parts[0]
    for part in parts[1:]:
        text += _joiner(text, part) + part
    return text


def _merge_short(pieces: list[_Piece], config: ChunkingConfig) -> list[_Piece]:
    """Fold pieces under `min_fraction * size` tokens into their predecessor (their overlap is then dropped,
    being the predecessor's own tail) or, for a short first piece, into its successor."""
    threshold = config.min_fraction * config.size
    merged: list[_Piece] = []
    for piece in pieces:
        previous = merged[-1] if merged else None
        if previous and piece.tokens < threshold and previous.tokens + piece.body_tokens <= config.size:
            previous.body.extend(piece.body)
            previous.body_tokens += piece.body_tokens
        else:
            merged.append(piece)
    if len(merged) > 1 and merged[0].tokens < threshold:
        first, second = merged[0], merged[1]
        if first.tokens + second.body_tokens <= config.size:
            first.body.extend(second.body)
            first.body_tokens += second.body_tokens
            del merged[1]
    return merged
