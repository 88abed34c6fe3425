"""Structured-output schemas (what models are asked to return) and the plain records nodes exchange.

Each schema has a documented default: the value a node falls back to when a model returns garbage twice.
The records are `typing_extensions.TypedDict`: on Python < 3.12 pydantic cannot build a JSON schema from a
`typing.TypedDict`, and the graph's input and output schemas (Studio's form, the server's) embed them.
"""

from __future__ import annotations

import re
from typing import Any, Literal, NotRequired, get_args

from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypedDict

from state.answer_record import AnswerRecord

QueryType = Literal[
    "SIMPLE_FACT", "COMPLEX_REASONING", "MULTI_HOP", "COMPARISON", "AGGREGATION", "OPEN_ENDED"
]
QUERY_TYPES: tuple[str, ...] = get_args(QueryType)
Strategy = Literal["DIRECT", "HYDE", "QUERY_DECOMPOSITION", "ITERATIVE", "HYBRID"]
RewriteMethod = Literal["multi", "hyde", "decompose", "expand", "none"]


class QueryAnalysis(BaseModel):
    """What kind of question this is. Default (model failure): the heuristic analysis of the question."""

    query_type: QueryType = Field("SIMPLE_FACT", description="The question's type.")
    complexity: int = Field(
        3, ge=1, le=10, description="1 = one fact lookup, 10 = long multi-step reasoning."
    )
    needs_retrieval: bool = Field(True, description="False only for greetings, chit-chat or pure arithmetic.")
    wants_details: bool = Field(False, description="The question asks how, or explicitly for details.")
    source: Literal["llm", "heuristic"] = Field("heuristic", description="Who produced this analysis.")


class RewrittenQueries(BaseModel):
    """Search queries produced by multi-query rewriting or expansion. Default: no extra queries."""

    queries: list[str] = Field(default_factory=list, description="Alternative search queries.")


class SubQuestions(BaseModel):
    """Decomposition of a complex question. Default: no sub-questions (the original is searched)."""

    questions: list[str] = Field(default_factory=list, description="2-4 simpler questions.")


#: Longest explanation the grammar allows: without a bound a small model may copy passages until the
#: token reserve runs out and the JSON object never closes.
EXPLANATION_MAX_CHARS = 400


class AnswerReply(BaseModel):
    """The answer as a JSON object (answer_decoding=json_schema): the answer prompt's two lines as required
    fields, so the grammar makes a small model give both. No default: the node's fallback is the extractive
    draft."""

    answer: str = Field(description="the short answer only: a name, a number, a date, a few words, or yes/no")
    explanation: str = Field(
        description="one sentence from the sources that supports it, ending like [1]",
        max_length=EXPLANATION_MAX_CHARS,
    )


class RelevanceGrades(BaseModel):
    """LLM relevance grades of numbered passages. Default: none judged relevant by the model."""

    relevant: list[int] = Field(default_factory=list, description="Numbers of the passages that help answer.")


#: Suggestions a grade keeps, at most, and characters of each (a grammar-bound model still gets a short list).
MAX_SUGGESTIONS = 3
SUGGESTION_MAX_CHARS = 200
#: Leading list markers of a suggestion ("- ", "* ", "1. ", "2) ").
_LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022]+|\d{1,2}[.)])\s*")
#: Replies that mean "no suggestion".
_NO_SUGGESTION = frozenset({"", "none", "n/a", "na", "null", "nothing", "no suggestions", "-", "无"})


def clean_suggestions(value: Any) -> list[str]:
    """Suggestions from whatever a model wrote (a list or lines), cleaned, deduplicated and capped."""
    if value is None:
        return []
    items = value.splitlines() if isinstance(value, str) else value if isinstance(value, list | tuple) else []
    cleaned: list[str] = []
    for item in items:
        text = _LIST_MARKER.sub("", " ".join(str(item).split()))[:SUGGESTION_MAX_CHARS].strip()
        if text.casefold().rstrip(".") not in _NO_SUGGESTION and text not in cleaned:
            cleaned.append(text)
    return cleaned[:MAX_SUGGESTIONS]


class AnswerGrade(BaseModel):
    """4-dimension answer score, groundedness and suggestions. Default: all zero, no suggestion."""

    grounded: bool = Field(False, description="Every claim is supported by the sources.")
    answers_question: bool = Field(False, description="The answer addresses the question.")
    relevance: float = Field(0.0, ge=0.0, le=1.0)
    accuracy: float = Field(0.0, ge=0.0, le=1.0)
    completeness: float = Field(0.0, ge=0.0, le=1.0)
    clarity: float = Field(0.0, ge=0.0, le=1.0)
    suggestions: list[str] = Field(
        default_factory=list,
        max_length=MAX_SUGGESTIONS,
        description="Up to 3 short, concrete fixes for the next attempt; empty when the answer is good.",
    )

    @field_validator("suggestions", mode="before")
    @classmethod
    def _lenient_suggestions(cls, value: Any) -> list[str]:
        return clean_suggestions(value)


class SearchQuery(TypedDict):
    """One retrieval to run: `text` for keyword search, `dense_text` (HyDE passage or text) for vectors."""

    text: str
    dense_text: str
    purpose: str  # original | variant | hyde | subquestion | expansion | reformulation | hop


class RetrievedDoc(TypedDict):
    """A retrieved passage as it travels through the graph (JSON-serialisable for the checkpointer)."""

    chunk_id: str
    text: str
    source: str
    title: str
    page: int
    doc_id: str
    score: float
    relevance: float  # set by grade_retrieval (-1 before grading)
    query: str
    metadata: dict[str, Any]


class Citation(TypedDict):
    """A `[n]` marker of the final answer resolved to its source."""

    marker: int
    chunk_id: str
    source: str
    title: str
    page: int
    doc_id: str
    confidence: float  # support of the citing sentences by this source, in [0, 1]
    inferred: bool  # no marker: attached by support matching
    spans: list[list[int]]  # [start, end] offsets of the supporting sentences in the chunk's text
    kind: str  # "document" or "memory" (source `memory:<id>`)


class AnswerCandidate(TypedDict):
    """An answer attempt with its grade; the best one is kept across Self-RAG rounds."""

    text: str
    score: float
    grounded: bool
    round: int
    doc_ids: list[str]
    record: NotRequired[AnswerRecord]  # absent in older checkpointed threads
