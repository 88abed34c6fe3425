"""The extractive answerer: a short answer picked from the best passages, typed by the question. A small model
often writes a fluent sentence that is not in the passages, while the answer is nearly always a span of one.
So the question's expected type (yes/no, choice, person, place, date, number, entity) picks the spans of the
sentences sharing the most terms with it, and they vote by sentence terms and passage rank. No model call:
it runs alone (`RAG_ANSWERER=extractive`) or when the model's short answer is not grounded (`auto`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from core.keyword import analyze
from core.text import CJK_CHAR, split_sentences
from retrieval.answer_text import content_terms, factual_sentences

AnswerType = Literal["yes_no", "choice", "person", "place", "date", "number", "entity"]

#: Sentences per passage that may give candidates (the ones sharing the most terms with the question).
SENTENCES_PER_PASSAGE = 3
#: Passages looked at, best first.
MAX_PASSAGES = 5
#: Weight of a passage's rank: the first passage adds 1, the second 1/2...
PASSAGE_RANK_WEIGHT = 1.0
#: A candidate whose terms are all in the question gets this share of its score (it repeats the question).
QUESTION_ECHO_FACTOR = 0.1
#: Weight of a shared relation word (lowercase question word) against a shared name (see _ranked_sentences).
RELATION_WEIGHT = 2.0
#: Longest short answer, in words (a longer entity run is cut to its first words).
MAX_SPAN_WORDS = 6

_YES_NO_START = re.compile(
    r"^\s*(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|shall|may|might)\b",
    re.IGNORECASE,
)
#: A Chinese yes/no question ends in 吗 (or a bare 么, not "什么"/"怎么"), or asks 是否 / 是不是 / 有没有.
_YES_NO_ZH = re.compile(r"(?:吗|(?<![什怎多那这要])么)[？?]?\s*$|是否|是不是|有没有")
_CHOICE = re.compile(r"(?:^|[,:;]|\b(?:between|first|either))\s*([^,:;?]+?)\s+or\s+([^,:;?]+?)\s*[?？]?\s*$")
_CHOICE_ZH = re.compile(r"([^，,。？?、]+?)(?:还是|或者|或)([^，,。？?、]+?)[？?]?\s*$")
_DATE_QUESTION = re.compile(
    r"\bwhen\b|\bwhat (?:year|date|day|month|decade|century)\b"
    r"|\b(?:which|in what) (?:year|date|month|decade)\b"
    r"|什么时候|何时|哪一?年|哪天|几月|哪个月|日期|年份",
    re.IGNORECASE,
)
_NUMBER_QUESTION = re.compile(
    r"\bhow (?:many|much|long|old|far|tall|high|big|large|deep|wide|often)\b"
    r"|\bwhat (?:is the )?(?:number|percentage|population|amount|size|capacity)\b"
    r"|多少|几个|几次|几|多大|多长|多高|多远",
    re.IGNORECASE,
)
_PERSON_QUESTION = re.compile(r"^\W*(?:\w+\W+){0,3}?who(?:m|se)?\b|谁|哪位|什么人", re.IGNORECASE)
#: The question's first wh-word; a "who" after another wh-word is a relative pronoun, not the asked type.
_WH_WORD = re.compile(r"\b(who|whom|whose|when|where|what|which|how)\b", re.IGNORECASE)
#: A single capitalised word with a nationality ending ("British"): a modifier, rarely the answer itself.
_DEMONYM = re.compile(r"^[A-Z][a-z]+(?:an|ish|ese|ian|ic)$")
#: Score share kept by a demonym candidate.
DEMONYM_FACTOR = 0.3
_PLACE_QUESTION = re.compile(
    r"\bwhere\b|\b(?:what|which|in what|in which) (?:city|country|state|county|town|village|region|"
    r"province|continent|place|island|river|location)\b|哪里|哪儿|什么地方|哪个(?:国家|城市|省|地区)|位于",
    re.IGNORECASE,
)
_COMPARE_EARLIER = re.compile(r"\b(?:first|earlier|earliest|older|oldest|before)\b", re.IGNORECASE)
_COMPARE_LATER = re.compile(
    r"\b(?:later|latest|last|younger|youngest|more recent(?:ly)?|newer)\b", re.IGNORECASE
)
_COMPARE_MORE = re.compile(
    r"\b(?:more|most|larger|largest|bigger|higher|taller|longer|greater)\b", re.IGNORECASE
)
_COMPARE_LESS = re.compile(r"\b(?:fewer|less|least|smaller|smallest|lower|shorter)\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|never|no|neither|nor|n't)\b|不是|没有|并非|不", re.IGNORECASE)

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan\\.?|Feb\\.?|Mar\\.?|Apr\\.?|Jun\\.?|Jul\\.?|Aug\\.?|Sep\\.?|Sept\\.?|Oct\\.?|Nov\\.?|Dec\\.?"
)
_DATE = re.compile(
    rf"\b(?:(?:\d{{1,2}} )?(?:{_MONTHS}) (?:\d{{1,2}}, )?\d{{4}}|\d{{4}}s?)\b"
    r"|\d{2,4}年(?:\d{1,2}月)?(?:\d{1,2}日)?|\d{1,2}月\d{1,2}日"
)
_YEAR = re.compile(r"\b(1\d{3}|20\d{2})\b|(\d{2,4})年")
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    "seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred"
)
#: Units kept with a number ("612 metres", "3 km"), so the short answer says what was counted.
_UNITS = (
    "metres|meters|m|km|kilometres|kilometers|miles|feet|ft|inches|years|months|weeks|days|hours|minutes|"
    "seconds|people|inhabitants|residents|members|episodes|seasons|games|goals|points|copies|acres|hectares|"
    "square (?:kilometres|kilometers|miles|metres|meters)|tons|tonnes|kg|kilograms|pounds|dollars|euros|times"
)
_NUMBER = re.compile(
    rf"(?:\$|£|€)?\b(?:\d[\d,]*(?:\.\d+)?|{_NUMBER_WORDS})(?:\s?(?:%|percent|million|billion|thousand|hundred))?"
    rf"(?:\s(?:{_UNITS}))?\b"
    r"|[\d.]+[万亿千百]?(?:多)?[个人名次年米公里平方千克元岁座]",
    re.IGNORECASE,
)
#: A run of capitalised words on one line, with lowercase joiners inside ("University of Oxford").
_ENTITY = re.compile(
    r"\b(?:[A-Z][\w'’.\-]*|\d[\w\-]*)"
    r"(?:[ \t]+(?:(?:of|the|de|da|del|von|van|la|le|du|y|for)[ \t]+)*(?:[A-Z][\w'’.\-]*|\d+))*"
)
#: Words that start a sentence with a capital but are not names.
_NOT_NAMES = frozenset(
    "the a an he she it they his her its their this that these those in on at by for from with as of and "
    "but or to after before during while when where which who what however also there here later it's".split()
)
#: Chinese clause separators (a Chinese candidate is a clause when no number or date fits).
_CLAUSE_ZH = re.compile(r"[，,；;：:、（）()《》「」“”]")


@dataclass(frozen=True)
class SpanAnswer:
    """A short answer, the sentence it was read from and the passage (0-based, in the given order)."""

    text: str
    sentence: str
    passage: int
    score: float


def choice_options(question: str) -> tuple[str, str] | None:
    """The two options of "..., A or B?" (or "A还是B"), without leading articles; None when there are none."""
    match = _CHOICE.search(question) or _CHOICE_ZH.search(question)
    if match is None:
        return None
    first, second = (
        re.sub(r"^(?:the|a|an)\s+", "", part.strip(" \"'“”"), flags=re.IGNORECASE) for part in match.groups()
    )
    return (first, second) if first and second else None


def answer_type(question: str) -> AnswerType:
    """The kind of answer the question asks for (checked most specific first)."""
    if choice_options(question) is not None:
        return "choice"
    if _YES_NO_START.match(question) or _YES_NO_ZH.search(question):
        return "yes_no"
    if _DATE_QUESTION.search(question):
        return "date"
    if _NUMBER_QUESTION.search(question):
        return "number"
    first_wh = _WH_WORD.search(question)
    if (first_wh is not None and first_wh.group(1).lower().startswith("who")) or (
        first_wh is None and _PERSON_QUESTION.search(question)
    ):
        return "person"
    if _PLACE_QUESTION.search(question):
        return "place"
    return "entity"


def _candidates(sentence: str, kind: AnswerType) -> list[str]:
    """The spans of `sentence` that could answer a question of type `kind`."""
    if kind == "date":
        return [match.group(0) for match in _DATE.finditer(sentence)]
    if kind == "number":
        return [match.group(0).strip() for match in _NUMBER.finditer(sentence)]
    if CJK_CHAR.search(sentence):
        return [clause.strip() for clause in _CLAUSE_ZH.split(sentence.rstrip("。！？")) if clause.strip()]
    spans: list[str] = []
    for match in _ENTITY.finditer(sentence):
        # A heading glued to its first sentence repeats the name ("Paris Paris is..."): said once.
        words = match.group(0).split()
        while words and words[0].lower() in _NOT_NAMES:
            words.pop(0)
        while words and words[-1].lower() in _NOT_NAMES:
            words.pop()
        words = [word for index, word in enumerate(words) if index == 0 or word != words[index - 1]]
        if words and not (kind in ("person", "place") and words[0][0].isdigit()):
            spans.append(" ".join(words[:MAX_SPAN_WORDS]).rstrip(".,"))
    return spans


def _ranked_sentences(
    question_terms: set[str], text: str, relation_terms: set[str]
) -> list[tuple[str, float]]:
    """(sentence, weighted shared question terms) of the passage's best sentences, best first. A shared
    relation word of the question ("mayor", "founded") weighs RELATION_WEIGHT, a shared name 1: the answer
    sits beside what is asked about, not merely beside the name the question starts from."""
    scored: list[tuple[str, float]] = []
    for sentence in factual_sentences(text):
        shared = content_terms(sentence) & question_terms
        scored.append((sentence, len(shared) + (RELATION_WEIGHT - 1) * len(shared & relation_terms)))
    ranked = sorted(scored, key=lambda item: -item[1])
    return ranked[:SENTENCES_PER_PASSAGE]


def relation_terms(question: str) -> set[str]:
    """Terms of the question's lowercase words (what is asked about), not of its capitalised names."""
    lowercase = " ".join(word for word in question.split() if word[:1].islower())
    return set(analyze(lowercase))


def _candidate_weight(candidate: str, question_terms: set[str], question: str) -> float:
    terms = set(analyze(candidate))
    if not terms:
        return 0.0
    if CJK_CHAR.search(candidate):
        fresh = [char for char in candidate if CJK_CHAR.match(char) and char not in question]
        return min(1.0, len(fresh) / max(1, len(CJK_CHAR.findall(candidate))))
    if terms <= question_terms:
        return QUESTION_ECHO_FACTOR
    return DEMONYM_FACTOR if _DEMONYM.match(candidate) else 1.0


def _trim_clause(candidate: str, question: str) -> str:
    """A Chinese clause without the characters it shares with the question at its start and end."""
    start, end = 0, len(candidate)
    while start < end and candidate[start] in question:
        start += 1
    while end > start and candidate[end - 1] in question:
        end -= 1
    return candidate[start:end] or candidate


def _yes_no(question: str, passages: Sequence[str]) -> SpanAnswer:
    """Yes, unless the best sentence negates the question's claim."""
    question_terms = content_terms(question)
    best: tuple[float, str, int] = (-1.0, "", 0)
    for index, text in enumerate(passages[:MAX_PASSAGES]):
        for sentence, shared in _ranked_sentences(question_terms, text, set())[:1]:
            if shared > best[0]:
                best = (shared, sentence, index)
    _, sentence, index = best
    negated = bool(_NEGATION.search(sentence)) and not _NEGATION.search(question)
    if CJK_CHAR.search(question):
        return SpanAnswer("不是" if negated else "是", sentence, index, 1.0)
    return SpanAnswer("no" if negated else "yes", sentence, index, 1.0)


def _mentions(option: str, sentence: str) -> bool:
    terms = set(analyze(option))
    return bool(terms) and terms <= set(analyze(sentence))


def _choice(question: str, options: tuple[str, str], passages: Sequence[str]) -> SpanAnswer:
    """The option the passages favour: by year or number when the question compares, else by support."""
    evidence: list[tuple[str, int] | None] = []
    for option in options:
        found = None
        for index, text in enumerate(passages[:MAX_PASSAGES]):
            for sentence in split_sentences(text):
                if _mentions(option, sentence) or _mentions(option, text[:200]):
                    found = (sentence, index)
                    break
            if found:
                break
        evidence.append(found)
    pick = next((i for i, item in enumerate(evidence) if item is not None), 0)
    if all(evidence):
        picked = _compare(question, [item[0] for item in evidence if item is not None])
        if picked is not None:
            pick = picked
    sentence, index = evidence[pick] or ("", 0)
    return SpanAnswer(options[pick], sentence, index, 1.0)


def _compare(question: str, sentences: list[str]) -> int | None:
    """0 or 1 when the question compares time or quantity and both sentences carry a year / number."""
    if _COMPARE_EARLIER.search(question) or _COMPARE_LATER.search(question):
        first_year, second_year = (_first_number(_YEAR, sentence) for sentence in sentences[:2])
        if first_year is not None and second_year is not None and first_year != second_year:
            earlier = 0 if first_year < second_year else 1
            return earlier if _COMPARE_EARLIER.search(question) else 1 - earlier
    if _COMPARE_MORE.search(question) or _COMPARE_LESS.search(question):
        first_value, second_value = (_first_number(_NUMBER, sentence) for sentence in sentences[:2])
        if first_value is not None and second_value is not None and first_value != second_value:
            larger = 0 if first_value > second_value else 1
            return larger if _COMPARE_MORE.search(question) else 1 - larger
    return None


def _first_number(pattern: re.Pattern[str], sentence: str) -> float | None:
    for match in pattern.finditer(sentence):
        digits = re.sub(r"[^\d.]", "", match.group(0))
        try:
            return float(digits)
        except ValueError:
            continue
    return None


def extract_answer(question: str, passages: Sequence[str]) -> SpanAnswer | None:
    """The best short answer to `question` from `passages` (best first), or None when no span fits."""
    if not passages:
        return None
    options = choice_options(question)  # answer_type's first check: "choice" exactly when there are options
    if options is not None:
        return _choice(question, options, passages)
    kind = answer_type(question)
    if kind == "yes_no":
        return _yes_no(question, passages)
    question_terms = content_terms(question)
    relations = relation_terms(question)
    votes: dict[str, float] = {}
    where: dict[str, SpanAnswer] = {}
    for index, text in enumerate(passages[:MAX_PASSAGES]):
        rank_weight = PASSAGE_RANK_WEIGHT / (index + 1)
        for sentence, shared in _ranked_sentences(question_terms, text, relations):
            if shared == 0 and index > 0:
                continue
            for candidate in _candidates(sentence, kind):
                if CJK_CHAR.search(candidate):
                    candidate = _trim_clause(candidate, question)
                weight = _candidate_weight(candidate, question_terms, question)
                if weight == 0.0:
                    continue
                score = (shared + rank_weight) * weight
                key = candidate.lower()
                votes[key] = votes.get(key, 0.0) + score
                if key not in where or score > where[key].score:
                    where[key] = SpanAnswer(candidate, sentence, index, score)
    if not votes:
        return None
    best = max(votes, key=lambda key: votes[key])  # ties: the first found (the better passage or sentence)
    found = where[best]
    return SpanAnswer(found.text, found.sentence, found.passage, votes[best])
