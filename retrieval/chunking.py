"""Token-sized chunking: paragraphs first (the unit a writer meant to stand alone), then sentences, then hard
token cuts. Consecutive chunks share `overlap` tokens so a fact straddling a boundary stays retrievable, and
chunks under `min_fraction * size` merge into a neighbour.

Not langchain-text-splitters: its overlap is whole splits, it has no merging of short chunks, it bounds a
chunk by the sum of its parts rather than the joined text, and its token splitter cuts inside CJK characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.text import contains_cjk, split_sentences
from retrieval.tokens import count_tokens, decode, encode

PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
REPLACEMENT_CHARACTER = "\ufffd"
#: Chunks shorter than this share of the chunk size merge into a neighbour: a few words alone embed as noise.
MIN_CHUNK_FRACTION = 0.25


@dataclass(frozen=True)
class ChunkingConfig:
    """Sizes in tiktoken tokens; `separators` split the text first (none = a blank line)."""

    size: int
    overlap: int
    min_fraction: float = MIN_CHUNK_FRACTION
    separators: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"chunk size must be positive, got {self.size}")
        if not 0 <= self.overlap < self.size:
            raise ValueError(f"chunk overlap must be in [0, size), got {self.overlap} for size {self.size}")
        if any(not separator for separator in self.separators):
            raise ValueError("a chunk separator must not be empty (it would split between every character)")


@dataclass
class Unit:
    """A paragraph, sentence or token slice that the packer never cuts further."""

    text: str
    tokens: int


def _hard_split(text: str, size: int) -> list[Unit]:
    """Cut a unit longer than `size` into token slices of at most `size` tokens, backing off to the last
    whole character (a CJK character spans several tokens; cut blindly, it would be lost as U+FFFD)."""
    ids = encode(text)
    pieces = []
    start = 0
    while start < len(ids):
        end = min(start + size, len(ids))
        while end - 1 > start and (
            decode(ids[start:end]).endswith(REPLACEMENT_CHARACTER)
            or count_tokens(decode(ids[start:end]).strip()) > size
        ):
            end -= 1
        piece = decode(ids[start:end]).strip(REPLACEMENT_CHARACTER).strip()
        if piece:
            pieces.append(Unit(piece, count_tokens(piece)))
        start = end
    return pieces


def separator_pattern(separators: tuple[str, ...]) -> re.Pattern[str]:
    """What splits a text into paragraphs: a blank line by default, else any of `separators` (literally)."""
    if not separators:
        return PARAGRAPH_BREAK
    # Longest first, so a separator that contains another ("\n\n" and "\n") is matched whole.
    ordered = sorted(separators, key=len, reverse=True)
    return re.compile("|".join(re.escape(separator) for separator in ordered))


def split_units(text: str, config: ChunkingConfig, *, sentences: bool = False) -> list[Unit]:
    """Paragraphs that fit, else their sentences, else token slices; in reading order. With `sentences`,
    every paragraph is split into its sentences (the semantic chunker compares sentences)."""
    size = config.size
    units: list[Unit] = []
    for paragraph in separator_pattern(config.separators).split(text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        tokens = count_tokens(paragraph)
        if tokens <= size and not sentences:
            units.append(Unit(paragraph, tokens))
            continue
        for sentence in split_sentences(paragraph):
            sentence_tokens = count_tokens(sentence)
            if sentence_tokens <= size:
                units.append(Unit(sentence, sentence_tokens))
            else:
                units.extend(_hard_split(sentence, size))
    return units


#: Endings of running text: a unit ending in one of these continues on the same line.
RUNNING_TEXT_ENDINGS = (".", "!", "?", ":", ";", ",", '"', "'", ")", "]", "\u201d", "\u2019", "\u2026")


def _joiner(left: str, right: str) -> str:
    """No space around Chinese text; one space after running text; a line break after a unit that does not
    end like a sentence (a heading), so "Jupiter" + "Jupiter is..." never reads as one sentence."""
    if left.endswith(("。", "！", "？", "；", "…")) or contains_cjk(right[:1]):
        return ""
    return " " if left.rstrip().endswith(RUNNING_TEXT_ENDINGS) else "\n"


def _tail(text: str, tokens: int) -> str:
    """The last `tokens` tokens of `text` (the overlap carried into the next chunk)."""
    if tokens <= 0:
        return ""
    ids = encode(text)
    return decode(ids[-tokens:]).lstrip(REPLACEMENT_CHARACTER).strip()


def chunk_text(text: str, config: ChunkingConfig) -> list[str]:
    """Split `text` into chunks of at most `config.size` tokens (counted on the joined text: joining changes
    the tokenisation at the seams), consecutive chunks sharing up to `config.overlap` tokens."""
    return pack_units(split_units(text, config), config)


def pack_units(units: list[Unit], config: ChunkingConfig) -> list[str]:
    """Units packed in order into chunks (see `chunk_text`), short chunks merged."""
    if not units:
        return []
    pieces: list[_Piece] = []
    current = _Piece("", [])
    for unit in units:
        if current.body and count_tokens(join_parts([current.text, unit.text])) > config.size:
            pieces.append(current)
            current = _Piece(_fitting_overlap(current.text, [unit.text], config), [])
        current.body.append(unit.text)
    pieces.append(current)
    return [piece.text for piece in _merge_short(pieces, config)]


@dataclass
class _Piece:
    """A chunk under construction: the overlap carried from its predecessor, then its own units."""

    overlap: str
    body: list[str]

    @property
    def text(self) -> str:
        return join_parts(([self.overlap] if self.overlap else []) + self.body)

    @property
    def tokens(self) -> int:
        return count_tokens(self.text)


def join_parts(parts: list[str]) -> str:
    """Units joined as the chunker joins them (see `_joiner`)."""
    text = parts[0]
    for part in parts[1:]:
        text += _joiner(text, part) + part
    return text


def _fitting_overlap(previous_text: str, body: list[str], config: ChunkingConfig) -> str:
    """The tail of the previous chunk to carry before `body`, or "" when the two would not fit together."""
    overlap = _tail(previous_text, config.overlap)
    if overlap and count_tokens(join_parts([overlap, *body])) > config.size:
        return ""
    return overlap


def _merge_short(pieces: list[_Piece], config: ChunkingConfig) -> list[_Piece]:
    """Give pieces under `min_fraction * size` tokens enough text, keeping every piece within `size`: fold
    a short piece into its predecessor when both fit, else borrow units from the predecessor's end while it
    stays above the threshold."""
    threshold = config.min_fraction * config.size
    merged: list[_Piece] = [pieces[0]]
    for piece in pieces[1:]:
        previous = merged[-1]
        # The predecessor may have changed (merged or lent units) since this piece's overlap was cut.
        piece = _Piece(_fitting_overlap(previous.text, piece.body, config), piece.body)
        if piece.tokens < threshold:
            folded = _Piece(previous.overlap, previous.body + piece.body)
            if folded.tokens <= config.size:
                merged[-1] = folded
                continue
            while piece.tokens < threshold and len(previous.body) > 1:
                lender = _Piece(previous.overlap, previous.body[:-1])
                body = [previous.body[-1], *piece.body]
                borrower = _Piece(_fitting_overlap(lender.text, body, config), body)
                if lender.tokens < threshold or borrower.tokens > config.size:
                    break
                previous, piece = lender, borrower
            merged[-1] = previous
        merged.append(piece)
    return merged
