"""`python -m benchmarks graders`: how well grade_retrieval's two graders tell relevant passages from
irrelevant ones.

Why this benchmark: `grader=auto` picks the score grader for the weak embedded model and the LLM grader for
a strong endpoint; that choice should rest on measured numbers for both graders on the same passages.

How it is set up, and why:
- the questions, corpus and index are those of `rag eval qa` (the pooled paragraphs of the first `limit`
  questions, ingested by the product into the same dedicated directory and collection), so a QA run and a
  grader run over the same questions share one index and the passages are those the QA pipelines see;
- each question retrieves `top_k` passages with the retrieve node's own search (`scoped_search`, hybrid,
  through the Searcher of `Resources`) and turns the hits into RetrievedDocs with `to_retrieved`, so the
  score grader gets the same dense and BM25 scores it gets in the graph;
- gold label: a passage is relevant iff its doc_id is one of the question's supporting passages (HotpotQA:
  supporting-fact titles; CMRC: the question's paragraph id);
- score grader: relevant iff `score_relevance` >= the context's `relevance_threshold`, as in the node;
- LLM grader: the node's own call (`llm_relevance_grades`), one call per question for up to
  LLM_GRADE_MAX_PASSAGES passages (more passages are graded in further calls of that size). A reply that is
  unusable (None) leaves those passages with the score grader's verdict, which is what grade_retrieval does,
  so the LLM row measures the grader as the product runs it; `failed_replies` and `fallback_passages` say
  how much of it was the fallback.
`default_grader` names the grader the engine uses under these settings (`auto`: by the grading model's
strength), so the report says whether that choice is the better one. Scoring lives in
benchmarks/grader_scoring.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.grader_scoring import base_rate, binary_metrics, cost_summary, ranking_quality
from config.settings import Settings
from evals.datasets import QAExample
from evals.environment import machine_description, model_description
from evals.eval_index import ProgressFactory, index_settings, ingest_corpus, no_progress
from evals.qa import (
    QA_COLLECTION,
    ResourcesFactory,
    dataset_name,
    load_qa_examples,
    prepare_corpus,
    select_examples,
)
from nodes.grade_retrieval import (
    LLM_GRADE_MAX_PASSAGES,
    llm_relevance_grades,
    score_relevance,
    use_llm_grader,
)
from nodes.resources import Resources, use_resources
from nodes.retrieve import scoped_search, to_retrieved
from retrieval.search import Searcher
from state.context import Context
from state.schemas import RetrievedDoc

logger = logging.getLogger(__name__)

DEFAULT_LIMIT = 30
DEFAULT_TOP_K = 8
#: Grader names: the report's keys, and the values of the context's `grader` field.
SCORE_GRADER = "score"
LLM_GRADER = "llm"
DIGITS = 4


@dataclass
class QuestionGrades:
    """One question's passages: gold labels, the score grader's scores and verdicts, the LLM's verdicts."""

    labels: list[bool]
    scores: list[float]
    score_verdicts: list[bool]
    score_ms: float
    llm_verdicts: list[bool] = field(default_factory=list)
    llm_ms: float = 0.0
    llm_calls: int = 0
    failed_replies: int = 0
    fallback_passages: int = 0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0


@dataclass
class LLMVerdicts:
    """The LLM grader's verdicts on one question's passages and what they cost."""

    verdicts: list[bool]
    calls: int = 0
    failed_replies: int = 0
    fallback_passages: int = 0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0


def relevance_labels(docs: Sequence[RetrievedDoc], supporting: set[str]) -> list[bool]:
    """Gold label per passage: its document is one of the question's supporting passages."""
    return [doc["doc_id"] in supporting for doc in docs]


def retrieve_passages(searcher: Searcher, question: str, context: Context, tenant: str) -> list[RetrievedDoc]:
    """The question's top `context.top_k` passages, searched as the retrieve node searches a DIRECT query."""
    hits = scoped_search(
        searcher, question, question, context=context, tenant=tenant, filters=None, conversation_id=""
    )
    return [to_retrieved(hit, question) for hit in hits]


def score_grades(
    question: str, docs: Sequence[RetrievedDoc], threshold: float
) -> tuple[list[float], list[bool]]:
    """The score grader: each passage's `score_relevance` and whether it reaches `threshold`."""
    scores = [score_relevance(question, doc) for doc in docs]
    return scores, [score >= threshold for score in scores]


def llm_grades(
    question: str, docs: Sequence[RetrievedDoc], context: Context, fallback: Sequence[bool]
) -> LLMVerdicts:
    """The LLM grader's verdicts, LLM_GRADE_MAX_PASSAGES passages per call (one call at the default top_k).

    A batch whose reply is unusable keeps `fallback` (the score grader's verdicts), as grade_retrieval does.
    """
    result = LLMVerdicts(verdicts=[])
    for start in range(0, len(docs), LLM_GRADE_MAX_PASSAGES):
        batch = list(docs[start : start + LLM_GRADE_MAX_PASSAGES])
        chosen, accounting = llm_relevance_grades(question, batch, context)
        result.calls += int(accounting.get("llm_calls", 0))
        usage = accounting.get("usage") or {}
        result.prompt_tokens += float(usage.get("prompt_tokens", 0.0))
        result.completion_tokens += float(usage.get("completion_tokens", 0.0))
        if chosen is None:
            result.failed_replies += 1
            result.fallback_passages += len(batch)
            result.verdicts.extend(fallback[start : start + len(batch)])
        else:
            result.verdicts.extend(number in chosen for number in range(1, len(batch) + 1))
    return result


def grade_question(
    example: QAExample, docs: Sequence[RetrievedDoc], context: Context, *, llm: bool
) -> QuestionGrades:
    """Label and grade one question's passages with the score grader and, when `llm`, the LLM grader."""
    labels = relevance_labels(docs, example.supporting)
    started = time.perf_counter()
    scores, score_verdicts = score_grades(example.question, docs, context.relevance_threshold)
    grades = QuestionGrades(
        labels=labels,
        scores=scores,
        score_verdicts=score_verdicts,
        score_ms=(time.perf_counter() - started) * 1000,
    )
    if llm and docs:
        started = time.perf_counter()
        verdicts = llm_grades(example.question, docs, context, score_verdicts)
        grades.llm_ms = (time.perf_counter() - started) * 1000
        grades.llm_verdicts = verdicts.verdicts
        grades.llm_calls = verdicts.calls
        grades.failed_replies = verdicts.failed_replies
        grades.fallback_passages = verdicts.fallback_passages
        grades.prompt_tokens = verdicts.prompt_tokens
        grades.completion_tokens = verdicts.completion_tokens
    return grades


def summarize(grades: Sequence[QuestionGrades], *, llm: bool) -> dict[str, dict[str, Any]]:
    """Per grader: the binary metrics against the gold labels, cost, and (score grader) ranking quality."""
    labels = [label for question in grades for label in question.labels]
    scores = [score for question in grades for score in question.scores]
    score_verdicts = [verdict for question in grades for verdict in question.score_verdicts]
    summary: dict[str, dict[str, Any]] = {
        SCORE_GRADER: {
            **binary_metrics(labels, score_verdicts),
            **ranking_quality(labels, scores),
            "llm_calls": 0,
            **cost_summary([question.score_ms for question in grades]),
            "failed_replies": 0,
        }
    }
    if llm:
        llm_verdicts = [verdict for question in grades for verdict in question.llm_verdicts]
        calls = sum(question.llm_calls for question in grades)
        summary[LLM_GRADER] = {
            **binary_metrics(labels, llm_verdicts),
            "llm_calls": calls,
            "llm_calls_per_question": round(calls / len(grades), DIGITS) if grades else None,
            **cost_summary([question.llm_ms for question in grades]),
            "failed_replies": sum(question.failed_replies for question in grades),
            "fallback_passages": sum(question.fallback_passages for question in grades),
            "prompt_tokens": round(sum(question.prompt_tokens for question in grades)),
            "completion_tokens": round(sum(question.completion_tokens for question in grades)),
        }
    return summary


def _warm_up(resources: Resources, context: Context, llm: bool) -> None:
    """Load the models before the clock starts: loading is not a question's grading time."""
    resources.searcher().embed_query("warm-up")
    if llm:
        resources.model("grade", context)


def run_grader_eval(
    dataset_path: Path,
    settings: Settings,
    *,
    limit: int = DEFAULT_LIMIT,
    top_k: int = DEFAULT_TOP_K,
    llm: bool = True,
    progress: ProgressFactory = no_progress,
    resources: ResourcesFactory = Resources,
) -> dict[str, Any]:
    """Grade the top `top_k` passages of the first `limit` questions with both graders (the score grader only
    when `llm` is False); return the report.

    `resources` builds the models and stores for the benchmark's data directory (tests pass fakes).
    """
    dataset_path = Path(dataset_path)
    name = dataset_name(dataset_path)
    examples = select_examples(load_qa_examples(dataset_path), limit)
    if not examples:
        raise ValueError(f"{dataset_path}: no questions")
    context = Context(collection=QA_COLLECTION, top_k=top_k)
    corpus_file, passages = prepare_corpus(examples, settings, name)
    eval_settings = index_settings(settings, f"qa-{name}", corpus_file)
    installed = resources(eval_settings)
    graded: list[QuestionGrades] = []
    with use_resources(installed):
        kb = installed.kb()
        try:
            ingest_corpus(kb, corpus_file, collection=QA_COLLECTION, progress=progress)
            default_grader = LLM_GRADER if use_llm_grader(Context()) else SCORE_GRADER
            _warm_up(installed, context, llm)
            searcher = installed.searcher()
            advance = progress("questions", len(examples))
            for example in examples:
                docs = retrieve_passages(searcher, example.question, context, kb.settings.default_tenant)
                graded.append(grade_question(example, docs, context, llm=llm))
                advance(1)
        finally:
            kb.close()
    labels = [label for question in graded for label in question.labels]
    return {
        "dataset": name,
        "questions": len(graded),
        "passages": len(labels),
        "top_k": top_k,
        "base_rate": base_rate(labels),
        "relevance_threshold": context.relevance_threshold,
        "default_grader": default_grader,
        "corpus_passages": len(passages),
        "machine": machine_description(),
        "model": model_description(settings),
        "embedding": settings.embedding_provider,
        "graders": summarize(graded, llm=llm),
    }
