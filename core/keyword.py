"""Text analysis for keyword (BM25) search: English words stemmed, stop words dropped, Chinese as
overlapping bigrams (no segmentation dictionary; a lone CJK character stays a unigram).
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

from core.text import char_pairs

TOKEN_PATTERN = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
CJK_START = "\u3400"

#: A standard English stop-word list (Lucene/Elasticsearch `_english_` plus common function words).
ENGLISH_STOP_WORDS = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then there
    these they this to was will with i me my we our you your he him his she her its them what which who whom
    whose why how when where all any both each few more most other some than too very can could should would
    do does did done has have had having am been being from up down out over under again further once here
    so only own same just also about above after before below between through during against nor s t don
    shall may might must""".split()
)


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _is_cjk(token: str) -> bool:
    return token[0] >= CJK_START


def analyze(text: str) -> list[str]:
    """Index terms of `text`, in order (duplicates kept: term frequency matters)."""
    words: list[str] = []
    terms: list[str] = []
    for token in TOKEN_PATTERN.findall(text.lower()):
        if _is_cjk(token):
            if len(token) == 1:
                terms.append(token)
            else:
                terms.extend(char_pairs(token))
        elif token not in ENGLISH_STOP_WORDS:
            terms.append(token)
            if not token.isdigit():
                words.append(token)
    if words:
        stems = iter(_stemmer().stemWords(words))
        terms = [term if _is_cjk(term) or term.isdigit() else next(stems) for term in terms]
    return terms
