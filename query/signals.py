"""Cues that a question is a comparison or a bridge (multi-hop) question, in English and Chinese.

A claim without a question word is single-hop; a bridge question describes a second entity inside it (a
relative clause, a participle phrase, a relational noun, a possessive, a quoted title). Each cue adds to a
score; the sum decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.keyword import ENGLISH_STOP_WORDS
from query import lexicons
from query.text import capitalised_phrases, first_word, is_chinese, quoted_titles, words_of

#: Bridge score from which an English question counts as multi-hop: one strong cue (a relative clause, a
#: participle phrase, a relational noun) or two weak ones (two names, a quoted title, a long question...).
MULTI_HOP_MIN_SCORE = 2
STRONG_CUE = 2
#: Score from which weak cues alone (names, length, an in-situ question word...) make a question multi-hop:
#: long single-hop questions (SQuAD's) collect two or three of them without describing a second entity.
WEAK_ONLY_MIN_SCORE = 3
#: Multi-word names from which a question counts as relating two entities (a strong cue).
TWO_FULL_NAMES = 2
WEAK_CUE = 1
#: Word counts from which a question gets a length cue / extra complexity.
LONG_QUESTION_WORDS = 14
VERY_LONG_QUESTION_WORDS = 22


@dataclass
class Signals:
    """What the analysis saw in a question (kept for debugging and tests)."""

    chinese: bool
    claim: bool = False
    comparison: bool = False
    bridge_score: int = 0
    strong_cues: int = 0
    cues: list[str] = field(default_factory=list)


def is_interrogative(question: str) -> bool:
    """A question (mark, question word, auxiliary or imperative opening) rather than a statement."""
    stripped = question.strip()
    if stripped.endswith(("?", "？")):
        return True
    first = first_word(stripped)
    if first in lexicons.WH_WORDS or first in lexicons.AUXILIARIES or first in lexicons.IMPERATIVES:
        return True
    if is_chinese(stripped):
        return bool(lexicons.CJK_QUESTION_WORDS.search(stripped))
    # Mid-sentence "which" / "where" / "when" are mostly relative words in statements; "what" is not.
    return bool(re.search(r"\b(what|whom)\b", stripped, re.IGNORECASE))


@dataclass(frozen=True)
class RelativeClause:
    """A relative clause found in a question: the noun it describes and where it starts."""

    head: str
    head_index: int
    """Words before the head noun."""
    head_end: int
    """Character offset just after the head noun."""
    clause_start: int
    """Character offset of the relative word (or of the preposition before it)."""
    pronoun: str
    comma: bool


def relative_clauses(question: str) -> list[RelativeClause]:
    """Relative clauses: "the woman who played", "the league for which", "the casino that X is on"."""
    found: list[RelativeClause] = []
    for match in lexicons.RELATIVE_PRONOUN.finditer(question):
        head, comma, preposition, pronoun, _following = match.groups()
        lowered = head.lower()
        before = words_of(question[: match.start()])
        if lowered in lexicons.WH_WORDS or lowered in lexicons.NON_RELATIVE_HEADS or not before and not comma:
            continue
        if preposition and pronoun.lower() not in ("which", "whom"):
            continue
        if pronoun.lower() == "that" and not preposition and not comma:
            after_determiner = bool(before) and before[-1].lower() in lexicons.DETERMINERS
            if (lowered in lexicons.THAT_VERBS or lowered.endswith("ed")) and not after_determiner:
                continue
        found.append(
            RelativeClause(
                head=head,
                head_index=len(before),
                head_end=match.end(1),
                clause_start=match.start(3) if preposition else match.start(4),
                pronoun=pronoun.lower(),
                comma=bool(comma),
            )
        )
    return found


def defining(lowered: list[str], index: int) -> bool:
    """Whether a description at word `index` defines the answer itself ("Who is the man who ...")."""
    if len(lowered) < 2 or lowered[0] not in lexicons.DEFINING_OPENERS or lowered[1] not in lexicons.COPULAS:
        return False
    naming = len(lowered) > 3 and lowered[3] in lexicons.NAMING_NOUNS
    return index <= lexicons.DEFINING_MAX_INDEX or naming and index <= lexicons.DEFINING_MAX_INDEX + 3


def relational(word: str) -> bool:
    lowered = word.lower().removeprefix("co-")
    return (
        lowered in lexicons.RELATIONAL_NOUNS
        or lowered.endswith("s")
        and lowered[:-1] in lexicons.RELATIONAL_NOUNS
    )


def _participle(word: str) -> bool:
    return (
        word in lexicons.IRREGULAR_PARTICIPLES
        or len(word) >= 5
        and word.endswith("ed")
        and word not in lexicons.NOT_PARTICIPLES
    )


def joined_entities(question: str) -> tuple[str, str] | None:
    """Two capitalised phrases joined by "and" ("Alma Brecht and Tomas Ferrer"), or None."""
    names = capitalised_phrases(question)
    for left in names:
        for right in names:
            if left != right and re.search(
                re.escape(left) + r",?\s+and\s+(?:the\s+)?" + re.escape(right), question
            ):
                return left, right
    return None


def _english_comparison(question: str, lowered: list[str]) -> str | None:
    """The comparison cue of an English question, or None."""
    first = lowered[0] if lowered else ""
    comparative = any(word in lexicons.COMPARATIVES for word in lowered)
    names = capitalised_phrases(question) + quoted_titles(question)
    joined = joined_entities(question)
    if " or " in f" {question.lower()} " and (
        first in lexicons.WH_WORDS or comparative or "which" in lowered or "who" in lowered
    ):
        return "choice between two"
    if lexicons.COMPARISON_WORDS.search(question) and (
        " and " in question or " between " in question.lower()
    ):
        return "shared or different property"
    if joined and first in lexicons.AUXILIARIES:
        return "yes/no about two entities"
    if joined and comparative:
        return "comparative between two"
    if joined and (
        re.search(r"\b(are|were|have|do)\b", question) or all(len(side.split()) > 1 for side in joined)
    ):
        return "question about two entities"
    if (
        comparative
        and len(names) >= 2
        and (first in lexicons.AUXILIARIES or re.search(r"\bthan\b", question))
    ):
        return "comparative between two"
    return None


def names_in(text: str) -> bool:
    """Whether a piece of a question names something (a capitalised name, a quoted title or a number)."""
    return bool(capitalised_phrases(text) or quoted_titles(text) or re.search(r"\d", text))


def _clause_text(question: str, start: int) -> str:
    """The words of a clause from `start` to the next comma (or the end of the question)."""
    return question[start:].split(",", 1)[0]


#: "After X died, who ...": a leading adverbial clause, then the question proper after a comma.
_QUESTION_AFTER_COMMA = re.compile(r",\s*(what|which|who|whom|whose|when|where|how)\b", re.IGNORECASE)


def question_start(question: str, lowered: list[str]) -> int:
    """Offset of the question proper, after a leading adverbial clause ("If ..., what ..."), else 0."""
    if lowered[:1] and lowered[0] in lexicons.WH_WORDS | lexicons.AUXILIARIES:
        return 0
    match = _QUESTION_AFTER_COMMA.search(question)
    return match.start(1) if match else 0


def _english_bridge(question: str, words: list[str], lowered: list[str]) -> tuple[int, int, list[str]]:
    """Score of the cues that a second entity is described inside the question, and how many were strong."""
    cues: list[str] = []
    first = lowered[0] if lowered else ""
    start = question_start(question, lowered)
    found = [
        _clause_cues(question, lowered, start, cues),
        _participle_cues(question, lowered, first, cues),
        _relation_cues(question, lowered, cues),
        _surface_cues(question, words, lowered, first, start, cues),
    ]
    return sum(score for score, _ in found), sum(strong for _, strong in found), cues


def _clause_cues(question: str, lowered: list[str], start: int, cues: list[str]) -> tuple[int, int]:
    """(score, strong cues) of the first relative clause, appending its cue to `cues`."""
    score = strong = 0
    clauses = [clause for clause in relative_clauses(question) if not start or clause.clause_start != start]
    if clauses:
        clause = clauses[0]
        if defining(lowered, clause.head_index) and not clause.comma:
            cues.append("relative clause defining the answer")
            score += WEAK_CUE
        elif names_in(_clause_text(question, clause.clause_start)):
            cues.append(f"relative clause ({clause.head} {clause.pronoun})")
            score += STRONG_CUE
            strong += 1
        else:
            cues.append(f"relative clause without a name ({clause.head} {clause.pronoun})")
            score += WEAK_CUE
    return score, strong


def _participle_cues(question: str, lowered: list[str], first: str, cues: list[str]) -> tuple[int, int]:
    """(score, strong cues) of the first participle phrase, appending its cue to `cues`."""
    score = strong = 0
    # "When was X built in ...", "Was X directed by ...": the first participle is the main (passive) verb.
    passive_opening = first in lexicons.AUXILIARIES or (
        len(lowered) > 1
        and first in lexicons.WH_WORDS - lexicons.DEFINING_OPENERS
        and lowered[1] in lexicons.COPULAS
    )
    for number, match in enumerate(lexicons.PARTICIPLE_PHRASE.finditer(question)):
        before, participle, preposition = (
            match.group(1).lower(),
            match.group(2).lower(),
            match.group(3).lower(),
        )
        if not _participle(participle):
            continue
        index = len(words_of(question[: match.start()]))
        # "Which group benefited from ...": right after the question word's noun it is the main verb.
        after_wh_noun = index == 1 and first in lexicons.WH_WORDS
        main_verb = passive_opening and number == 0 or defining(lowered, index) or after_wh_noun
        if before in lexicons.PASSIVE_HELPERS or main_verb:
            if preposition == "by":
                cues.append(f"passive ({participle} by)")
                score += WEAK_CUE
        elif before not in ENGLISH_STOP_WORDS and before not in lexicons.WH_WORDS:
            named = names_in(_clause_text(question, match.start(3)))
            cues.append(f"participle phrase ({before} {participle})" + ("" if named else " without a name"))
            score += STRONG_CUE if named else WEAK_CUE
            strong += named
        break
    return score, strong


def _relation_cues(question: str, lowered: list[str], cues: list[str]) -> tuple[int, int]:
    """(score, strong cues) of a relational noun and a possessive, appending their cues to `cues`."""
    score = strong = 0
    for index, word in enumerate(lowered[:-1]):
        pointing = lowered[index + 2 : index + 3] in (["this"], ["these"], ["that"], ["those"])
        if (
            relational(word)
            and lowered[index + 1] == "of"
            and not defining(lowered, index - 1)
            and not pointing
        ):
            cues.append(f"relational noun ({word} of)")
            score += STRONG_CUE
            strong += 1
            break
    possessive = lexicons.POSSESSIVE.search(question)
    if possessive:
        index = len(words_of(question[: possessive.start()]))
        relation = relational(possessive.group(2)) and not defining(lowered, index)
        cues.append("possessive relation" if relation else "possessive")
        score += STRONG_CUE if relation else WEAK_CUE
        strong += relation
    return score, strong


def _surface_cues(
    question: str, words: list[str], lowered: list[str], first: str, start: int, cues: list[str]
) -> tuple[int, int]:
    """(score, strong cues) of the question's surface (superlatives, titles, names, length...)."""
    score = strong = 0
    if lexicons.SUPERLATIVE_DESCRIPTION.search(question):
        cues.append("superlative description")
        score += WEAK_CUE
    titles = quoted_titles(question)
    names = capitalised_phrases(question)
    if titles:
        cues.append("quoted title")
        score += WEAK_CUE
    if len(names) + len([title for title in titles if title not in names]) >= 2:
        cues.append("two named entities")
        score += WEAK_CUE
        # Two full names relate two entities, which one passage rarely covers; one-word names do not count.
        if sum(len(name.split()) > 1 for name in names) >= TWO_FULL_NAMES:
            cues.append("two multi-word names")
            score += WEAK_CUE
            strong += 1
    if len(words) >= LONG_QUESTION_WORDS:
        cues.append("long question")
        score += WEAK_CUE
    if len(words) >= VERY_LONG_QUESTION_WORDS:
        score += WEAK_CUE
    if (
        first not in lexicons.WH_WORDS | lexicons.AUXILIARIES | lexicons.IMPERATIVES | lexicons.PREPOSITIONS
        and not start
    ):
        if re.search(r"\b(what|which|who|whom|whose|when|where|how)\b", question, re.IGNORECASE):
            cues.append("statement with an embedded question")
            score += WEAK_CUE
    if "also" in lowered:
        cues.append("also: a second fact about the same entity")
        score += WEAK_CUE
    if lowered.count("of") >= 2:
        cues.append("nested of-phrases")
        score += WEAK_CUE
    return score, strong


def english_signals(question: str) -> Signals:
    """Comparison and bridge cues of an English question."""
    words = words_of(question)
    lowered = [word.lower() for word in words]
    signals = Signals(chinese=False)
    if not is_interrogative(question):
        signals.claim = True
        signals.cues.append("statement: a claim to verify")
        return signals
    comparison = _english_comparison(question, lowered)
    if comparison:
        signals.comparison = True
        signals.cues.append(comparison)
    signals.bridge_score, signals.strong_cues, cues = _english_bridge(question, words, lowered)
    signals.cues.extend(cues)
    return signals


def chinese_signals(question: str) -> Signals:
    """Comparison and bridge cues of a Chinese question."""
    signals = Signals(chinese=True)
    comparison = lexicons.CJK_COMPARISON.search(question)
    two_things = bool(lexicons.CJK_JOIN.search(question)) or "还是" in question
    if comparison and two_things:
        signals.comparison = True
        signals.cues.append(f"比较 ({comparison.group(0)})")
    if lexicons.CJK_BRIDGE.search(question):
        signals.bridge_score += MULTI_HOP_MIN_SCORE
        signals.strong_cues += 1
        signals.cues.append("定语从句描述另一实体")
    if lexicons.CJK_RELATIONAL.search(question):
        signals.bridge_score += MULTI_HOP_MIN_SCORE
        signals.strong_cues += 1
        signals.cues.append("关系名词链")
    return signals


def question_signals(question: str) -> Signals:
    """The cues of a question in its language."""
    return chinese_signals(question) if is_chinese(question) else english_signals(question)
