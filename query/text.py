"""Small text helpers of the query heuristics (language, words, names, titles, content words), one
definition for every query concern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.keyword import ENGLISH_STOP_WORDS
from query import lexicons

#: Chinese characters that count as one English word when measuring length.
CJK_CHARS_PER_WORD = 2
#: Share of CJK characters from which a text is handled as Chinese.
CJK_SHARE_MIN = 0.3


def is_chinese(text: str) -> bool:
    """True when CJK characters make up at least CJK_SHARE_MIN of the letters."""
    letters = [char for char in text if char.isalnum()]
    if not letters:
        return False
    return sum(1 for char in letters if lexicons.CJK.match(char)) / len(letters) >= CJK_SHARE_MIN


WORD = re.compile(r"[A-Za-z0-9\u00C0-\u024F][\w'’.\-\u00C0-\u024F]*[\w\u00C0-\u024F]|[A-Za-z0-9]")


def words_of(text: str) -> list[str]:
    """Latin words (with inner apostrophes, dots and hyphens) in order."""
    return WORD.findall(text)


def word_count(text: str) -> int:
    """Words of a text, counting CJK_CHARS_PER_WORD Chinese characters as one word."""
    return len(words_of(text)) + len(lexicons.CJK.findall(text)) // CJK_CHARS_PER_WORD


def quoted_titles(text: str) -> list[str]:
    """Titles in quotes ("...", '...', “...”) or Chinese title marks (《...》, 「...」)."""
    found = [first or second for first, second in lexicons.QUOTED.findall(text)]
    found += lexicons.CJK_TITLE.findall(text) if lexicons.CJK.search(text) else []
    return list(dict.fromkeys(title.strip() for title in found if title.strip()))


def capitalised_phrases(text: str) -> list[str]:
    """Runs of capitalised words (names, titles) as spelled, joined across connectors ("of", "de")."""
    phrases: list[str] = []
    for sentence in lexicons.PHRASE_BREAK.split(text):
        tokens = list(WORD.finditer(sentence))
        run: list[re.Match[str]] = []
        for index, match in enumerate(tokens):
            token, lowered = match.group(0), match.group(0).lower()
            following = tokens[index + 1].group(0) if index + 1 < len(tokens) else ""
            next_is_name = (
                bool(following)
                and following[0].isupper()
                and following.lower() not in lexicons.COMMON_CAPITALISED
            )
            name_word = token[0].isupper() and lowered not in lexicons.COMMON_CAPITALISED
            title_word = (
                token[0].isupper() and index > 0 and lowered not in lexicons.WH_WORDS and next_is_name
            )
            joining = bool(run) and (
                lowered in lexicons.NAME_CONNECTORS and next_is_name or token[0].isdigit()
            )
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
        dict.fromkeys(
            phrase for phrase in cleaned if phrase and phrase.lower() not in lexicons.COMMON_CAPITALISED
        )
    )


def content_words(text: str) -> list[str]:
    """Meaningful surface words of a text, in order, unique (Chinese: pieces between question words)."""
    if is_chinese(text):
        stripped = lexicons.CJK_QUESTION_WORDS.sub(" ", lexicons.CJK_TITLE.sub(r" \1 ", text))
        pieces = [piece.strip(lexicons.CJK_FUNCTION_CHARS) for piece in lexicons.CJK_PUNCT.split(stripped)]
        return list(dict.fromkeys(piece for piece in pieces if piece))
    keep = [
        word
        for word in words_of(text)
        if word.lower() not in ENGLISH_STOP_WORDS
        and word.lower() not in lexicons.WH_WORDS
        and word.lower() not in lexicons.AUXILIARIES
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
