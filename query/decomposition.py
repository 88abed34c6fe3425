"""Sub-questions without a model: comparisons per entity, bridge questions into inner and outer
question, joined clauses one by one.
"""

from __future__ import annotations

import re

from query import lexicons
from query.signals import defining, joined_entities, question_signals, relational, relative_clauses
from query.text import capitalised_phrases, content_words, dedupe, is_chinese, quoted_titles, words_of

#: Sub-questions of a decomposition, at most (each one is a search).
MAX_SUBQUESTIONS = 4


def _strip_question(text: str) -> str:
    return text.strip().rstrip("?？.。!！ ").strip()


def _comparison_entities(question: str) -> tuple[list[str], str]:
    """The entities a comparison is about and the property asked (the rest, without comparison words)."""
    text = _strip_question(question)
    if is_chinese(text):
        match = re.search(r"(.+?)还是(.+)", text)
        pair = re.search(
            r"([^，,和与跟及、]{1,12})[和与跟及、]([^，,和与跟及、]{1,12}?)(?=[都是在哪谁的更比有])", text
        )
        if match:
            left, right = lexicons.CJK_JOIN.split(match.group(1))[-1], re.split(r"[，,]", match.group(2))[0]
            rest = text.replace(left, "", 1).replace(right, "", 1).replace("还是", "")
        elif pair:
            left, right = pair.group(1), pair.group(2)
            rest = text[pair.end() :]
        else:
            return [], ""
        prop = lexicons.CJK_COMPARISON.sub("", lexicons.CJK_QUESTION_WORDS.sub("", rest)).strip(
            lexicons.CJK_FUNCTION_CHARS + "，, "
        )
        return [entity.strip(lexicons.CJK_FUNCTION_CHARS) for entity in (left, right) if entity.strip()], prop
    choice = re.search(
        r"(?:,|:|\bbetween\b|\bout of\b)\s*(?:the\s+)?([^,:?]+?),?\s+(?:or|and)\s+(?:the\s+)?([^,?]+)", text
    )
    entities: list[str] = []
    if choice and " or " in text:
        entities = [choice.group(1), choice.group(2)]
    else:
        joined = joined_entities(text)
        names = [*quoted_titles(text), *capitalised_phrases(text)]
        entities = list(joined) if joined else names[:2]
    entities = [re.sub(r"^(the|both)\s+", "", entity.strip(), flags=re.IGNORECASE) for entity in entities]
    rest = text
    for entity in entities:
        rest = rest.replace(entity, " ")
    property_words = [
        word
        for word in content_words(rest)
        if not lexicons.COMPARISON_WORDS.fullmatch(word)
        and word.lower() not in {"or", "and", "between", "out"}
    ]
    return [entity for entity in entities if entity], " ".join(property_words)


def _bridge_split(question: str) -> tuple[str, str] | None:
    """(inner question, outer question) of an English bridge question, or None: "What office was held by
    the woman who played X?" -> ("Who is the woman who played X?", "What office was held by the woman?")."""
    text = _strip_question(question)
    lowered = [word.lower() for word in words_of(text)]
    for clause in relative_clauses(text):
        if defining(lowered, clause.head_index) and not clause.comma:
            continue
        before = text[: clause.head_end]
        phrase_match = re.search(
            r"((?:the|a|an|this|that|its|his|her|their)\s+(?:[\w'’\-]+\s+){0,3}"
            + re.escape(clause.head)
            + r")$",
            before,
            re.IGNORECASE,
        )
        phrase = phrase_match.group(1) if phrase_match else clause.head
        rest = text[clause.clause_start :]
        outer_tail = ""
        if clause.comma and "," in rest:
            rest, outer_tail = rest.split(",", 1)
        elif (
            lowered[:1]
            and lowered[0] in lexicons.WH_WORDS
            and lowered[1:2]
            and lowered[1] in lexicons.AUXILIARIES
        ):
            # "When was the company that owns X founded": the last word is the main verb, not the clause's.
            tokens = rest.split()
            if len(tokens) > 3 and tokens[-1].islower() and tokens[-2][:1].isupper():
                rest, outer_tail = " ".join(tokens[:-1]), tokens[-1]
        asker = "Who" if clause.pronoun in ("who", "whom", "whose") else "What"
        inner = f"{asker} is {phrase[0].lower() + phrase[1:]} {rest.strip()}"
        outer = f"{before.rstrip(',')} {outer_tail.strip()}".strip()
        return f"{inner}?", f"{outer}?"
    relation = re.search(
        r"\b((?i:the)\s+([\w\-]+)\s+of\s+[^,?]+?)(?=\s+(?:is|was|are|were|has|had|did|does)\b|$)", text
    )
    if relation and relational(relation.group(2)):
        asker = (
            "Who"
            if relation.group(2).lower() not in {"headquarters", "capital", "company", "label", "team"}
            else "What"
        )
        phrase = relation.group(1)
        return f"{asker} is {phrase[0].lower() + phrase[1:]}?", f"{text}?"
    return None


def heuristic_subquestions(question: str, max_n: int) -> list[str]:
    """Simpler questions whose answers together answer `question` (empty when it does not split)."""
    text = question.strip()
    if not text or max_n < 1:
        return []
    signals = question_signals(text)
    pieces: list[str] = []
    if signals.comparison:
        entities, prop = _comparison_entities(text)
        if len(entities) >= 2:
            if is_chinese(text):
                pieces = [f"{entity}{prop}".strip() for entity in entities]
            else:
                pieces = [f"{entity} {prop}".strip() for entity in entities]
    if not pieces and not signals.chinese:
        split = _bridge_split(text)
        if split:
            pieces = list(split)
    if not pieces:
        if signals.chinese:
            clauses = re.split(r"[；;]|，?以及|，并且|，另外", _strip_question(text))
        else:
            clauses = re.split(
                r",?\s+and\s+(?=(?:what|which|who|whom|when|where|why|how|is|are|was|were|do|does|did)\b)",
                _strip_question(text),
                flags=re.IGNORECASE,
            )
        if len(clauses) >= 2:
            mark = "？" if signals.chinese else "?"
            pieces = [clause.strip() + mark for clause in clauses if clause.strip()]
            if not signals.chinese:
                pieces = [piece[0].upper() + piece[1:] for piece in pieces]
    return dedupe(pieces, exclude=[text])[:max_n]
