"""The topic of an English question: the noun phrase it asks about, with the name that scopes it
("background tasks" ... "in FastAPI"), read from a handful of question frames.

Why: a follow-up's "it" or "that parameter" usually stands for what the previous question was about, which
in technical documentation is rarely a capitalised name: there the capitalised word is often only the
scoping library ("FastAPI"), and searching for it returns everything about the library. A question outside
the frames, or whose phrase asks for an entity (a superlative, "the capital of X", a comparison), has no
topic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.keyword import ENGLISH_STOP_WORDS
from query import lexicons
from query.text import WORD

#: Words of a topic's noun phrase, at most (longer runs are clauses, not names of a concept).
TOPIC_MAX_WORDS = 5
#: Words of the name that scopes a topic ("in FastAPI", "of console.print"), at most.
SCOPE_MAX_WORDS = 3
#: Question words whose question can carry a topic (a "who" question asks for a person, not about a topic).
TOPIC_WH_WORDS = frozenset({"what", "how", "why", "when", "where"})
#: Auxiliaries of do-support and modals ("What does X do?", "How can I ...?").
DO_SUPPORT = frozenset(
    {"do", "does", "did", "can", "could", "should", "would", "will", "may", "might", "must"}
)
#: Subjects that make the next word the user's own verb ("How do I install X?").
USER_SUBJECTS = frozenset({"i", "you", "we", "one"})
#: Particles of a phrasal verb, skipped after the user's verb ("How do I set up X?").
VERB_PARTICLES = frozenset({"up", "out", "off", "down"})
#: Prepositions that end a noun phrase or introduce its scope.
TOPIC_PREPOSITIONS = lexicons.PREPOSITIONS | frozenset(
    {"with", "into", "about", "between", "within", "inside", "via", "over", "under", "through", "across"}
)
#: Prepositions whose object may name the topic's scope ("in FastAPI", "of httpx.get").
SCOPE_PREPOSITIONS = frozenset({"in", "of", "for", "with", "from", "on"})
#: Determiners skipped before a noun phrase.
TOPIC_DETERMINERS = frozenset({"a", "an", "the", "this", "that", "these", "those"})
#: Words that cannot be part of a topic's noun phrase.
FUNCTION_WORDS = ENGLISH_STOP_WORDS | lexicons.WH_WORDS | lexicons.AUXILIARIES | TOPIC_PREPOSITIONS
#: Words that cannot be the verb of a do-support question ("do" can: "What does X do?").
NOT_VERBS = (
    TOPIC_PREPOSITIONS | TOPIC_DETERMINERS | lexicons.WH_WORDS | frozenset({"not", "also", "only", "just"})
)
#: Characters inside a token that make it an identifier ("model_dump", "httpx.get", "redis-py").
IDENTIFIER_CHARS = re.compile(r"[_.\-]")


@dataclass(frozen=True)
class Topic:
    """The noun phrase a question asks about and the name that scopes it."""

    phrase: str
    """The noun phrase as spelled in the question, determiners dropped ("lifespan parameter")."""
    scope: str = ""
    """The preposition and name after it that scope the phrase ("of FastAPI"), or ""."""

    @property
    def text(self) -> str:
        """The phrase with its scope ("lifespan parameter of FastAPI")."""
        return f"{self.phrase} {self.scope}" if self.scope else self.phrase


def is_name_like(token: str) -> bool:
    """A capitalised word, a camel-case or code identifier ("FastAPI", "model_dump", "redis-py")."""
    return token[:1].isupper() or bool(IDENTIFIER_CHARS.search(token)) or token[1:] != token[1:].lower()


def _plain(token: str) -> bool:
    """A lower-case word that may be a verb (not an identifier, a name or a number)."""
    return token.isalpha() and token.islower()


def _asks_for_entity(words: list[str], after: list[str]) -> bool:
    """Whether a phrase describes an entity the answer names ("the tallest mountain", "the capital of X")."""
    first, head = words[0].lower(), words[-1].lower()
    superlative = first in {"most", "least"} or (first.endswith("est") and len(first) > len("best"))
    relational = (head in lexicons.RELATIONAL_NOUNS or head in lexicons.NAMING_NOUNS) and after[:1] == ["of"]
    return superlative or first in lexicons.ORDINALS or relational


def _noun_phrase(tokens: list[re.Match[str]], question: str) -> Topic | None:
    """The noun phrase at the start of `tokens` (determiners skipped) and the scope after it."""
    position = 0
    while position < len(tokens) and tokens[position].group(0).lower() in TOPIC_DETERMINERS:
        position += 1
    end = position
    while end < len(tokens) and end - position < TOPIC_MAX_WORDS:
        word = tokens[end].group(0)
        following = tokens[end + 1].group(0).lower() if end + 1 < len(tokens) else ""
        participle = word.lower().endswith("ed") and (not following or following in TOPIC_PREPOSITIONS)
        if word.lower() in FUNCTION_WORDS or (participle and end > position):
            break
        end += 1
    if end == position:
        return None
    words = [token.group(0) for token in tokens[position:end]]
    after = [token.group(0).lower() for token in tokens[end:]]
    if _asks_for_entity(words, after):
        return None
    phrase = question[tokens[position].start() : tokens[end - 1].end()]
    return Topic(phrase, _scope(tokens[end:], question))


def _scope(tokens: list[re.Match[str]], question: str) -> str:
    """ "in FastAPI" from the tokens after a noun phrase: a scoping preposition whose object is a name."""
    for index, token in enumerate(tokens):
        if token.group(0).lower() not in SCOPE_PREPOSITIONS:
            continue
        start = index + 1
        while start < len(tokens) and tokens[start].group(0).lower() in TOPIC_DETERMINERS:
            start += 1
        end = start
        while end < len(tokens) and end - start < SCOPE_MAX_WORDS and is_name_like(tokens[end].group(0)):
            end += 1
        if end > start:
            return f"{token.group(0)} {question[tokens[start].start() : tokens[end - 1].end()]}"
    return ""


def _subject_before_verb(tokens: list[re.Match[str]], question: str) -> Topic | None:
    """The subject of "<NP> <verb> [<prepositional phrases>]" ("the Depends function do in FastAPI")."""
    for index in range(len(tokens) - 1, 0, -1):
        word = tokens[index].group(0)
        before = tokens[index - 1].group(0).lower()
        if _plain(word) and word not in NOT_VERBS and before not in TOPIC_PREPOSITIONS:
            topic = _noun_phrase(tokens[:index], question)
            if topic is None or topic.scope:
                return topic
            return Topic(topic.phrase, _scope(tokens[index:], question))
    return None


def question_topic(question: str) -> Topic | None:
    """The noun phrase an English question asks about, with its scope; None outside the frames."""
    tokens = list(WORD.finditer(question))
    words = [token.group(0).lower() for token in tokens]
    if len(words) < 3 or words[0] not in TOPIC_WH_WORDS or lexicons.COMPARISON_WORDS.search(question):
        return None
    if words[0] == "what" and words[1] in lexicons.COPULAS:
        return _noun_phrase(tokens[2:], question)
    if words[1] not in DO_SUPPORT:
        return None
    if words[2] in USER_SUBJECTS:
        start = 4
        while start < len(words) and words[start] in VERB_PARTICLES:
            start += 1
        return _noun_phrase(tokens[start:], question) if start < len(tokens) else None
    return _subject_before_verb(tokens[2:], question)
