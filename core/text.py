"""Text helpers every layer shares: the one CJK detector and the one sentence splitter, so a sentence
that citations flag is the sentence the grader counts.
"""

from __future__ import annotations

import re

#: Characters treated as CJK: unified ideographs (basic, extensions A-F, compatibility) and Japanese kana.
#: Hangul is left out on purpose: Korean writes spaces between words, so word tokens suit it better.
CJK_RANGES = (
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\U00020000-\U0002ebef"  # CJK Unified Ideographs Extensions B-F
)
CJK_CHAR = re.compile(f"[{CJK_RANGES}]")

#: A bracketed reference group such as "[1]", "[1, 2]" or "【3】", with the blanks before it.
_REFERENCE_PATTERN = r"[ \t]*[\[【][^\[\]【】\n]{1,24}[\]】]"
REFERENCE_MARK = re.compile(_REFERENCE_PATTERN)
#: Sentence-ending punctuation, closing quotes/parentheses, then bracketed references ("[1]", "【2】").
_SENTENCE_END = re.compile(r"(?P<punct>[.!?]+|[。！？]+)[\"'”’」』)）]*(?:" + _REFERENCE_PATTERN + ")*")
#: Latin terminal punctuation only ends a sentence before whitespace or the end of the line (not "3.5").
_LATIN_TERMINALS = frozenset(".!?")
#: Words after which a period does not end a sentence.
ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "mr", "mrs", "ms", "dr", "prof", "vs", "fig", "no", "st", "cf", "approx"}
)
_WORD_BEFORE = re.compile(r"([A-Za-z](?:\.?[A-Za-z])*)$")
_LINE = re.compile(r"[^\n]+")


def strip_references(text: str) -> str:
    """`text` without bracketed reference groups such as "[1]", "[1, 2]" or "【3】"."""
    return REFERENCE_MARK.sub("", text)


def char_pairs(term: str) -> list[str]:
    """The overlapping character pairs of a CJK term ("塔罗高" -> "塔罗", "罗高")."""
    return [term[index : index + 2] for index in range(len(term) - 1)]


def contains_cjk(text: str) -> bool:
    """Whether `text` has at least one CJK ideograph or kana, i.e. needs character-level tokens."""
    return CJK_CHAR.search(text) is not None


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`, trimmed (ends: terminal punctuation or a line break)."""
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        start = line.start()
        for match in _SENTENCE_END.finditer(text, line.start(), line.end()):
            if not _ends_sentence(text, match, line.end()):
                continue
            spans.append((start, match.end()))
            start = match.end()
        spans.append((start, line.end()))
    return [trimmed for span in spans if (trimmed := _trim(text, span)) is not None]


def _ends_sentence(text: str, match: re.Match[str], line_end: int) -> bool:
    punct = match.group("punct")
    if punct[0] not in _LATIN_TERMINALS:
        return True
    if match.end() < line_end and not text[match.end()].isspace():
        return False
    if punct == ".":
        word = _WORD_BEFORE.search(text, 0, match.start())
        if word and (word.group(1).lower() in ABBREVIATIONS or len(word.group(1)) == 1):
            return False
    return True


def _trim(text: str, span: tuple[int, int]) -> tuple[int, int] | None:
    start, end = span
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end > start else None


def split_sentences(text: str) -> list[str]:
    """The sentences of `text` (English and Chinese), see `sentence_spans`."""
    return [text[start:end] for start, end in sentence_spans(text)]


def invalid_utf8(text: str) -> str | None:
    """Where `text` stops being valid UTF-8 ("byte 0xff at character 4"), or None: lone surrogates
    from argv, stdin or a JSON escape, which SQLite, tokenizers and stdout refuse later with a stack trace."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = text[error.start]
        shown = f"byte 0x{ord(bad) - 0xDC00:02x}" if 0xDC80 <= ord(bad) <= 0xDCFF else f"U+{ord(bad):04X}"
        return f"{shown} at character {error.start + 1}"
    return None
