"""Referents of a Chinese follow-up ("那一年", "这条河", 他/她, 它): rules of their own, because Chinese
marks a pointing phrase with demonstratives and measure words, not determiners and capitals.
"""

from __future__ import annotations

import re

from query import lexicons
from query.referent_candidates import (
    CJK_NAME_MAX_CHARS,
    MAX_REFERENTS,
    asks_for_person,
    is_number,
    split_answer,
    years_in,
)
from query.text import content_words, quoted_titles

#: Chinese splitters of a question's content pieces into terms ("红松乐队的主唱" -> "红松乐队", "主唱").
CJK_TERM_SPLIT = re.compile(r"的|这[个部本位条座家所首]|那[个部本位条座家所首]")


def _cjk_head(raw: str) -> str:
    """A Chinese head noun cut at its first function character ("省的" -> "省", "乐队" -> "乐队")."""
    for index, char in enumerate(raw):
        if char in lexicons.CJK_HEAD_STOP:
            return raw[:index]
    return raw


def cjk_terms(question: str) -> list[str]:
    """The terms of a Chinese question, titles first ("红松乐队的主唱是谁？" -> "红松乐队", "主唱")."""
    pieces = [piece for text in content_words(question) for piece in CJK_TERM_SPLIT.split(text)]
    return list(dict.fromkeys([*quoted_titles(question), *(piece for piece in pieces if piece)]))


def _cjk_noun(head: str, short: str, previous_question: str) -> str | None:
    """What "这条河" / "该省" points at: the short answer of that kind, else a previous term with the head."""
    if not head:
        return None
    if short and (head in short or head[-1] in short):
        return short
    for match in lexicons.CJK_WH_TARGET.finditer(previous_question):
        asked = _cjk_head(match.group(1))
        if short and asked and (head in asked or asked in head):
            return short
    term = next((term for term in cjk_terms(previous_question) if head in term and term != head), None)
    if term:
        return term
    return short if short and head in lexicons.CJK_PERSON_HEADS else None


def chinese_referents(question: str, previous_question: str, previous_answer: str) -> list[str]:
    """The referents of a Chinese follow-up ("那一年", "这条河", 他/她, 它), from the previous turn."""
    short, body = split_answer(previous_answer)
    short_name = (
        short
        if short and not is_number(short) and len(lexicons.CJK.findall(short)) <= CJK_NAME_MAX_CHARS
        else ""
    )
    asked_person = asks_for_person(previous_question)
    found_names: list[str] = []
    for match in lexicons.CJK_DEMONSTRATIVE.finditer(question):
        head = _cjk_head(match.group(1))
        if match.group(1).startswith(lexicons.CJK_YEAR_HEAD):
            found_names.extend(years_in([short, body])[:1])
        else:
            found_names.extend(filter(None, [_cjk_noun(head, short_name, previous_question)]))
    if lexicons.CJK_PERSON_PRONOUN.search(question) and short_name and asked_person:
        found_names.append(short_name)
    if lexicons.CJK_THING_PRONOUN.search(question):
        topic = next(iter(cjk_terms(previous_question)), "") if asked_person else short_name
        found_names.extend(filter(None, [topic]))
    unique = [text for text in dict.fromkeys(found_names) if text not in question]
    return unique[:MAX_REFERENTS]
