"""Does anything retrieved answer the question at all? Model-free term checks of the question against the
passages.

Why: retrieval always returns the nearest passages, relevant or not, and a model (or the extractive fallback)
always writes something from them. Two checks tell how far the passages are about what the question asks;
they are signals of the answer's judgement (answering.signals), weighed by its calibrator, and
`missing_question_anchors` also tells grade_retrieval that nothing relevant was found:
1. anchors: a name, number, quoted or CJK term of the question occurs in no retrieved passage (hybrid search
   with BM25 would have found a passage naming it, so the documents do not mention it); a CJK term only from
   3 characters and only when not one of its character pairs is there (Chinese terms cut at function
   characters straddle words; chosen on development CMRC questions,
   results/runs/answerability_dev_cmrc2018_*.json);
2. coverage: the share of the question's content terms the answer's evidence contains; below
   MIN_QUESTION_COVERAGE the answer rests on passages about something else.
MIN_QUESTION_COVERAGE was chosen on the invented development set benchmarks/fixtures/answerability.json only
(28 questions, `python -m benchmarks answerability --dataset benchmarks/fixtures/answerability.json`,
extractive pipeline): the value with the best balanced accuracy, ties to the lower one. 0.5 said "not found"
for 9/14 unanswerable and 0/14 answerable questions; 0.6 for 13/14 and 1/14; 0.7 for 14/14 and 4/14. The
held-out figures (HotpotQA, not used for tuning) are in results/answerability_*.json. Rechecked with the Qwen
default on development HotpotQA questions 301-320 (results/runs/qa_dev_hotpotqa_agentic_patience0.jsonl): 0.5
would have kept 2 correct declined answers and shown 4 wrong ones, so 0.6 stays (a wrong answer with citations
costs a user more than "not found").
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

#: Share of the question's content terms that an answer's evidence holds when it is about the question.
MIN_QUESTION_COVERAGE = 0.6
#: A question's name of this many words or more counts as mentioned when two adjacent words of it are.
NAME_PART_FROM_WORDS = 3
#: A number the question compares against ("more than 300 papers", "over 200,000") is a bound, not a fact
#: the documents must state: it is no anchor.
_COMPARED_NUMBER = re.compile(
    r"\b(?:(?:more|less|fewer|greater|higher|lower|older|younger|larger|smaller)\s+than|over|under|above|"
    rf"below|at\s+(?:least|most)|exceeding|beyond)\s+(?:\d[\d,.]*\d|\d|(?:{'|'.join(NUMBER_WORDS)}|"
    r"hundred|thousand|million|billion)\b)",
    re.IGNORECASE,
)
#: Chinese question characters (啥: colloquial "what"): bigrams with one of them are not terms a passage
#: repeats.
CJK_QUESTION_CHARS = frozenset("哪什么吗呢谁几怎何啥")
#: A Chinese question term is a name to look for only from this many characters: shorter runs are mostly
#: words of the question ("时候", "特点", "地址") that a passage answering it need not repeat.
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
    """The anchors of a question (retrieval.grounding), without a lone capitalised word that opens one of
    its sentences: in a question that is more often a request ("Please", "Summarise") than a name, and a
    name there is still one of the question's terms, which the coverage check counts."""
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
    """Whether the documents mention a name of the question: the name itself, or for a name of three words
    or more any two adjacent words of it. A question's capitalised run often glues a name to a capitalised
    word beside it ("James Norman Hall Argentinian", "Las Vegas Nevada", "Lithuania Michał Korybut
    Wiśniowiecki"), and a passage about the name need not repeat that word."""
    if evidence.mentions(entity):
        return True
    words = entity.split()
    return len(words) >= NAME_PART_FROM_WORDS and any(
        evidence.mentions(f"{first} {second}") for first, second in zip(words, words[1:], strict=False)
    )


def missing_question_anchors(question: str, documents: Sequence[RetrievedDoc]) -> list[str]:
    """Names, numbers, quoted and CJK terms of the question that no passage (title or text) contains.

    A CJK term counts as missing only when none of its character pairs occurs in a passage: Chinese has no
    word boundaries, so a term cut at function characters often straddles words ("赫姓分" of "赫姓分为",
    "里出生" of "在哪里出生") and an answering passage holds its words but not the run; a name the
    documents never mention leaves no pair behind."""
    anchors = question_anchors(question)
    if not anchors.all():
        return []
    evidence = Evidence.of([titled_text(doc) for doc in documents])
    missing = [entity for entity in anchors.entities if not name_in(entity, evidence)]
    missing += evidence.missing(replace(anchors, entities=(), cjk=()))
    missing += [term for term in anchors.cjk if not any(pair in evidence.text for pair in char_pairs(term))]
    return missing


def question_coverage(question: str, texts: Sequence[str]) -> float:
    """Share of the question's content terms found in `texts` (1.0 for a question without terms).

    A Chinese question counts characters, not bigrams: its bigrams straddle word boundaries ("这次选举中"
    gives "次选", "举中"), and an answer that restates the question in other words shares the characters
    but not those bigrams, so bigram coverage declined correct Chinese answers (development questions of
    CMRC 2018). Function and question characters (retrieval.grounding.CJK_FUNCTION_CHARS) do not count; Latin
    terms of a mixed question count as words."""
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
