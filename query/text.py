"""Small text helpers of the query heuristics: language, words, names, titles, content words.

Why here: every query concern (classification, follow-ups, decomposition, feedback terms) reads a question
through the same few views of its text; one definition keeps them consistent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.keyword import ENGLISH_STOP_WORDS
from query.lexicons import (
    AUXILIARIES,
    CJK,
    CJK_FUNCTION_CHARS,
    CJK_PUNCT,
    CJK_QUESTION_WORDS,
    CJK_TITLE,
    COMMON_CAPITALISED,
    NAME_CONNECTORS,
    PHRASE_BREAK,
    QUOTED,
    WH_WORDS,
)

#: Chinese characters that count as one English word when measuring length.
CJK_CHARS_PER_WORD = 2
#: Share of CJK characters from which a text is handled as Chinese.
CJK_SHARE_MIN = 0.3

# --- small text helpers ------------------------------------------------------------------------------------


def is_chinese(text: str) -> bool:
    """True when CJK characters make up at least CJK_SHARE_MIN of the letters."""
    letters = [char for char in text if char.isalnum()]
    if not letters:
        return False
    return sum(1 for char in letters if CJK.match(char)) / len(letters) >= CJK_SHARE_MIN


WORD = re.compile(r"[A-Za-z0-9\u00C0-\u024F][\w'’.\-\u00C0-\u024F]*[\w\u00C0-\u024F]|[A-Za-z0-9]")


def words_of(text: str) -> list[str]:
    """Latin words (with inner apostrophes, dots and hyphens) in order."""
    return WORD.findall(text)


def word_count(text: str) -> int:
    """Words of a text, counting CJK_CHARS_PER_WORD Chinese characters as one word."""
    return len(words_of(text)) + len(CJK.findall(text)) // CJK_CHARS_PER_WORD


def quoted_titles(text: str) -> list[str]:
    """Titles in quotes ("...", '...', “...”) or Chinese title marks (《...》, 「...」)."""
    found = [first or second for first, second in QUOTED.findall(text)]
    found += CJK_TITLE.findall(text) if CJK.search(text) else []
    return list(dict.fromkeys(title.strip() for title in found if title.strip()))


def capitalised_phrases(text: str) -> list[str]:
    """Runs of capitalised words (names, titles), joined across connectors ("of", "de") and title-internal
    function words ("The Long Night Express"), as spelled in the text ("Harold T. Vane"); a sentence's
    first word counts only when it is not a common word ("The", "Which", "In")."""
    phrases: list[str] = []
    for sentence in PHRASE_BREAK.split(text):
        tokens = list(WORD.finditer(sentence))
        run: list[re.Match[str]] = []
        for index, match in enumerate(tokens):
            token, lowered = match.group(0), match.group(0).lower()
            following = tokens[index + 1].group(0) if index + 1 < len(tokens) else ""
            next_is_name = (
                bool(following) and following[0].isupper() and following.lower() not in COMMON_CAPITALISED
            )
            name_word = token[0].isupper() and lowered not in COMMON_CAPITALISED
            title_word = token[0].isupper() and index > 0 and lowered not in WH_WORDS and next_is_name
            joining = bool(run) and (lowered in NAME_CONNECTORS and next_is_name or token[0].isdigit())
            if name_word or title_word or joining:
                run.append(match)
                continue
            if run:
                phrases.append(sentence[run[0].start() : run[-1].end()])
            run = []
        if run:
            phrases.append(sentence[run[0].start() : run[-1].end()])
    cleaned = [phrase.strip(" '’") for phrase in phrases]
    return list(
        dict.fromkeys(phrase for phrase in cleaned if phrase and phrase.lower() not in COMMON_CAPITALISED)
    )


def content_words(text: str) -> list[str]:
    """Meaningful surface words of a text, in order, unique: English without stop and question words;
    Chinese as the pieces left between question words, punctuation and titles (no dictionary needed)."""
    if is_chinese(text):
        stripped = CJK_QUESTION_WORDS.sub(" ", CJK_TITLE.sub(r" \1 ", text))
        pieces = [piece.strip(CJK_FUNCTION_CHARS) for piece in CJK_PUNCT.split(stripped)]
        return list(dict.fromkeys(piece for piece in pieces if piece))
    keep = [
        word
        for word in words_of(text)
        if word.lower() not in ENGLISH_STOP_WORDS
        and word.lower() not in WH_WORDS
        and word.lower() not in AUXILIARIES
    ]
    return list(dict.fromkeys(keep))


def keyword_query(text: str) -> str:
    """The question as a keyword-only query (what BM25 ranks on, without the question's grammar)."""
    return " ".join(content_words(text))


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def dedupe(texts: Iterable[str], *, exclude: Iterable[str] = ()) -> list[str]:
    """Non-empty texts without case-insensitive duplicates (nor any text in `exclude`), order kept."""
    seen = {norm(text) for text in exclude}
    unique: list[str] = []
    for text in texts:
        cleaned = re.sub(r"\s+", " ", text or "").strip()
        if cleaned and norm(cleaned) not in seen:
            seen.add(norm(cleaned))
            unique.append(cleaned)
    return unique


def first_word(text: str) -> str:
    words = words_of(text)
    return words[0].lower() if words else ""
