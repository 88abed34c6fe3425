"""The reflector form: a grade on 1-10 (the loop's 0-1 score x 10, at least 1), and the suggestions the next
round uses, read leniently from whatever the grade model replied.

Read: the JSON asked for, dimensions on 1-10 or 0-100 ("7", "7/10", "70%"), an overall `score`, or prose
("Score: 6/10. Suggestions: - ..."). Anything unreadable gives no score and no suggestions (never raises);
suggestions that address a model are dropped, since they go into the next prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from models.lenient import extract_json_object
from retrieval.injection import is_instruction_like
from state.schemas import AnswerGrade, clean_suggestions

#: The seed's scale.
TEN_POINT_MIN = 1.0
TEN_POINT_MAX = 10.0
#: The four dimensions of a grade (AnswerGrade), each on 0-1.
DIMENSIONS = ("relevance", "accuracy", "completeness", "clarity")
#: Keys under which a reply may give an overall score, and its suggestions.
SCORE_KEYS = ("score", "overall", "overall_score", "rating", "reflection_score")
SUGGESTION_KEYS = ("suggestions", "suggestion", "improvements", "improvement", "fixes")
#: "7", "7.5", "7/10", "70%" (a number, then an optional denominator or percent sign).
_NUMBER = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?)|(%))?")
#: A score in prose: "score: 7/10", "Rating - 6", "overall score = 0.8".
_PROSE_SCORE = re.compile(r"\b(?:overall\s+)?(?:score|rating)\b\W{0,4}(\d+(?:\.\d+)?\s*(?:/\s*\d+|%)?)", re.I)
#: The header of a suggestion list in prose ("Suggestions:", "Improvements -"), and what follows on its line.
_PROSE_SUGGESTIONS = re.compile(r"^\s*(?:suggestions?|improvements?)\s*[:\-]\s*(.*)$", re.I)
_LIST_LINE = re.compile(r"^\s*(?:[-*\u2022]|\d{1,2}[.)])\s+\S")


@dataclass(frozen=True)
class Reflection:
    """What could be read from a grade model's reply; empty fields when nothing usable was there."""

    score: float | None = None  # overall, on 0-1
    dimensions: dict[str, float] = field(default_factory=dict)  # rescaled to 0-1
    suggestions: tuple[str, ...] = ()


def ten_point(score: float) -> float:
    """A 0-1 score on the seed's 1-10 scale: x 10, at least 1 (two decimals: grades have three on 0-1)."""
    return round(min(TEN_POINT_MAX, max(TEN_POINT_MIN, score * 10)), 2)


def _ratio(text: str) -> tuple[float, bool] | None:
    """(value, explicit) of "7/10" (0.7, True), "70%" (0.7, True) or "7" (7.0, False); None without one."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    number = float(match.group(1))
    if match.group(2):
        denominator = float(match.group(2))
        return (number / denominator, True) if denominator > 0 else None
    if match.group(3):
        return number / 100, True
    return number, False


def _number(value: Any) -> tuple[float, bool, bool] | None:
    """(value, explicit scale, written as an integer) of a JSON value; None when it holds no number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return float(value), False, True
    if isinstance(value, float):
        return value, False, False
    if isinstance(value, str):
        ratio = _ratio(value)
        if ratio is None:
            return None
        return ratio[0], ratio[1], "." not in value and not ratio[1]
    return None


def _unit(value: float, scale: float) -> float | None:
    """`value` on a 0-`scale` scale as 0-1; None when it does not fit."""
    unit = value / scale
    return unit if 0.0 <= unit <= 1.0 else None


def overall_score(value: Any) -> float | None:
    """An overall score as 0-1 ("7/10", "70%", 1-10, percent or a fraction); None when unreadable."""
    number = _number(value)
    if number is None:
        return None
    amount, explicit, integer = number
    if explicit:
        return _unit(amount, 1.0)
    if integer or amount > 1:
        return _unit(amount, TEN_POINT_MAX) if amount <= TEN_POINT_MAX else _unit(amount, 100.0)
    return _unit(amount, 1.0)


def dimension_scores(data: dict[str, Any]) -> dict[str, float]:
    """The dimensions a reply gave, as 0-1, on one scale chosen by the largest (0-1, 1-10 or percent)."""
    read: dict[str, tuple[float, bool]] = {}
    for name in DIMENSIONS:
        number = _number(data.get(name))
        if number is not None:
            read[name] = (number[0], number[1])
    implicit = [amount for amount, explicit in read.values() if not explicit]
    largest = max(implicit, default=0.0)
    scale = 1.0 if largest <= 1 else TEN_POINT_MAX if largest <= TEN_POINT_MAX else 100.0
    scores: dict[str, float] = {}
    for name, (amount, explicit) in read.items():
        unit = _unit(amount, 1.0 if explicit else scale)
        if unit is not None:
            scores[name] = round(unit, 3)
    return scores


def safe_suggestions(value: Any) -> tuple[str, ...]:
    """clean_suggestions without the ones that address a model (see the module docstring)."""
    return tuple(text for text in clean_suggestions(value) if not is_instruction_like(text))


def _prose_suggestions(lines: list[str]) -> list[str]:
    """The items after a "Suggestions:" header: the rest of its line, then its list lines."""
    for index, line in enumerate(lines):
        header = _PROSE_SUGGESTIONS.match(line)
        if header is None:
            continue
        items = [header.group(1)] if header.group(1).strip() else []
        for following in lines[index + 1 :]:
            if not _LIST_LINE.match(following):
                break
            items.append(following)
        return items
    return []


def _first(data: dict[str, Any], keys: tuple[str, ...]) -> Any:
    lowered = {str(key).strip().lower(): value for key, value in data.items()}
    return next((lowered[key] for key in keys if key in lowered), None)


def read_reflection(raw: str) -> Reflection:
    """What a grade model's reply says, read leniently (see the module docstring); never raises."""
    try:
        data = extract_json_object(raw or "")
    except (ValueError, TypeError, RecursionError):
        data = None
    if isinstance(data, dict):
        score = overall_score(_first(data, SCORE_KEYS))
        suggestions = _first(data, SUGGESTION_KEYS)
        return Reflection(score, dimension_scores(data), safe_suggestions(suggestions))
    text = raw or ""
    prose = _PROSE_SCORE.search(text)
    score = overall_score(prose.group(1)) if prose else None
    return Reflection(score, {}, safe_suggestions(_prose_suggestions(text.splitlines())))


def apply_reflection(grade: AnswerGrade, reflection: Reflection) -> AnswerGrade:
    """`grade` with the reply's rescaled dimensions (or its overall score on all four) and its suggestions."""
    update: dict[str, Any] = dict(reflection.dimensions)
    if not update and reflection.score is not None:
        update = {name: round(reflection.score, 3) for name in DIMENSIONS}
    suggestions = list(reflection.suggestions) or [
        text for text in grade.suggestions if not is_instruction_like(text)
    ]
    return grade.model_copy(update={**update, "suggestions": suggestions})
