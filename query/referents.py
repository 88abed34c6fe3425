"""Referents of a follow-up question: what "it", "the mountain", "that year", "她" or "这条河" stands for,
picked from the previous turn's answer and question.

Why the answer: after "Who founded the Harwick Observatory?" - "Lena Harwick, on Mount Tessel", "the mountain
it stands on" means Mount Tessel, which only the answer names; the previous question's terms would send
retrieval back to the passage it already found. Each kind of pointing phrase prefers its kind
of candidate (a name whose words fit the head noun, a person for "she", the previous topic for "it" after a
describing answer); numbers are never names, except for "that year".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from query import lexicons
from query.chinese_referents import chinese_referents
from query.question_topic import FUNCTION_WORDS, Topic, is_name_like, question_topic
from query.referent_candidates import (
    KIND_WINDOW_WORDS,
    MAX_REFERENTS,
    Candidate,
    _word_before,
    _words_after,
    asks_for_kind,
    english_candidates,
    short_answer_items,
    split_answer,
    years_in,
)
from query.text import WORD, capitalised_phrases, content_words, is_chinese, norm, quoted_titles, words_of

#: Words before a concept's head that still name it ("style keyword argument"), at most.
MAX_MENTION_MODIFIERS = 3

ReferenceKind = Literal["person", "thing", "group", "place", "noun", "concept", "year", "ordinal"]


@dataclass(frozen=True)
class Reference:
    """A phrase of the follow-up that points back at the previous turn."""

    kind: ReferenceKind
    start: int
    end: int
    head: str = ""
    """The head noun of a noun phrase ("mountain", "parameter"), the ordinal word ("second")."""


def _first_name_start(question: str) -> int:
    names = [*quoted_titles(question), *capitalised_phrases(question)]
    return min((question.find(name) for name in names if name in question), default=len(question))


def word_forms(word: str) -> frozenset[str]:
    """A noun's singular and plural spellings ("parameter", "parameters"), lower case."""
    word = word.lower()
    stem = word[:-2] if word.endswith("es") else word[:-1] if word.endswith("s") else word
    return frozenset({word, stem, stem + "s", stem + "es"})


def _concept_phrase(
    tokens: Sequence[re.Match[str]], index: int, position: int, previous_question: str, previous_answer: str
) -> Reference | None:
    """A phrase "that parameter" / "the option" whose head is a common noun of no listed kind (a
    concept of the previous turn), or None. A demonstrative points back as a determiner or when the previous
    turn names the head; "the" only when the previous question names it."""
    head = tokens[position].group(0).lower()
    if head in FUNCTION_WORDS or not head.isalpha():
        return None
    determiner = tokens[index].group(0).lower()
    before = tokens[index - 1].group(0).lower() if index > 0 else ""
    if determiner == "the":
        named = bool(word_forms(head) & {word.lower() for word in words_of(previous_question)})
    else:
        previous_words = words_of(f"{previous_question} {previous_answer}")
        mentioned = bool(word_forms(head) & {word.lower() for word in previous_words})
        named = mentioned or not before or before in FUNCTION_WORDS
    if not named:
        return None
    return Reference("concept", tokens[index].start(), tokens[position].end(), head)


def _noun_phrase(
    tokens: Sequence[re.Match[str]],
    index: int,
    question: str,
    previous_question: str = "",
    previous_answer: str = "",
) -> Reference | None:
    """A phrase "the / this / that [same] <head>" at `index` that points back, or None: not before
    "of" or a name, nor when the question itself names an entity of that kind; a head of no listed kind is a
    concept (`_concept_phrase`)."""
    determiner = tokens[index].group(0).lower()
    position = index + 1
    while position < len(tokens) and tokens[position].group(0).lower() in lexicons.ANAPHORIC_MODIFIERS:
        position += 1
    if position >= len(tokens):
        return None
    head = re.sub(r"['’]s$", "", tokens[position].group(0).lower())  # "the city's mayor"
    following = tokens[position + 1].group(0) if position + 1 < len(tokens) else ""
    if following.lower() == "of" or following[:1].isupper():
        return None
    start, end = tokens[index].start(), tokens[position].end()
    if head in lexicons.YEAR_HEADS:
        # "that year", "the same year" point back; "this year" and "the year" do not.
        pointing = determiner == "that" or position > index + 1
        return Reference("year", start, end, head) if pointing else None
    if (
        head not in lexicons.HEAD_NOUN_NAME_WORDS
        and head not in lexicons.PERSON_HEAD_NOUNS
        and head not in lexicons.THING_HEAD_NOUNS
    ):
        if not (previous_question.strip() or previous_answer.strip()):
            return None
        return _concept_phrase(tokens, index, position, previous_question, previous_answer)
    kind_words = lexicons.HEAD_NOUN_NAME_WORDS.get(head, frozenset({head}))
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
    if word in lexicons.PERSON_PRONOUNS:
        return Reference("person", token.start(), token.end())
    if word in lexicons.GROUP_PRONOUNS:
        return Reference("group", token.start(), token.end())
    if (
        word in lexicons.PLACE_PRONOUNS
        and before not in lexicons.EXISTENTIAL_NEIGHBOURS
        and after not in lexicons.EXISTENTIAL_NEIGHBOURS
    ):
        return Reference("place", token.start(), token.end())
    if word in lexicons.THING_PRONOUNS and (word not in {"this", "that"} or not after):
        return Reference("thing", token.start(), token.end())
    return None


def english_references(
    question: str, previous_question: str = "", previous_answer: str = ""
) -> list[Reference]:
    """The phrases of an English follow-up that point back, in order (pronouns only before its first name)."""
    tokens = list(WORD.finditer(question))
    first_name = _first_name_start(question)
    found: list[Reference] = []
    covered_until = -1
    for index, token in enumerate(tokens):
        if token.start() < covered_until:
            continue
        word = token.group(0).lower()
        reference: Reference | None = None
        if word in lexicons.ANAPHORIC_DETERMINERS:
            reference = _noun_phrase(tokens, index, question, previous_question, previous_answer)
        if reference is None and token.start() < first_name:
            reference = _pronoun(tokens, index)
        if reference is not None:
            found.append(reference)
            covered_until = reference.end
    for match in lexicons.ORDINAL_REFERENCE.finditer(question):
        if match.group(1).lower() in lexicons.ORDINALS:
            found.append(Reference("ordinal", match.start(), match.end(), match.group(1).lower()))
    return sorted(found, key=lambda reference: reference.start)


def _kind_words(head: str) -> frozenset[str]:
    return lexicons.HEAD_NOUN_NAME_WORDS.get(head, frozenset({head}))


def _called(candidate: Candidate, head: str) -> bool:
    """Whether the candidate's sentence calls it a `head` ("the island of Tarsa", "Montserrin is a city")."""
    before = _word_before(candidate.sentence, candidate.text)[-KIND_WINDOW_WORDS:]
    after = _words_after(candidate.sentence, candidate.text)[:KIND_WINDOW_WORDS]
    kinds = _kind_words(head) | {head}
    return bool(kinds & set(before)) or (after[:1] in (["is"], ["was"], ["a"]) and bool(kinds & set(after)))


def _first(candidates: Iterable[Candidate]) -> Candidate | None:
    return next(iter(candidates), None)


def resolve_noun(head: str, candidates: Sequence[Candidate], previous_question: str) -> Candidate | None:
    """The candidate a noun phrase's head points at (a name of that kind first), or None."""
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
    if head in lexicons.PERSON_HEAD_NOUNS:
        return _first(c for c in candidates if c.person)
    return None


def resolve_pronoun(
    kind: ReferenceKind, candidates: Sequence[Candidate], previous_question: str
) -> Candidate | None:
    """The candidate a pronoun points at: he/she a person; it the answer of a "which X" question, else
    the previous question's topic; they the answered entity, else the topic; there a "where" answer."""
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
        ) in lexicons.HEAD_NOUN_NAME_WORDS
        order = [*short, *named, *asked] if where else [*named, *short, *asked]
        return _first(c for c in order if c.person is not True)
    return None


def names_entity(short: str) -> bool:
    """Whether a short answer is a name ("Vessenburg", "1764") rather than a description."""
    words = content_words(short)
    return bool(words) and all(word[:1].isupper() or word[:1].isdigit() for word in words)


def about_topic(previous_question: str, short: str) -> Topic | None:
    """The previous question's topic when its turn was about it (a topic frame and a describing answer)."""
    topic = question_topic(previous_question)
    if topic is None or asks_for_kind(previous_question) or names_entity(short):
        return None
    return topic


def _modified_mention(text: str, forms: frozenset[str]) -> str:
    """The first mention of a head noun with the words that name it ("lifespan parameter"), or ""."""
    tokens = list(WORD.finditer(text))
    for index, token in enumerate(tokens):
        if token.group(0).lower() not in forms:
            continue
        start = index
        while (
            start > 0
            and index - start < MAX_MENTION_MODIFIERS
            and tokens[start - 1].group(0).lower() not in FUNCTION_WORDS
        ):
            start -= 1
        if start < index:
            return text[tokens[start].start() : token.end()]
        following = tokens[index + 1].group(0) if index + 1 < len(tokens) else ""
        if following and is_name_like(following):
            return text[token.start() : tokens[index + 1].end()]
    return ""


def resolve_concept(head: str, previous_question: str, short: str, body: str) -> str | None:
    """What "that parameter" stands for: the previous topic, a "which" answer, or a named mention."""
    forms = word_forms(head)
    topic = question_topic(previous_question)
    if topic is not None and forms & {word.lower() for word in words_of(topic.phrase)}:
        return topic.text
    asked = [word.lower() for word in words_of(previous_question)]
    items = short_answer_items(short)
    if len(asked) > 1 and asked[0] in {"which", "what"} and asked[1] in forms and items:
        return items[0]
    for text in (previous_question, body):
        mention = _modified_mention(text, forms)
        if mention:
            return mention
    return topic.text if topic is not None else None


def resolve_ordinal(ordinal: str, short: str, candidates: Sequence[Candidate]) -> str | None:
    """The item an ordinal points at: of the short answer's list, else of the names the answer adds."""
    items = short_answer_items(short)
    if len(items) < 2:
        items = [c.text for c in candidates if c.in_answer and not c.in_question]
    index = lexicons.ORDINALS[ordinal]
    if not items or index >= len(items):
        return None
    return items[index]


def english_referents(question: str, previous_question: str, previous_answer: str) -> list[str]:
    """The names the follow-up's pointing phrases stand for, in order, at most MAX_REFERENTS, none the
    question already names. A pronoun right after a resolved noun phrase is left alone ("the mountain it
    stands on"); unresolved noun phrases fall back to the answer's most salient name."""
    candidates = [
        c
        for c in english_candidates(previous_question, previous_answer)
        if norm(c.text) not in norm(question)
    ]
    short, body = split_answer(previous_answer)
    topic = about_topic(previous_question, short)
    found_names: list[str] = []
    resolved_end = -1
    unresolved_noun = False
    for reference in english_references(question, previous_question, previous_answer):
        name: str | None = None
        if reference.kind == "year":
            name = next(iter(years_in([short, body])), None)
        elif reference.kind == "ordinal":
            name = resolve_ordinal(reference.head, short, candidates)
        elif reference.kind == "noun":
            found = resolve_noun(reference.head, candidates, previous_question)
            name = found.text if found else None
            unresolved_noun = unresolved_noun or found is None
        elif reference.kind == "concept":
            name = resolve_concept(reference.head, previous_question, short, body)
        elif not question[resolved_end : reference.start].strip() and resolved_end >= 0:
            continue  # "the mountain it stands on": the pronoun belongs to the named noun phrase
        elif reference.kind in ("thing", "group") and topic is not None:
            name = topic.text  # "it" after "What are background tasks used for?": background tasks
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


def referents(question: str, previous_question: str, previous_answer: str) -> list[str]:
    """The names a follow-up's pointing phrases stand for; [] when nothing points back or fits."""
    if not previous_answer.strip():
        return []
    if is_chinese(question):
        return chinese_referents(question, previous_question, previous_answer)
    return english_referents(question, previous_question, previous_answer)


def has_reference(question: str, previous_question: str = "", previous_answer: str = "") -> bool:
    """Whether a question has a phrase that points back ("it", "the mountain", "that year", 这条河)."""
    if is_chinese(question):
        return bool(
            lexicons.CJK_DEMONSTRATIVE.search(question)
            or lexicons.CJK_PERSON_PRONOUN.search(question)
            or lexicons.CJK_THING_PRONOUN.search(question)
        )
    return bool(english_references(question, previous_question, previous_answer))
