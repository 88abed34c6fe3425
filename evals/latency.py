"""`rag eval latency`: where a question's time goes in the agentic graph, and what the graph itself costs.

Each question runs streamed on its own thread with the SQLite checkpointer (as `rag ask` does), so the first
answer token is timed too. Overhead = wall - model - retrieval (the graph's own `timings_ms`): everything the
engine adds around the two unavoidable costs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from config.settings import Settings
from evals.datasets import read_questions
from evals.environment import load_average, machine_description, model_description
from evals.eval_index import ProgressFactory, no_progress
from evals.metrics import linear_percentile
from evals.qa import ResourcesFactory
from evals.qa_aggregate import COST_TIMING_KEYS
from graphs.runner import Session, new_thread_id
from nodes.resources import Resources, use_resources
from retrieval.ingest import ingest_paths
from state.context import Context

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO_ROOT / "samples" / "corpus"
SAMPLE_QUESTIONS = REPO_ROOT / "samples" / "questions.jsonl"
LATENCY_COLLECTION = "latency"
#: Median answer and first-token times targeted on an idle 2-core machine with the default model.
WALL_P50_TARGET_S = 15.0
FIRST_TOKEN_P50_TARGET_S = 5.0


def timed_turn(
    session: Session, question: str, context: Context
) -> tuple[dict[str, Any], float, float | None]:
    """(output state, wall ms, ms until the first answer token; None when no token was streamed, e.g. a
    "not found" written without the model) of one streamed turn on a new thread."""
    started = time.perf_counter()
    first_token_ms: float | None = None
    result: dict[str, Any] = {}
    for kind, payload in session.stream(question, thread_id=new_thread_id(), context=context):
        if kind == "token" and first_token_ms is None:
            first_token_ms = (time.perf_counter() - started) * 1000
        elif kind == "result":
            result = payload
    return result, (time.perf_counter() - started) * 1000, first_token_ms


def sample_questions(path: Path = SAMPLE_QUESTIONS) -> list[str]:
    """The questions about the sample corpus."""
    return read_questions(path)


def run_latency_eval(
    settings: Settings,
    *,
    questions: int = 50,
    corpus: Path = SAMPLE_CORPUS,
    questions_file: Path = SAMPLE_QUESTIONS,
    progress: ProgressFactory = no_progress,
    resources: ResourcesFactory = Resources,
) -> dict[str, Any]:
    """Ingest `corpus` into its own data dir, then time `questions` runs cycling through `questions_file`."""
    # The answer cache off: the warm-up asks the first question again, and a cache hit times no graph at all.
    eval_settings = settings.model_copy(
        update={"data_dir": settings.data_dir / "eval" / "latency", "cache_enabled": False}
    )
    installed = resources(eval_settings)
    with use_resources(installed):
        ingest_paths(installed.kb(), [corpus], collection=LATENCY_COLLECTION)
        return _time_questions(eval_settings, settings, sample_questions(questions_file), questions, progress)


def _time_questions(
    eval_settings: Settings,
    settings: Settings,
    pool: list[str],
    questions: int,
    progress: ProgressFactory,
) -> dict[str, Any]:
    if not pool:
        raise ValueError("the questions file holds no question")
    session = Session(eval_settings)
    context = Context(collection=LATENCY_COLLECTION)
    session.ask(pool[0], thread_id=new_thread_id(), context=context)  # warm-up: model and index loading
    advance = progress("questions", questions)
    walls, models, retrievals, overheads, calls, first_tokens = [], [], [], [], [], []
    per_node: dict[str, list[float]] = {}
    for index in range(questions):
        result, wall, first_token = timed_turn(session, pool[index % len(pool)], context)
        if first_token is not None:
            first_tokens.append(first_token)
        timings = result.get("timings_ms") or {}
        model_ms, retrieval_ms = timings.get("model", 0.0), timings.get("retrieval", 0.0)
        walls.append(wall)
        models.append(model_ms)
        retrievals.append(retrieval_ms)
        overheads.append(max(0.0, wall - model_ms - retrieval_ms))
        calls.append(result.get("llm_calls", 0))
        for node, value in timings.items():
            if node not in COST_TIMING_KEYS:
                per_node.setdefault(node, []).append(value)
        advance(1)
    wall_total = sum(walls)
    return {
        "questions": questions,
        "machine": machine_description(),
        "model": model_description(settings),
        "wall_s": round(wall_total / 1000, 2),
        "model_s": round(sum(models) / 1000, 2),
        "retrieval_s": round(sum(retrievals) / 1000, 2),
        "overhead_fraction": round(sum(overheads) / wall_total, 4) if wall_total else 0.0,
        "overhead_ms_per_question": round(sum(overheads) / questions, 2),
        "overhead_ms_p50": round(linear_percentile(overheads, 50), 2),
        "wall_ms_p50": round(linear_percentile(walls, 50), 1),
        "wall_ms_p95": round(linear_percentile(walls, 95), 1),
        "first_token_ms_p50": round(linear_percentile(first_tokens, 50), 1) if first_tokens else None,
        "first_token_ms_p95": round(linear_percentile(first_tokens, 95), 1) if first_tokens else None,
        "questions_with_streamed_answer": len(first_tokens),
        "targets": {"wall_p50_s": WALL_P50_TARGET_S, "first_token_p50_s": FIRST_TOKEN_P50_TARGET_S},
        "load_1m_after": load_average(),
        "llm_calls_per_question": round(sum(calls) / questions, 2),
        "per_node_ms": {node: round(sum(values) / questions, 2) for node, values in sorted(per_node.items())},
    }
