"""What the previous turn offers a follow-up's pointing phrases: its short answer and explanation, the
names of the answer's sentences and of the previous question, each with whether it is a person (shared by
the English and Chinese rules).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from core.text import split_sentences, strip_references
from query import lexicons
from query.text import capitalised_phrases, content_words, is_chinese, norm, quoted_titles, words_of

#: Words of the first answer line up to which it is a short answer ("Lena Harwick"), not a sentence.
SHORT_ANSWER_MAX_WORDS = 8
#: Chinese characters of a short answer that still reads as one name ("林晚秋", "江州省").
CJK_NAME_MAX_CHARS = 8
#: Words of a short-answer item kept as an entity when it names nothing capitalised ("river blindness").
UNNAMED_ENTITY_MAX_WORDS = 5
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
#: Chinese question words that ask for a person.
CJK_PERSON_QUESTION = re.compile(r"谁|哪位|哪个人")


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


def split_answer(answer: str) -> tuple[str, str]:
    """(short answer, explanation) of an engine answer, citation markers removed; an answer that opens
    with a sentence has no short answer ("")."""
    lines = [line.strip() for line in strip_references(answer).splitlines() if line.strip()]
    if not lines:
        return "", ""
    first = lines[0]
    short_enough = (
        len(lexicons.CJK.findall(first)) <= CJK_NAME_MAX_CHARS * 2
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
    """The entities of a short answer: its names, each item of a list, or the item when it names nothing."""
    items: list[str] = []
    for item in lexicons.LIST_SEPARATORS.split(short.strip()):
        item = lexicons.SHORT_ANSWER_LEAD.sub("", item.strip(" .。")).strip()
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


def asks_for_person(question: str) -> bool:
    """Whether a question asks for a person ("Who ...", "Which actress ...", "谁", "哪位")."""
    if is_chinese(question):
        return bool(CJK_PERSON_QUESTION.search(question))
    words = [word.lower() for word in words_of(question)]
    if not words:
        return False
    if words[0] in {"who", "whom"}:
        return True
    return words[0] in {"which", "what"} and len(words) > 1 and words[1] in lexicons.PERSON_HEAD_NOUNS


def asks_for_kind(question: str) -> str:
    """The noun a "which X" / "what X" question asks for ("Which city ..." -> "city"), else ""."""
    words = [word.lower() for word in words_of(question)]
    if len(words) > 1 and words[0] in {"which", "what"}:
        noun = words[1]
        if (
            noun in lexicons.HEAD_NOUN_NAME_WORDS
            or noun in lexicons.PERSON_HEAD_NOUNS
            or noun in lexicons.THING_HEAD_NOUNS
        ):
            return noun
    return ""


def _word_before(sentence: str, name: str) -> list[str]:
    index = sentence.find(name)
    return [word.lower() for word in words_of(sentence[: max(index, 0)])] if index >= 0 else []


def _words_after(sentence: str, name: str) -> list[str]:
    index = sentence.find(name)
    return [word.lower() for word in words_of(sentence[index + len(name) :])] if index >= 0 else []


def is_person(name: str, sentence: str, *, answers_who: bool) -> bool | None:
    """True when the text makes `name` a person, False when its words mark a place or thing, else None."""
    words = [word.lower() for word in words_of(name)]
    if not words or is_number(name) or set(words) & lexicons.NON_PERSON_NAME_WORDS:
        return False
    if answers_who:
        return True
    before, after = _word_before(sentence, name), _words_after(sentence, name)
    if before and (before[-1] in lexicons.PERSON_HEAD_NOUNS or before[-1] in lexicons.RELATIONAL_NOUNS):
        return True
    if len(before) >= 2 and before[-1] == "by" and before[-2] in PERSON_BY_VERBS:
        return True
    following = "_".join(after[:2]) if after[:1] == ["was"] else (after[0] if after else "")
    return True if following in PERSON_VERBS else None


def _merge(candidates: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per name (case-insensitive), at its first place, with every flag of its mentions."""
    merged: dict[str, Candidate] = {}
    for candidate in candidates:
        key = norm(candidate.text)
        seen = merged.get(key)
        if seen is None:
            merged[key] = candidate
            continue
        merged[key] = replace(
            seen,
            short=seen.short or candidate.short,
            in_answer=seen.in_answer or candidate.in_answer,
            in_question=seen.in_question or candidate.in_question,
            person=seen.person if seen.person is not None else candidate.person,
        )
    return list(merged.values())


def _fuller_spelling(item: str, names: Sequence[str]) -> str:
    """The answer sentence's fuller spelling of a short-answer name ("The Gannets" for "Gannets")."""
    key = norm(item)
    fuller = [name for name in names if norm(name).endswith(" " + key) and norm(name).startswith("the ")]
    return fuller[0] if fuller else item


def english_candidates(previous_question: str, previous_answer: str) -> list[Candidate]:
    """The entities of the previous turn, most salient first: short answer, answer names, question names."""
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


def years_in(texts: Iterable[str]) -> list[str]:
    """The years (four digits, query.lexicons.YEAR) the texts name, in order."""
    return [match.group(1) for text in texts for match in lexicons.YEAR.finditer(text)]
