"""Query analysis without a model: query type, complexity, whether retrieval is needed (the weak-model
path and the LLM analyzer's fallback; query/__init__.py says why heuristics)."""

from __future__ import annotations

import re

from query import lexicons
from query.signals import (
    LONG_QUESTION_WORDS,
    MULTI_HOP_MIN_SCORE,
    VERY_LONG_QUESTION_WORDS,
    WEAK_ONLY_MIN_SCORE,
    Signals,
    question_signals,
)
from query.text import word_count
from state.schemas import QueryAnalysis, QueryType

#: Highest complexity of a SIMPLE_FACT (so that it stays a direct lookup).
SIMPLE_FACT_MAX_COMPLEXITY = 3
#: Base complexity per query type (then adjusted by length and cue strength), clamped to 1-10.
BASE_COMPLEXITY: dict[str, int] = {
    "SIMPLE_FACT": 2,
    "AGGREGATION": 5,
    "COMPARISON": 5,
    "MULTI_HOP": 6,
    "COMPLEX_REASONING": 6,
    "OPEN_ENDED": 5,
}
MIN_COMPLEXITY = 1
MAX_COMPLEXITY = 10


def needs_no_retrieval(question: str) -> bool:
    """Greetings, thanks, chit-chat and pure arithmetic: nothing in the documents can help."""
    stripped = question.strip()
    if not stripped:
        return True
    if lexicons.GREETINGS.match(stripped) or lexicons.CJK_GREETINGS.match(stripped):
        return True
    expression = lexicons.ARITHMETIC_PREFIX.sub("", stripped).rstrip("?？ ")
    return (
        bool(expression)
        and bool(lexicons.ARITHMETIC.match(expression))
        and bool(re.search(r"\d\s*[-+*/×÷^%]\s*\d", expression))
    )


def bridge(signals: Signals) -> bool:
    """A bridge question: enough cue score, and a strong cue (a second entity described) or many weak."""
    if signals.claim or signals.bridge_score < MULTI_HOP_MIN_SCORE:
        return False
    return signals.strong_cues > 0 or signals.bridge_score >= WEAK_ONLY_MIN_SCORE


def _query_type(question: str, signals: Signals) -> QueryType:
    if signals.comparison:
        return "COMPARISON"
    if bridge(signals):
        return "MULTI_HOP"
    if lexicons.OPEN_CUES.search(question):
        return "OPEN_ENDED"
    if lexicons.AGGREGATION_CUES.search(question):
        return "AGGREGATION"
    if lexicons.REASONING_CUES.search(question) and not signals.claim:
        return "COMPLEX_REASONING"
    return "SIMPLE_FACT"


def _complexity(question: str, query_type: QueryType, signals: Signals) -> int:
    value = BASE_COMPLEXITY[query_type]
    words = word_count(question)
    value += int(words >= LONG_QUESTION_WORDS) + int(words >= VERY_LONG_QUESTION_WORDS)
    if query_type == "MULTI_HOP":
        value += max(0, signals.bridge_score - MULTI_HOP_MIN_SCORE - 1)
    if query_type == "SIMPLE_FACT":
        value = min(value, SIMPLE_FACT_MAX_COMPLEXITY)
    return max(MIN_COMPLEXITY, min(MAX_COMPLEXITY, value))


def heuristic_analysis(question: str) -> QueryAnalysis:
    """Classify a question without a model (the weak-model path and the LLM analyzer's default)."""
    text = question.strip()
    if needs_no_retrieval(text):
        return QueryAnalysis(
            query_type="SIMPLE_FACT",
            complexity=1,
            needs_retrieval=False,
            wants_details=False,
            source="heuristic",
        )
    signals = question_signals(text)
    query_type = _query_type(text, signals)
    return QueryAnalysis(
        query_type=query_type,
        complexity=_complexity(text, query_type, signals),
        needs_retrieval=True,
        wants_details=bool(lexicons.DETAIL_CUES.search(text)),
        source="heuristic",
    )
