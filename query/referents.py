"""Referents of a follow-up question: what "it", "the mountain", "that year", "她" or "这条河" stands for,
picked from the previous turn's answer and question.

Why the answer: a follow-up usually points at what was just answered. After "Who founded the Harwick
Observatory?" - "Lena Harwick, on Mount Tessel", the follow-up "How high is the mountain it stands on?" means
Mount Tessel, which only the answer names; carrying the previous question's terms ("Harwick Observatory
founded") sends retrieval back to the passage it already found. Why rules: this is the path of the embedded
model (it cannot rewrite a question reliably) and the fallback of a strong one; every rule is a cue a reader
can check, and the function stays pure (text in, names out).

The rules, in short: a phrase of the follow-up points back (a pronoun before any name of the question, a
definite or demonstrative noun phrase whose head noun names a kind of entity, "that year", "the second
one"); the previous turn offers candidates (the short answer first, then the names of the answer's sentences,
then the names of the previous question); each kind of phrase prefers its kind of candidate (a name whose
words fit the head noun, "Mount Tessel" for "the mountain"; a person for "she"; the new entity of a "which
X" answer or else the previous topic for "it"); numbers are never names, except for "that year".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from core.text import split_sentences, strip_references
from query.lexicons import (
    ANAPHORIC_DETERMINERS,
    ANAPHORIC_MODIFIERS,
    CJK,
    CJK_DEMONSTRATIVE,
    CJK_HEAD_STOP,
    CJK_PERSON_HEADS,
    CJK_PERSON_PRONOUN,
    CJK_THING_PRONOUN,
    CJK_WH_TARGET,
    CJK_YEAR_HEAD,
    EXISTENTIAL_NEIGHBOURS,
    GROUP_PRONOUNS,
    HEAD_NOUN_NAME_WORDS,
    LIST_SEPARATORS,
    NON_PERSON_NAME_WORDS,
    ORDINAL_REFERENCE,
    ORDINALS,
    PERSON_HEAD_NOUNS,
    PERSON_PRONOUNS,
    PLACE_PRONOUNS,
    RELATIONAL_NOUNS,
    SHORT_ANSWER_LEAD,
    THING_HEAD_NOUNS,
    THING_PRONOUNS,
    YEAR,
    YEAR_HEADS,
)
from query.text import WORD, capitalised_phrases, content_words, is_chinese, norm, quoted_titles, words_of

#: Words of the first answer line up to which it is a short answer ("Lena Harwick"), not a sentence.
SHORT_ANSWER_MAX_WORDS = 8
#: Words of a short-answer item kept as an entity when it names nothing capitalised ("river blindness").
UNNAMED_ENTITY_MAX_WORDS = 5
#: Chinese characters of a short answer that still reads as one name ("林晚秋", "江州省").
CJK_NAME_MAX_CHARS = 8
#: Referents appended to one follow-up, at most (one per phrase that points back).
MAX_REFERENTS = 2
#: Words before a name within which a head noun says what the name is ("the island of Tarsa").
KIND_WINDOW_WORDS = 3
#: Punctuation that ends a sentence (a one-line answer ending so is a sentence, not a short answer).
SENTENCE_ENDS = (".", "!", "?", "。", "！", "？")
#: Verbs after a name that make it a person ("Lena Harwick founded ...").
PERSON_VERBS = frozenset(
    """wrote founded painted designed built directed composed married studied discovered invented died reigned
    taught sang was_born grew lived""".split()
)
#: Participles before "by <name>" that make the name a person ("written by Ada Fenwright").
PERSON_BY_VERBS = frozenset(
    """written painted designed founded directed composed discovered built invented sculpted played sung
    drawn photographed""".split()
)
#: Words that are never an entity of a short answer ("Yes", "No", "Unknown").
NON_ENTITY_ANSWERS = frozenset({"yes", "no", "unknown", "none", "not found"})
#: Chinese splitters of a question's content pieces into terms ("红松乐队的主唱" -> "红松乐队", "主唱").
CJK_TERM_SPLIT = re.compile(r"的|这[个部本位条座家所首]|那[个部本位条座家所首]")
#: Chinese question words that ask for a person.
CJK_PERSON_QUESTION = re.compile(r"谁|哪位|哪个人")

ReferenceKind = Literal["person", "thing", "group", "place", "noun", "year", "ordinal"]


@dataclass(frozen=True)
class Candidate:
    """An entity the previous turn named, with where it was named and whether it is a person."""

    text: str
    sentence: str
    """The sentence that names it (to read what it is: "the island of Tarsa", "the engineer Elsa Quarry")."""
    short: bool = False
    """Named by the short answer (the entity the previous turn answered with)."""
    in_answer: bool = False
    in_question: bool = False
    """Named by the previous question (its topic)."""
    person: bool | None = None
    """True for a person, False for a place, thing or organisation, None when the text cannot tell."""


@dataclass(frozen=True)
class Reference:
    """A phrase of the follow-up that points back at the previous turn."""

    kind: ReferenceKind
    start: int
    end: int
    head: str = ""
    """The head noun of a noun phrase ("mountain"), the ordinal word ("second")."""


# --- the previous answer ---------------------------------------------------------------------------------


def split_answer(answer: str) -> tuple[str, str]:
    """(short answer, explanation) of an engine answer, citation markers removed.

    The engine writes the short answer on its first line ("Lena Harwick") and the cited sentence after it;
    an answer that opens with a sentence, or is one sentence ("Elon Musk founded SpaceX."), has no short
    answer ("")."""
    lines = [line.strip() for line in strip_references(answer).splitlines() if line.strip()]
    if not lines:
        return "", ""
    first = lines[0]
    short_enough = (
        len(CJK.findall(first)) <= CJK_NAME_MAX_CHARS * 2
        if is_chinese(first)
        else len(words_of(first)) <= SHORT_ANSWER_MAX_WORDS
    )
    if short_enough and (len(lines) > 1 or not first.endswith(SENTENCE_ENDS)):
        return first.rstrip("".join(SENTENCE_ENDS)), " ".join(lines[1:])
    return "", " ".join(lines)


def is_number(text: str) -> bool:
    """A year, date or count ("1887", "1994年", "31"): never a named entity."""
    return bool(re.fullmatch(r"[\d\s,.\-/年月日号]+", text.strip()))


def short_answer_items(short: str) -> list[str]:
    """The entities of a short answer: its names ("on Mount Callow" -> "Mount Callow"), each item of a list
    ("Ilon and Carrow"), or the item itself when it names nothing capitalised ("the viola da gamba")."""
    items: list[str] = []
    for item in LIST_SEPARATORS.split(short.strip()):
        item = SHORT_ANSWER_LEAD.sub("", item.strip(" .。")).strip()
        if not item or norm(item) in NON_ENTITY_ANSWERS:
            continue
        if is_chinese(item):
            items.append(item)
            continue
        names = [*quoted_titles(item), *capitalised_phrases(item)]
        if names:
            items.extend(names)
        elif content_words(item) and len(words_of(item)) <= UNNAMED_ENTITY_MAX_WORDS:
            items.append(item)
    return list(dict.fromkeys(items))


# --- who is a person --------------------------------------------------------------------------------------


def asks_for_person(question: str) -> bool:
    """Whether a question asks for a person ("Who ...", "Which actress ...", "谁", "哪位")."""
    if is_chinese(question):
        return bool(CJK_PERSON_QUESTION.search(question))
    words = [word.lower() for word in words_of(question)]
    if not words:
        return False
    if words[0] in {"who", "whom"}:
        return True
    return words[0] in {"which", "what"} and len(words) > 1 and words[1] in PERSON_HEAD_NOUNS


def asks_for_kind(question: str) -> str:
    """The noun a "which X" / "what X" question asks for ("Which city hosted ..." -> "city"); "" for other
    questions ("Who ...", "Where ...", "What is ...")."""
    words = [word.lower() for word in words_of(question)]
    if len(words) > 1 and words[0] in {"which", "what"}:
        noun = words[1]
        if noun in HEAD_NOUN_NAME_WORDS or noun in PERSON_HEAD_NOUNS or noun in THING_HEAD_NOUNS:
            return noun
    return ""


def _word_before(sentence: str, name: str) -> list[str]:
    index = sentence.find(name)
    return [word.lower() for word in words_of(sentence[: max(index, 0)])] if index >= 0 else []


def _words_after(sentence: str, name: str) -> list[str]:
    index = sentence.find(name)
    return [word.lower() for word in words_of(sentence[index + len(name) :])] if index >= 0 else []


def is_person(name: str, sentence: str, *, answers_who: bool) -> bool | None:
    """True when the text makes `name` a person (the answer to "who", "the engineer X", "X founded ...",
    "written by X"), False when its words mark a place or an organisation ("Mount", "Company", "The ..."),
    None when nothing tells."""
    words = [word.lower() for word in words_of(name)]
    if not words or is_number(name) or set(words) & NON_PERSON_NAME_WORDS:
        return False
    if answers_who:
        return True
    before, after = _word_before(sentence, name), _words_after(sentence, name)
    if before and (before[-1] in PERSON_HEAD_NOUNS or before[-1] in RELATIONAL_NOUNS):
        return True
    if len(before) >= 2 and before[-1] == "by" and before[-2] in PERSON_BY_VERBS:
        return True
    following = "_".join(after[:2]) if after[:1] == ["was"] else (after[0] if after else "")
    return True if following in PERSON_VERBS else None


# --- candidates -------------------------------------------------------------------------------------------


def _merge(candidates: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per name (case-insensitive), at its first (most salient) place, with every flag of its
    other mentions."""
    merged: dict[str, Candidate] = {}
    for candidate in candidates:
        key = norm(candidate.text)
        seen = merged.get(key)
        if seen is None:
            merged[key] = candidate
            continue
        merged[key] = Candidate(
            seen.text,
            seen.sentence,
            short=seen.short or candidate.short,
            in_answer=seen.in_answer or candidate.in_answer,
            in_question=seen.in_question or candidate.in_question,
            person=seen.person if seen.person is not None else candidate.person,
        )
    return list(merged.values())


def _fuller_spelling(item: str, names: Sequence[str]) -> str:
    """The answer sentence's spelling of a short-answer name when it is fuller ("The Gannets" for the first
    line's "Gannets", whose sentence-initial "The" the name finder drops)."""
    key = norm(item)
    fuller = [name for name in names if norm(name).endswith(" " + key) and norm(name).startswith("the ")]
    return fuller[0] if fuller else item


def english_candidates(previous_question: str, previous_answer: str) -> list[Candidate]:
    """The entities of the previous turn, most salient first: the short answer's, the answer sentences'
    names, then the previous question's titles and names."""
    short, body = split_answer(previous_answer)
    answers_who = asks_for_person(previous_question)
    found: list[Candidate] = []
    body_names = [name for sentence in split_sentences(body) for name in capitalised_phrases(sentence)]
    for item in short_answer_items(short):
        item = _fuller_spelling(item, body_names)
        sentence = next((text for text in split_sentences(body) if item in text), short)
        person = is_person(item, sentence, answers_who=answers_who)
        found.append(Candidate(item, sentence, short=True, in_answer=True, person=person))
    for sentence in split_sentences(body):
        for name in [*quoted_titles(sentence), *capitalised_phrases(sentence)]:
            found.append(
                Candidate(name, sentence, in_answer=True, person=is_person(name, sentence, answers_who=False))
            )
    for name in [*quoted_titles(previous_question), *capitalised_phrases(previous_question)]:
        person = is_person(name, previous_question, answers_who=False)
        found.append(Candidate(name, previous_question, in_question=True, person=person))
    return [candidate for candidate in _merge(found) if not is_number(candidate.text)]


# --- references of an English follow-up ------------------------------------------------------------------


def _first_name_start(question: str) -> int:
    names = [*quoted_titles(question), *capitalised_phrases(question)]
    return min((question.find(name) for name in names if name in question), default=len(question))


def _noun_phrase(tokens: Sequence[re.Match[str]], index: int, question: str) -> Reference | None:
    """A phrase "the / this / that [same] <head>" at `index` that points back, or None.

    Not one when the head is followed by "of" ("the capital of France") or by a name ("the river Sele"), or
    when the question itself names an entity of that kind ("the mountain" beside "Mount Tessel")."""
    determiner = tokens[index].group(0).lower()
    position = index + 1
    while position < len(tokens) and tokens[position].group(0).lower() in ANAPHORIC_MODIFIERS:
        position += 1
    if position >= len(tokens):
        return None
    head = re.sub(r"['’]s$", "", tokens[position].group(0).lower())  # "the city's mayor"
    following = tokens[position + 1].group(0) if position + 1 < len(tokens) else ""
    if following.lower() == "of" or following[:1].isupper():
        return None
    start, end = tokens[index].start(), tokens[position].end()
    if head in YEAR_HEADS:
        # "that year", "the same year" point back; "this year" and "the year" do not.
        pointing = determiner == "that" or position > index + 1
        return Reference("year", start, end, head) if pointing else None
    if head not in HEAD_NOUN_NAME_WORDS and head not in PERSON_HEAD_NOUNS and head not in THING_HEAD_NOUNS:
        return None
    kind_words = HEAD_NOUN_NAME_WORDS.get(head, frozenset({head}))
    for name in capitalised_phrases(question):
        if {word.lower() for word in words_of(name)} & kind_words:
            return None
    return Reference("noun", start, end, head)


def _pronoun(tokens: Sequence[re.Match[str]], index: int) -> Reference | None:
    """A pronoun at `index` that points back ("it", "her", "there"; "this"/"that" only on their own)."""
    token = tokens[index]
    word = token.group(0).lower()
    before = tokens[index - 1].group(0).lower() if index > 0 else ""
    after = tokens[index + 1].group(0).lower() if index + 1 < len(tokens) else ""
    if word in PERSON_PRONOUNS:
        return Reference("person", token.start(), token.end())
    if word in GROUP_PRONOUNS:
        return Reference("group", token.start(), token.end())
    if (
        word in PLACE_PRONOUNS
        and before not in EXISTENTIAL_NEIGHBOURS
        and after not in EXISTENTIAL_NEIGHBOURS
    ):
        return Reference("place", token.start(), token.end())
    if word in THING_PRONOUNS and (word not in {"this", "that"} or not after):
        return Reference("thing", token.start(), token.end())
    return None


def english_references(question: str) -> list[Reference]:
    """The phrases of an English follow-up that point back, in order. Pronouns count only before the
    question's first name (after it they may point at that name: "Did Einstein like his work?")."""
    tokens = list(WORD.finditer(question))
    first_name = _first_name_start(question)
    found: list[Reference] = []
    covered_until = -1
    for index, token in enumerate(tokens):
        if token.start() < covered_until:
            continue
        word = token.group(0).lower()
        reference: Reference | None = None
        if word in ANAPHORIC_DETERMINERS:
            reference = _noun_phrase(tokens, index, question)
        if reference is None and token.start() < first_name:
            reference = _pronoun(tokens, index)
        if reference is not None:
            found.append(reference)
            covered_until = reference.end
    for match in ORDINAL_REFERENCE.finditer(question):
        if match.group(1).lower() in ORDINALS:
            found.append(Reference("ordinal", match.start(), match.end(), match.group(1).lower()))
    return sorted(found, key=lambda reference: reference.start)


# --- resolution -------------------------------------------------------------------------------------------


def _kind_words(head: str) -> frozenset[str]:
    return HEAD_NOUN_NAME_WORDS.get(head, frozenset({head}))


def _called(candidate: Candidate, head: str) -> bool:
    """Whether the candidate's sentence calls it a `head` ("the island of Tarsa", "the schooner Tern",
    "Carrow, a moon", "Montserrin is a city")."""
    before = _word_before(candidate.sentence, candidate.text)[-KIND_WINDOW_WORDS:]
    after = _words_after(candidate.sentence, candidate.text)[:KIND_WINDOW_WORDS]
    kinds = _kind_words(head) | {head}
    return bool(kinds & set(before)) or (after[:1] in (["is"], ["was"], ["a"]) and bool(kinds & set(after)))


def _years(texts: Iterable[str]) -> list[str]:
    return [match.group(1) for text in texts for match in YEAR.finditer(text)]


def _first(candidates: Iterable[Candidate]) -> Candidate | None:
    return next(iter(candidates), None)


def resolve_noun(head: str, candidates: Sequence[Candidate], previous_question: str) -> Candidate | None:
    """The candidate a noun phrase's head points at: a name of that kind ("Mount ..." for "mountain"), the
    answer to a "which <head>" question, a name its sentence calls a <head>, or a person for a person noun."""
    kinds = _kind_words(head)
    by_name = _first(c for c in candidates if {word.lower() for word in words_of(c.text)} & kinds)
    if by_name is not None:
        return by_name
    if asks_for_kind(previous_question) == head:
        answered = _first(c for c in candidates if c.short)
        if answered is not None:
            return answered
    called = _first(c for c in candidates if _called(c, head))
    if called is not None:
        return called
    if head in PERSON_HEAD_NOUNS:
        return _first(c for c in candidates if c.person)
    return None


def resolve_pronoun(
    kind: ReferenceKind, candidates: Sequence[Candidate], previous_question: str
) -> Candidate | None:
    """The candidate a pronoun points at.

    he/she: a person, the answered one first. it: the answer of a "which X" question (the new entity),
    otherwise the previous question's topic (after "Who founded X?" or "When did X sink?", "it" is X).
    they: the answered entity, else the topic. there: the answer of a "where" question, else a place."""
    short = [c for c in candidates if c.short]
    asked = [c for c in candidates if c.in_question and not c.short]
    named = [c for c in candidates if c.in_answer and not c.short]
    if kind == "person":
        return _first(c for c in candidates if c.person) or _first(c for c in candidates if c.person is None)
    if kind == "thing":
        order = [*short, *asked, *named] if asks_for_kind(previous_question) else [*asked, *short, *named]
        return _first(c for c in order if c.person is not True)
    if kind == "group":
        return _first([*short, *asked, *named])
    if kind == "place":
        where = (words_of(previous_question)[:1] or [""])[0].lower() == "where" or asks_for_kind(
            previous_question
        ) in HEAD_NOUN_NAME_WORDS
        order = [*short, *named, *asked] if where else [*named, *short, *asked]
        return _first(c for c in order if c.person is not True)
    return None


def resolve_ordinal(ordinal: str, short: str, candidates: Sequence[Candidate]) -> str | None:
    """The item an ordinal points at: of the short answer's list ("Ilon and Carrow"), else of the names the
    answer adds to the previous question ("opens with The Iron Gull, followed by Harbour of Ash")."""
    items = short_answer_items(short)
    if len(items) < 2:
        items = [c.text for c in candidates if c.in_answer and not c.in_question]
    index = ORDINALS[ordinal]
    if not items or index >= len(items):
        return None
    return items[index]


def english_referents(question: str, previous_question: str, previous_answer: str) -> list[str]:
    """The names the follow-up's pointing phrases stand for, in the question's order, at most MAX_REFERENTS,
    none the question already names.

    A pronoun right after a resolved noun phrase is left alone: "the mountain it stands on" is a relative
    clause about the mountain, already named. When only noun phrases of no known kind point back and none
    resolves, the most salient name of the answer stands for them."""
    candidates = [
        c
        for c in english_candidates(previous_question, previous_answer)
        if norm(c.text) not in norm(question)
    ]
    short, body = split_answer(previous_answer)
    found_names: list[str] = []
    resolved_end = -1
    unresolved_noun = False
    for reference in english_references(question):
        name: str | None = None
        if reference.kind == "year":
            name = next(iter(_years([short, body])), None)
        elif reference.kind == "ordinal":
            name = resolve_ordinal(reference.head, short, candidates)
        elif reference.kind == "noun":
            found = resolve_noun(reference.head, candidates, previous_question)
            name = found.text if found else None
            unresolved_noun = unresolved_noun or found is None
        elif not question[resolved_end : reference.start].strip() and resolved_end >= 0:
            continue  # "the mountain it stands on": the pronoun belongs to the named noun phrase
        else:
            found = resolve_pronoun(reference.kind, candidates, previous_question)
            name = found.text if found else None
        named_already = {norm(text) for text in found_names} | {norm(question)}
        if name and not any(norm(name) in text for text in named_already):
            found_names.append(name)
            resolved_end = reference.end
    if not found_names and unresolved_noun:
        fallback = _first(c for c in candidates if c.in_answer)
        if fallback is not None:
            found_names.append(fallback.text)
    return found_names[:MAX_REFERENTS]


# --- Chinese ---------------------------------------------------------------------------------------------


def _cjk_head(raw: str) -> str:
    """A Chinese head noun cut at its first function character ("省的" -> "省", "乐队" -> "乐队")."""
    for index, char in enumerate(raw):
        if char in CJK_HEAD_STOP:
            return raw[:index]
    return raw


def cjk_terms(question: str) -> list[str]:
    """The terms of a Chinese question, titles first ("红松乐队的主唱是谁？" -> "红松乐队", "主唱")."""
    pieces = [piece for text in content_words(question) for piece in CJK_TERM_SPLIT.split(text)]
    return list(dict.fromkeys([*quoted_titles(question), *(piece for piece in pieces if piece)]))


def _cjk_noun(head: str, short: str, previous_question: str) -> str | None:
    """What "这条河" / "该省" / "这个乐队" points at: the short answer when it is of that kind (its text has
    the head, or the previous question asked "哪条河"), else a term of the previous question that has the
    head ("红松乐队"), else the short answer for a person head."""
    if not head:
        return None
    if short and (head in short or head[-1] in short):
        return short
    for match in CJK_WH_TARGET.finditer(previous_question):
        asked = _cjk_head(match.group(1))
        if short and asked and (head in asked or asked in head):
            return short
    term = next((term for term in cjk_terms(previous_question) if head in term and term != head), None)
    if term:
        return term
    return short if short and head in CJK_PERSON_HEADS else None


def chinese_referents(question: str, previous_question: str, previous_answer: str) -> list[str]:
    """The referents of a Chinese follow-up: "那一年" -> the year answered, "这条河" / "该省" -> an entity of
    that kind, 他/她 -> the answered person, 它 -> the answered thing (or, after a "谁" question, the
    previous question's topic)."""
    short, body = split_answer(previous_answer)
    short_name = (
        short if short and not is_number(short) and len(CJK.findall(short)) <= CJK_NAME_MAX_CHARS else ""
    )
    asked_person = asks_for_person(previous_question)
    found_names: list[str] = []
    for match in CJK_DEMONSTRATIVE.finditer(question):
        head = _cjk_head(match.group(1))
        if match.group(1).startswith(CJK_YEAR_HEAD):
            found_names.extend(_years([short, body])[:1])
        else:
            found_names.extend(filter(None, [_cjk_noun(head, short_name, previous_question)]))
    if CJK_PERSON_PRONOUN.search(question) and short_name and asked_person:
        found_names.append(short_name)
    if CJK_THING_PRONOUN.search(question):
        topic = next(iter(cjk_terms(previous_question)), "") if asked_person else short_name
        found_names.extend(filter(None, [topic]))
    unique = [text for text in dict.fromkeys(found_names) if text not in question]
    return unique[:MAX_REFERENTS]


def referents(question: str, previous_question: str, previous_answer: str) -> list[str]:
    """The names a follow-up's pointing phrases stand for, from the previous question and its answer;
    [] when nothing points back or nothing fits."""
    if not previous_answer.strip():
        return []
    if is_chinese(question):
        return chinese_referents(question, previous_question, previous_answer)
    return english_referents(question, previous_question, previous_answer)


def has_reference(question: str) -> bool:
    """Whether a question has a phrase that points back (a pronoun before any name, "the mountain",
    "that year", "the second one", 它/她/这条河/该省)."""
    if is_chinese(question):
        return bool(
            CJK_DEMONSTRATIVE.search(question)
            or CJK_PERSON_PRONOUN.search(question)
            or CJK_THING_PRONOUN.search(question)
        )
    return bool(english_references(question))
