"""Search terms taken from retrieved documents for the next hop: what no document covers
(`missing_terms`) and the names a bridge question leads to (`bridge_terms`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from core.keyword import analyze
from core.text import split_sentences
from query.lexicons import CJK, COMMON_CAPITALISED
from query.text import capitalised_phrases, content_words, dedupe, is_chinese, norm, quoted_titles

#: Relevance a document needs to count for `missing_terms` / `bridge_terms` (ungraded ones, -1, always count).
RELEVANT_MIN = 0.35
#: Documents of which bridge terms are taken, and how much a document title outweighs a phrase in the text.
BRIDGE_TOP_DOCS = 3
TITLE_BONUS = 2.0
#: How much a name gains from the share of the question's terms in its sentence.
SENTENCE_OVERLAP_WEIGHT = 2.0
#: Bridge names kept must score at least this share of the best one (names as prominent as the top one).
BRIDGE_MIN_SHARE = 0.5
#: Weight of a one-word name ("American", "Ghana") against a multi-word one ("Nora Vance").
SINGLE_WORD_WEIGHT = 0.5


def _relevant(documents: Sequence[Mapping[str, Any]], min_relevance: float) -> list[Mapping[str, Any]]:
    graded = [doc for doc in documents if float(doc.get("relevance", -1)) >= min_relevance]
    ungraded = [doc for doc in documents if float(doc.get("relevance", -1)) < 0]
    return sorted(graded, key=lambda doc: float(doc.get("relevance", 0)), reverse=True) + ungraded


def missing_terms(
    question: str, documents: Sequence[Mapping[str, Any]], min_relevance: float = RELEVANT_MIN
) -> list[str]:
    """The question's content words found in no relevant document (by index terms): what to search next."""
    relevant = _relevant(documents, min_relevance)
    covered: set[str] = set()
    for doc in relevant:
        covered |= set(analyze(f"{doc.get('title', '')}\n{doc.get('text', '')}"))
    missing: list[str] = []
    for word in content_words(question):
        terms = analyze(word)
        if terms and not set(terms) <= covered:
            missing.append(word)
    return missing


def surface_terms(question: str, terms: Sequence[str]) -> list[str]:
    """Index terms (stems, as grade_retrieval reports them) mapped back to the question's own words."""
    wanted = set(terms)
    words = [word for word in content_words(question) if set(analyze(word)) & wanted]
    known = {stem for word in words for stem in analyze(word)}
    return dedupe([*words, *(term for term in terms if term not in known)])


def bridge_terms(
    question: str, documents: Sequence[Mapping[str, Any]], limit: int, min_relevance: float = RELEVANT_MIN
) -> list[str]:
    """Names and titles of the best relevant documents that the question does not mention (next hop)."""
    if limit < 1:
        return []
    question_terms = set(analyze(question))
    scores: dict[str, float] = {}
    spelled: dict[str, str] = {}
    for rank, doc in enumerate(_relevant(documents, min_relevance)[:BRIDGE_TOP_DOCS]):
        weight = 1.0 / (rank + 1)
        title = re.sub(r"\s*\([^)]*\)\s*$", "", str(doc.get("title", ""))).strip()
        candidates = [(title, TITLE_BONUS)] if title else []
        for sentence in split_sentences(str(doc.get("text", ""))):
            # A name in a sentence that shares the question's words is likelier the entity asked about.
            overlap = len(set(analyze(sentence)) & question_terms) / max(1, len(question_terms))
            found = [
                *quoted_titles(sentence),
                *([] if is_chinese(sentence) else capitalised_phrases(sentence)),
            ]
            candidates += [(phrase, 1.0 + SENTENCE_OVERLAP_WEIGHT * overlap) for phrase in found]
        for phrase, bonus in candidates:
            bonus *= 1.0 if len(phrase.split()) > 1 or CJK.search(phrase) else SINGLE_WORD_WEIGHT
            terms = set(analyze(phrase))
            if not terms or terms <= question_terms or phrase.lower() in COMMON_CAPITALISED:
                continue
            key = norm(phrase)
            spelled.setdefault(key, phrase)
            scores[key] = scores.get(key, 0.0) + weight * bonus
    ranked = sorted(scores, key=lambda key: (-scores[key], len(key)))
    chosen: list[str] = []
    for key in ranked:
        terms = set(analyze(key))
        if scores[key] < BRIDGE_MIN_SHARE * scores[ranked[0]]:
            break
        if any(terms <= set(analyze(other)) or terms >= set(analyze(other)) for other in chosen):
            continue  # "Nora Vance Hale" after "Nora Vance": the same entity
        chosen.append(spelled[key])
        if len(chosen) == limit:
            break
    return chosen
