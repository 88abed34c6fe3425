"""Near-duplicate passages of different files go into the answer prompt once: copies (a README vendored twice)
rank alike and would spend the budget twice on "independent" sources that are one. Only across files: alike
chunks of one file are its summary and detail levels, retrieved on purpose.

The measure is the Jaccard similarity of casefolded word sets (each CJK character a word): cheap,
order-insensitive, deterministic. At or above RAG_SOURCE_DUPLICATE_SIMILARITY the better scored passage
stays at the earlier place, so the caller's order is kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.text import CJK_RANGES
from state.schemas import RetrievedDoc

#: Words of a passage: one CJK character, or a run of other letters and digits.
_WORD = re.compile(rf"[{CJK_RANGES}]|[^\W_{CJK_RANGES}]+")


def word_set(text: str) -> frozenset[str]:
    """The distinct casefolded words of `text` (each CJK character a word)."""
    return frozenset(_WORD.findall(text.casefold()))


def jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    """|left & right| / |left | right|; 0 when both are empty (nothing to compare is no evidence)."""
    union = len(left | right)
    return len(left & right) / union if union else 0.0


def _rank(doc: RetrievedDoc) -> tuple[float, float]:
    return float(doc.get("relevance", -1.0)), float(doc.get("score") or 0.0)


def drop_near_duplicates(documents: Sequence[RetrievedDoc], threshold: float) -> list[RetrievedDoc]:
    """`documents` with each group of near-duplicates of different files (word-set Jaccard >= `threshold`)
    reduced to its best-ranked member, at the group's first position; `threshold` <= 0 turns this off."""
    if threshold <= 0 or len(documents) < 2:
        return list(documents)
    kept: list[RetrievedDoc] = []
    words: list[frozenset[str]] = []
    for doc in documents:
        terms = word_set(doc["text"])
        twin = next(
            (
                index
                for index, other in enumerate(kept)
                if other.get("source") != doc.get("source") and jaccard(words[index], terms) >= threshold
            ),
            None,
        )
        if twin is None:
            kept.append(doc)
            words.append(terms)
        elif _rank(doc) > _rank(kept[twin]):
            kept[twin], words[twin] = doc, terms
    return kept
