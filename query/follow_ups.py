"""Follow-up questions made self-contained without a model (pronouns, ellipsis, "what about X?").

Why the previous answer too: what a follow-up points at ("the mountain it stands on") is often named only by
the answer (query/referents.py); without answers the previous question's terms are carried instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.keyword import analyze
from query import lexicons
from query.referents import has_reference, referents
from query.text import capitalised_phrases, content_words, dedupe, is_chinese, norm, quoted_titles, words_of

#: Terms of the previous question appended to a follow-up, at most.
MAX_CARRIED_TERMS = 6
#: A follow-up with at most this many content terms (Chinese: characters) and no name is elliptical.
ELLIPTICAL_MAX_TERMS = 2
ELLIPTICAL_MAX_CJK_CHARS = 4


def _pronoun_before_name(text: str) -> bool:
    """A third-person pronoun before any name of the question ("Does it support PDF?"), so it points back."""
    names = capitalised_phrases(text)
    first_name = min((text.find(name) for name in names if name in text), default=len(text))
    return any(
        match.group(0).lower() in lexicons.FOLLOW_UP_PRONOUNS and match.start() < first_name
        for match in re.finditer(r"\b[A-Za-z']+\b", text)
    )


def is_follow_up(question: str) -> bool:
    """Whether a question leans on the conversation (pronouns, ellipsis, "what about ...")."""
    text = question.strip()
    if is_chinese(text):
        return (
            bool(lexicons.CJK_FOLLOW_UP.search(text))
            or len(lexicons.CJK.findall(text)) <= ELLIPTICAL_MAX_CJK_CHARS
        )
    if not words_of(text):
        return False
    if lexicons.FOLLOW_UP_OPENERS.match(text) or _pronoun_before_name(text):
        return True
    return len(content_words(text)) <= ELLIPTICAL_MAX_TERMS and not capitalised_phrases(text)


def salient_terms(text: str) -> list[str]:
    """The terms that carry a question's topic: titles and names first, then the other content words."""
    if is_chinese(text):
        return dedupe([*quoted_titles(text), *content_words(text)])
    names = [*quoted_titles(text), *capitalised_phrases(text)]
    covered = {word.lower() for name in names for word in words_of(name)}
    others = [word for word in content_words(text) if word.lower() not in covered]
    return dedupe([*names, *others])


def _switched_subject(question: str, previous: str) -> str | None:
    """The previous question asked of another entity ("What about Tesla?"), or None."""
    if is_chinese(question):
        match = lexicons.CJK_SWITCH.match(question.strip())
        if not match or lexicons.CJK_FOLLOW_UP_PRONOUN.search(match.group(1)):
            return None
        new_subject = match.group(1).strip()
        old_subjects = [*quoted_titles(previous), *content_words(previous)]
    else:
        match = lexicons.SWITCH_ENTITY.match(question.strip())
        if not match:
            return None
        new_subject = (match.group(1) or match.group(2) or "").strip()
        if not capitalised_phrases(new_subject) and not quoted_titles(new_subject):
            return None
        old_subjects = [*quoted_titles(previous), *capitalised_phrases(previous)]
    if not new_subject or not old_subjects or old_subjects[0] not in previous:
        return None
    return previous.replace(old_subjects[0], new_subject, 1)


def _with_referents(text: str, names: Sequence[str], separator: str = ", ") -> str:
    """The follow-up with `names` appended in parentheses (its own words kept)."""
    if is_chinese(text):
        return f"{text}（{' '.join(names)}）"
    return f"{text} ({separator.join(names)})"


def _carry_previous_terms(text: str, history_texts: Sequence[str]) -> str:
    """The follow-up with the salient terms of the latest previous question that has some it lacks."""
    present = {norm(term) for term in content_words(text)}
    text_terms = set(analyze(text))
    for previous in reversed(history_texts):
        carried = [
            term
            for term in salient_terms(previous)
            if norm(term) not in present and not set(analyze(term)) <= text_terms
        ][:MAX_CARRIED_TERMS]
        if carried:
            return _with_referents(text, carried, separator=" ")
    return text


def heuristic_standalone(
    question: str, history_texts: Sequence[str], answer_texts: Sequence[str] = ()
) -> str:
    """A follow-up made self-contained from the previous questions and answers (oldest first).

    "What about X?" / "那X呢？" re-asks the previous question about X; phrases that point back get what they
    stand for (query.referents) appended in parentheses; other follow-ups get the latest question's salient
    terms. A self-contained question, or one without history, comes back unchanged."""
    text = question.strip()
    if not history_texts:
        return text
    previous_answer = answer_texts[-1] if answer_texts else ""
    pointing = bool(previous_answer.strip()) and has_reference(text, history_texts[-1], previous_answer)
    if not is_follow_up(text) and not pointing:
        return text
    switched = _switched_subject(text, history_texts[-1])
    if switched:
        return switched
    names = referents(text, history_texts[-1], previous_answer)
    if names:
        return _with_referents(text, names)
    return _carry_previous_terms(text, history_texts)
