"""Per-sentence groundedness: do the names, numbers and terms of each answer sentence occur in its evidence?

A wrong answer usually keeps the passage's wording and swaps one fact ("completed in 1899" for 1889), so term
overlap alone stays near 1. So a sentence's anchors are checked too: entities (capitalised runs, codes),
quoted terms, numbers (number words count as digits) and CJK terms (runs split at function characters). A
claim is supported when every anchor and SENTENCE_TERM_SUPPORT of its terms occur in its evidence (the
passages it cites, else any retrieved one); a missing anchor is a wrong fact. Planted instructions are not
evidence (retrieval.injection).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from core.keyword import ENGLISH_STOP_WORDS
from core.text import CJK_RANGES, char_pairs, split_sentences, strip_references
from retrieval.answer_text import content_terms, factual_sentences, support
from retrieval.citations import extract_markers
from state.schemas import RetrievedDoc

#: Share of a sentence's terms its evidence must contain (same bar as citations.SUPPORT_THRESHOLD).
SENTENCE_TERM_SUPPORT = 0.5
#: Sentences with fewer claim terms and no anchor ("Yes.", "In short:") are not claims.
MIN_CLAIM_TERMS = 2
#: A CJK term of this many characters or more counts as present when this share of its bigrams occurs
#: (Chinese answers re-order long phrases).
CJK_LONG_TERM = 4
CJK_BIGRAM_SHARE = 0.75
#: Prepared evidences kept (per distinct tuple of passage texts): a question needs a handful.
EVIDENCE_CACHE_SIZE = 256

#: Words that open sentences capitalised without naming anything.
DISCOURSE_WORDS = (
    frozenset(
        """however also therefore thus hence yes according both neither either although though while after
    before since because during finally first second third today overall so then later instead meanwhile
    moreover furthermore additionally unlike like many several most some one another each every based note
    sources source answer question in on at as by for from with without yet still even only another its
    there here this that these those it they he she we you i the a an if when where what which who whom
    whose why how did does do is are was were has have had can could will would should may might must
    name list tell give describe explain compare summarise summarize briefly overall no not nor""".split()
    )
    | ENGLISH_STOP_WORDS
)
#: Meta words ("the sources say") that are neither facts nor question terms.
META_WORDS = "according source sources document documents provided context passage passages answer question"
META_TERMS = frozenset(content_terms(META_WORDS))

_CANONICAL = re.compile(r"\[\d+\]")
#: A capitalised word, or an initial ("D." of "Joseph D. Stewart") when another capitalised word follows.
_CAPITAL_WORD = r"[A-ZÀ-ÖØ-Þ](?:\.(?=[ \t]+[A-ZÀ-ÖØ-Þ])|[\w'’-]*)"
_CAPITAL_RUN = re.compile(rf"(?<![\w'’.-]){_CAPITAL_WORD}(?:[ \t]+{_CAPITAL_WORD})*")
_QUOTED = re.compile(
    r"\"([^\"\n]{2,60})\"|“([^”\n]{2,60})”|「([^」\n]{1,30})」|《([^》\n]{1,30})》|『([^』\n]{1,30})』"
)
_NUMBER = re.compile(r"(?<![A-Za-z0-9.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?")
#: English number words and the digits they stand for.
NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
} | {
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "seventy": "70",
    "eighty": "80",
    "ninety": "90",
}
#: Number words an answer may use loosely ("one of the", "zero in on"): not anchors, but read in passages.
_LOOSE_NUMBER_WORDS = frozenset({"zero", "one"})
_WORD = re.compile(r"[A-Za-z]+")
_CJK_DIGITS = {char: value for value, char in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}
_CJK_UNITS = {"十": 10, "百": 100, "千": 1000}
_CJK_NUMERAL = re.compile(r"[零〇一二两三四五六七八九十百千万]+")
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
#: Function characters that separate Chinese terms (particles, prepositions, pronouns, question words).
CJK_FUNCTION_CHARS = frozenset(
    "的是在了和与及于为有也被把用从到由对这那其之个并而或就将以所着过向给让使比还又很最"
    "更它他她们我你吗呢吧啊哪什么谁几怎何该此即若则但却因故年"
)
_POSSESSIVE = re.compile(r"['’]s$")
#: A word or number of `loose_form` (letters and digits of any script).
_LOOSE_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Anchors:
    """The checkable facts of a sentence."""

    entities: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    quoted: tuple[str, ...] = ()
    cjk: tuple[str, ...] = ()

    def all(self) -> tuple[str, ...]:
        """Every anchor, for reports."""
        return (*self.entities, *self.numbers, *self.quoted, *self.cjk)


@dataclass(frozen=True)
class SentenceCheck:
    """One answer sentence against its evidence."""

    sentence: str
    cited: tuple[int, ...]
    """In-range source numbers the sentence cites (1-based); empty when uncited."""
    claim: bool
    missing: tuple[str, ...]
    """Anchors absent from the evidence (a wrong name, number, date or quoted term)."""
    term_support: float

    @property
    def supported(self) -> bool:
        """A non-claim is never unsupported; a claim needs all anchors and enough of its terms."""
        return not self.claim or (not self.missing and self.term_support >= SENTENCE_TERM_SUPPORT)


@dataclass(frozen=True)
class GroundingReport:
    """Every sentence of an answer checked against its evidence."""

    sentences: tuple[SentenceCheck, ...] = field(default_factory=tuple)

    @property
    def claims(self) -> list[SentenceCheck]:
        """The claim sentences."""
        return [check for check in self.sentences if check.claim]

    @property
    def wrong_facts(self) -> list[SentenceCheck]:
        """Claim sentences with an anchor missing from their evidence (hard errors)."""
        return [check for check in self.claims if check.missing]

    @property
    def supported_share(self) -> float:
        """Supported claims over claims (1.0 without claims: nothing to contradict)."""
        claims = self.claims
        return sum(check.supported for check in claims) / len(claims) if claims else 1.0


def normalize_number(whole: str, decimals: str | None) -> str:
    """ "1,200" -> "1200", "3.50" -> "3.5", "2.0" -> "2"."""
    digits = whole.replace(",", "").lstrip("0") or "0"
    decimals = (decimals or "").rstrip("0")
    return f"{digits}.{decimals}" if decimals else digits


def chinese_number(numeral: str) -> int:
    """The value of a Chinese numeral up to the ten thousands ("七" 7, "十二" 12, "三百零五" 305)."""
    total, section, digit = 0, 0, 0
    for char in numeral:
        if char in _CJK_DIGITS:
            digit = _CJK_DIGITS[char]
        elif char == "万":
            total += (section + digit) * 10000
            section, digit = 0, 0
        else:
            section += (digit or 1) * _CJK_UNITS[char]
            digit = 0
    return total + section + digit


def numbers_in(text: str, *, loose_words: bool = True) -> set[str]:
    """Normalised numbers of `text`: digits, English number words and Chinese numerals (`loose_words`:
    also "one", "zero" and a lone "一", which are as often words as numbers)."""
    found = {normalize_number(match.group(1), match.group(2)) for match in _NUMBER.finditer(text)}
    for word in _WORD.findall(text.lower()):
        if word in NUMBER_WORDS and (loose_words or word not in _LOOSE_NUMBER_WORDS):
            found.add(NUMBER_WORDS[word])
    for numeral in _CJK_NUMERAL.findall(text):
        if loose_words or numeral not in ("一", "两"):
            found.add(str(chinese_number(numeral)))
    return found


def _entity_runs(sentence: str) -> list[str]:
    """Capitalised runs without leading discourse words and without the possessive of their last word ("The
    Eiffel Tower's" -> "Eiffel Tower"; one inside a run is part of the name: "Queen's University")."""
    runs: list[str] = []
    for match in _CAPITAL_RUN.finditer(sentence):
        words = match.group(0).split()
        while words and _POSSESSIVE.sub("", words[0]).lower().strip("'’") in DISCOURSE_WORDS:
            words = words[1:]
        if words:
            words[-1] = _POSSESSIVE.sub("", words[-1])
        words = [word.strip("'’-") for word in words]
        words = [word for word in words if word and not word.isdigit()]
        if words:
            runs.append(" ".join(words))
    return runs


def _cjk_terms(sentence: str) -> list[str]:
    terms: list[str] = []
    for run in _CJK_RUN.findall(sentence):
        piece = ""
        for char in run + "的":  # a sentinel function character flushes the last piece
            if char in CJK_FUNCTION_CHARS:
                if len(piece) >= 2:
                    terms.append(piece)
                piece = ""
            else:
                piece += char
    return terms


def anchors_of(sentence: str, *, skip_words: frozenset[str] = frozenset()) -> Anchors:
    """The anchors of one sentence (markers removed); `skip_words` are lowercase entity words to ignore."""
    text = _CANONICAL.sub("", strip_references(sentence))
    quoted = tuple(next(group for group in match.groups() if group) for match in _QUOTED.finditer(text))
    entities = tuple(
        run
        for run in dict.fromkeys(_entity_runs(text))
        if run.lower() not in skip_words and not run.isdigit()
    )
    return Anchors(
        entities=entities,
        numbers=tuple(sorted(numbers_in(text, loose_words=False))),
        quoted=tuple(dict.fromkeys(quoted)),
        cjk=tuple(dict.fromkeys(_cjk_terms(text))),
    )


def loose_form(text: str) -> str:
    """Lowercase words and numbers only, space-separated and space-padded: names are compared in this form,
    so punctuation does not hide one ("EOG Resources Inc." in "EOG Resources, Inc.")."""
    return f" {' '.join(_LOOSE_WORD.findall(text.lower()))} "


def _phrase_in(phrase: str, loose_text: str) -> bool:
    """Whether a name or quoted term occurs in a text given in `loose_form`, as whole words."""
    target = loose_form(phrase)
    return target.strip() != "" and target in loose_text


def _cjk_in(term: str, text: str) -> bool:
    if term in text:
        return True
    if len(term) < CJK_LONG_TERM:
        return False
    grams = char_pairs(term)
    return sum(gram in text for gram in grams) / len(grams) >= CJK_BIGRAM_SHARE


def factual_text(text: str) -> str:
    """A passage without its instruction-like sentences (planted text is no fact)."""
    return " ".join(factual_sentences(text))


@dataclass(frozen=True)
class Evidence:
    """The text a sentence may rest on, prepared once."""

    text: str
    loose: str
    """The text in `loose_form`, where names and quoted terms are looked up."""
    numbers: frozenset[str]
    terms: frozenset[str]

    @classmethod
    def of(cls, texts: Sequence[str]) -> Evidence:
        """Evidence from passages without their instruction-like sentences, cached per tuple of texts (one
        question's nodes ground against the same passages)."""
        return _evidence_of(tuple(texts))

    def mentions(self, phrase: str) -> bool:
        """Whether a name or quoted term occurs in this evidence, as whole words of `loose_form`."""
        return _phrase_in(phrase, self.loose)

    def missing(self, anchors: Anchors) -> tuple[str, ...]:
        """The anchors this evidence does not contain."""
        absent = [entity for entity in anchors.entities if not self.mentions(entity)]
        absent += [number for number in anchors.numbers if number not in self.numbers]
        absent += [quote for quote in anchors.quoted if not self.mentions(quote)]
        absent += [term for term in anchors.cjk if not _cjk_in(term, self.text)]
        return tuple(absent)


@lru_cache(maxsize=EVIDENCE_CACHE_SIZE)
def _evidence_of(texts: tuple[str, ...]) -> Evidence:
    """The terms are the union of each passage's (cached per text), equal to the joined text's."""
    factual = [factual_text(text) for text in texts]
    joined = "\n".join(factual)
    terms = frozenset().union(*(content_terms(text) for text in factual))
    return Evidence(joined, loose_form(joined), frozenset(numbers_in(joined)), terms)


def claim_terms(sentence: str) -> set[str]:
    """Content terms of a sentence without markers and meta words."""
    return content_terms(_CANONICAL.sub("", sentence)) - META_TERMS


def check_sentence(sentence: str, cited: tuple[int, ...], evidence: Evidence) -> SentenceCheck:
    """One sentence against its evidence (see the module docstring)."""
    terms = claim_terms(sentence)
    anchors = anchors_of(sentence)
    claim = len(terms) >= MIN_CLAIM_TERMS or bool(anchors.all())
    missing = evidence.missing(anchors) if claim else ()
    return SentenceCheck(
        sentence=sentence,
        cited=cited,
        claim=claim,
        missing=missing,
        term_support=round(support(terms, set(evidence.terms)), 3) if terms else 1.0,
    )


def titled_text(doc: RetrievedDoc) -> str:
    """A passage with its document's title on the line before (the reader sees the title too)."""
    title = (doc.get("title") or "").strip()
    return f"{title}\n{doc['text']}" if title else doc["text"]


def ground_answer(
    answer: str, sources: Sequence[RetrievedDoc], pool: Sequence[RetrievedDoc] = ()
) -> GroundingReport:
    """Check every sentence of `answer`: a sentence citing [n] against sources[n - 1] (all it cites), an
    uncited one against all of `sources` and `pool` (the other retrieved passages)."""
    texts = [titled_text(doc) for doc in sources]
    every_text = [*texts, *(titled_text(doc) for doc in pool)]
    by_marker: dict[tuple[int, ...], Evidence] = {}  # () = uncited: every passage, built when first needed
    checks: list[SentenceCheck] = []
    for sentence in split_sentences(answer):
        cited = tuple(number for number in extract_markers(sentence) if 1 <= number <= len(sources))
        if cited not in by_marker:
            by_marker[cited] = Evidence.of([texts[number - 1] for number in cited] if cited else every_text)
        checks.append(check_sentence(sentence, cited, by_marker[cited]))
    return GroundingReport(tuple(checks))
