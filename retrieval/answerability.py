"""Does anything retrieved answer the question at all? Model-free term checks of the question against the
passages, signals of the answer's judgement (answering.signals): retrieval always returns the nearest
passages, relevant or not, and a model always writes something from them.
1. anchors: a name, number, quoted or CJK term of the question that no retrieved passage holds (hybrid search
   would have found a passage naming it);
2. coverage: the share of the question's content terms the evidence holds; below MIN_QUESTION_COVERAGE the
   answer rests on passages about something else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from core.text import CJK_CHAR, char_pairs, contains_cjk, split_sentences
from retrieval.answer_text import content_terms
from retrieval.grounding import (
    CJK_FUNCTION_CHARS,
    META_TERMS,
    NUMBER_WORDS,
    Anchors,
    Evidence,
    anchors_of,
    titled_text,
)
from state.schemas import RetrievedDoc

#: Share of the question's content terms that an answer's evidence holds when it is about the question:
#: the best balanced accuracy on benchmarks/fixtures/answerability.json (a wrong cited answer costs a user
#: more than "not found").
MIN_QUESTION_COVERAGE = 0.6
#: A question's name of this many words or more counts as mentioned when two adjacent words of it are.
NAME_PART_FROM_WORDS = 3
#: A number the question compares against ("more than 300 papers") is a bound, not an anchor.
_COMPARED_NUMBER = re.compile(
    r"\b(?:(?:more|less|fewer|greater|higher|lower|older|younger|larger|smaller)\s+than|over|under|above|"
    rf"below|at\s+(?:least|most)|exceeding|beyond)\s+(?:\d[\d,.]*\d|\d|(?:{'|'.join(NUMBER_WORDS)}|"
    r"hundred|thousand|million|billion)\b)",
    re.IGNORECASE,
)
#: Chinese question characters: bigrams with one of them are not terms a passage repeats.
CJK_QUESTION_CHARS = frozenset("哪什么吗呢谁几怎何啥")
#: A Chinese question term is an anchor only from this many characters (shorter runs are question words).
CJK_ANCHOR_MIN_CHARS = 3
#: Chinese "how much / long / big ..." words: question words, not terms a passage repeats.
CJK_QUESTION_WORDS = ("多少", "多长", "多大", "多高", "多久", "多远", "多重", "多宽", "多深", "多老")


def is_question_word(term: str) -> bool:
    """Whether a CJK term of a question holds a question word (then it is no anchor or term to look for)."""
    return bool(CJK_QUESTION_CHARS & set(term)) or any(word in term for word in CJK_QUESTION_WORDS)


def question_terms(question: str) -> set[str]:
    """The question's content terms, without meta words and Chinese question-word bigrams."""
    return {term for term in content_terms(question) - META_TERMS if not is_question_word(term)}


def question_anchors(question: str) -> Anchors:
    """The anchors of a question (retrieval.grounding), without a lone capitalised word opening a sentence
    (more often a request, "Please", than a name; the coverage check still counts it)."""
    entities: list[str] = []
    numbers: list[str] = []
    quoted: list[str] = []
    cjk: list[str] = []
    for sentence in split_sentences(question) or [question]:
        found = anchors_of(_COMPARED_NUMBER.sub(" ", sentence))
        opening = sentence.lstrip(" \t\"'“‘(")
        entities += [e for e in found.entities if " " in e or not opening.startswith(e)]
        numbers += found.numbers
        quoted += found.quoted
        cjk += [
            term for term in found.cjk if len(term) >= CJK_ANCHOR_MIN_CHARS and not is_question_word(term)
        ]
    unique = dict.fromkeys
    return Anchors(tuple(unique(entities)), tuple(unique(numbers)), tuple(unique(quoted)), tuple(unique(cjk)))


def name_in(entity: str, evidence: Evidence) -> bool:
    """Whether the documents mention a name of the question, or two adjacent words of a longer one (a
    question's capitalised run often glues a name to a word beside it: "Las Vegas Nevada")."""
    if evidence.mentions(entity):
        return True
    words = entity.split()
    return len(words) >= NAME_PART_FROM_WORDS and any(
        evidence.mentions(f"{first} {second}") for first, second in zip(words, words[1:], strict=False)
    )


def missing_question_anchors(question: str, documents: Sequence[RetrievedDoc]) -> list[str]:
    """Names, numbers, quoted and CJK terms of the question that no passage (title or text) contains; a CJK
    term only when none of its character pairs occurs (a term cut at function characters straddles words)."""
    anchors = question_anchors(question)
    if not anchors.all():
        return []
    evidence = Evidence.of([titled_text(doc) for doc in documents])
    missing = [entity for entity in anchors.entities if not name_in(entity, evidence)]
    missing += evidence.missing(replace(anchors, entities=(), cjk=()))
    missing += [term for term in anchors.cjk if not any(pair in evidence.text for pair in char_pairs(term))]
    return missing


def question_coverage(question: str, texts: Sequence[str]) -> float:
    """Share of the question's content terms found in `texts` (1.0 for a question without terms). Chinese
    counts content characters, not bigrams, which straddle word boundaries."""
    wanted = question_terms(question)
    if contains_cjk(question):
        wanted = {term for term in wanted if not contains_cjk(term)} | cjk_content_chars(question)
    if not wanted:
        return 1.0
    found: set[str] = set()
    for text in texts:
        found |= content_terms(text) | cjk_content_chars(text)
    return len(wanted & found) / len(wanted)


def cjk_content_chars(text: str) -> set[str]:
    """The CJK characters of `text` that carry content (not function or question characters)."""
    return {char for char in CJK_CHAR.findall(text) if char not in CJK_FUNCTION_CHARS}
