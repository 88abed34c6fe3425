"""Alternative search queries and keyword expansion without a model: names, content words and their
inflections (synonyms need the LLM path).
"""

from __future__ import annotations

from query.decomposition import heuristic_subquestions
from query.text import capitalised_phrases, content_words, dedupe, is_chinese, keyword_query, quoted_titles


def _inflections(word: str) -> list[str]:
    """Singular/plural alternates of an English noun (companies <-> company, film <-> films)."""
    lowered = word.lower()
    if not (lowered.isascii() and lowered.isalpha()) or len(lowered) < 4 or word[0].isupper():
        return []
    if lowered.endswith("ies"):
        return [lowered[:-3] + "y"]
    if lowered.endswith("s") and not lowered.endswith("ss"):
        return [lowered[:-1]]
    if lowered.endswith("y") and lowered[-2] not in "aeiou":
        return [lowered[:-1] + "ies"]
    if lowered.endswith(("ed", "ing", "ly")):
        return []
    return [lowered + "es" if lowered.endswith(("s", "x", "ch", "sh")) else lowered + "s"]


def heuristic_expansion(question: str) -> str:
    """Expanded keywords: names and titles, the other content words, their singular/plural alternates."""
    names = [*quoted_titles(question), *([] if is_chinese(question) else capitalised_phrases(question))]
    words = content_words(question)
    alternates = [alternate for word in words for alternate in _inflections(word)]
    return " ".join(dedupe([*names, *words, *alternates]))


def heuristic_variants(question: str, n: int) -> list[str]:
    """Up to `n` alternative search queries: sub-questions, the keyword-only form, the names, expansion."""
    text = question.strip()
    if n < 1 or not text:
        return []
    names = [*quoted_titles(text), *([] if is_chinese(text) else capitalised_phrases(text))]
    candidates = [
        *heuristic_subquestions(text, n),
        keyword_query(text),
        " ".join(dedupe(names)),
        heuristic_expansion(text),
    ]
    return dedupe(candidates, exclude=[text])[:n]
