"""The agentic graph's own time per question: wall time minus the time spent inside the model, the embedding
model and the search (target: at most 20 ms at the median).

Why fakes: the model and embeddings here answer at once (a fixed streamed reply, hashed bag-of-words
vectors), so what is left of a question's wall time is what the engine adds around them: LangGraph's
stepping and streaming, checkpoint and table writes, grading, evidence selection, prompt building and
citation checks. Each question runs as `rag ask` runs it (`graphs.runner.Session.stream` with events, a
new thread, the SQLite checkpointer) on the sample corpus; the answer cache is off, so every question runs
the whole graph.

Time inside the model, embeddings and search is measured where they are called (the fakes and the searcher
record their intervals), and a question's overhead is its wall time minus the union of those intervals, so
parallel retrievals are not subtracted twice. Per node: the node's own time (`timings_ms`) less what it spent
in those calls: generate less model time, retrieve less retrieval time, compress_evidence less its sentence
embeddings. The 12 sample questions come in turn, so a question meets passages (and the fake's answer) that
earlier ones had, as questions over one corpus do; a second pass asks them again with the engine's per-text
caches emptied before each question (`new_texts`: nothing seen before), the bound for a first-time question.

    python -m benchmarks.graph_overhead [--questions 50] [--json results/graph_overhead.json]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from config.settings import Settings, load_settings
from evals.environment import machine_description
from evals.latency import LATENCY_COLLECTION, SAMPLE_CORPUS, sample_questions
from evals.metrics import linear_percentile
from graphs.runner import Session, new_thread_id
from nodes.resources import Resources, use_resources
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context

DEFAULT_QUESTIONS = 50
#: Questions answered before timing starts (imports, first connections, first prompt templates).
WARMUP_QUESTIONS = 3
#: Target for the median overhead, in ms.
TARGET_P50_MS = 20.0
#: What the fake model answers every prompt with (streamed word by word, as a served model streams).
REPLY = "Answer: the sample corpus [1]."
FAKE_DIMENSION = 256
_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u4dbf\u4e00-\u9fff]")


class Intervals:
    """Wall-clock intervals spent inside external calls (model, embeddings, search), from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans: list[tuple[str, float, float]] = []

    def record(self, kind: str, started: float) -> None:
        """Add the interval from `started` (perf_counter seconds) until now."""
        with self._lock:
            self.spans.append((kind, started, time.perf_counter()))

    def wrap(self, kind: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """`function`, recording each call's interval under `kind`."""

        @functools.wraps(function)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.record(kind, started)

        return recorded

    def take(self) -> list[tuple[str, float, float]]:
        """The intervals so far, forgotten here."""
        with self._lock:
            spans, self.spans = self.spans, []
        return spans


def union_ms(spans: Sequence[tuple[str, float, float]]) -> float:
    """Milliseconds covered by at least one interval (overlapping calls counted once)."""
    total, reach = 0.0, float("-inf")
    for _, start, end in sorted(spans, key=lambda span: span[1]):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total * 1000


def kind_ms(spans: Sequence[tuple[str, float, float]], kind: str) -> float:
    """Milliseconds covered by the intervals of one kind."""
    return union_ms([span for span in spans if span[0] == kind])


def hashed_vector(text: str) -> list[float]:
    """L2-normalised word counts hashed into FAKE_DIMENSION buckets (never the zero vector)."""
    vector = [0.0] * FAKE_DIMENSION
    words = _WORD.findall(text.lower())
    for word in words:
        bucket = int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest(), "big")
        vector[bucket % FAKE_DIMENSION] += 1.0
    if not words:
        vector[0] = 1.0
    norm = sum(value * value for value in vector) ** 0.5
    return [value / norm for value in vector]


class HashedEmbeddings(Embeddings):
    """An embedding model that answers at once; its calls are recorded as "embed_documents"/"embed_query"."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors for passages (or, in compress_evidence, for sentences)."""
        started = time.perf_counter()
        try:
            return [hashed_vector(text) for text in texts]
        finally:
            INTERVALS.record("embed_documents", started)

    def embed_query(self, text: str) -> list[float]:
        """A query's vector."""
        started = time.perf_counter()
        try:
            return hashed_vector(text)
        finally:
            INTERVALS.record("embed_query", started)


class ReplyModel(BaseChatModel):
    """A chat model that answers every prompt with REPLY at once, streamed word by word; calls recorded as
    "model"."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "graph-overhead-fake"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        started = time.perf_counter()
        self.calls += 1
        result = ChatResult(generations=[ChatGeneration(message=AIMessage(REPLY))])
        INTERVALS.record("model", started)
        return result

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self.calls += 1
        for index, word in enumerate(REPLY.split(" ")):
            started = time.perf_counter()
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word if index == 0 else f" {word}"))
            INTERVALS.record("model", started)
            yield chunk


#: The intervals the fakes and the searcher record into (one campaign runs at a time in a process).
INTERVALS = Intervals()


def fake_resources(settings: Settings) -> tuple[Resources, ReplyModel]:
    """Resources over a hashed-embedding knowledge base in the settings' data dir, the fake model as
    generator and grader (weak: the graders score without the model, as with the embedded default)."""
    model = ReplyModel()
    knowledge_base = KnowledgeBase(settings, base_model=HashedEmbeddings(), model_key="fake")
    resources = Resources(
        settings,
        knowledge_base=knowledge_base,
        generator=model,
        grader=model,
        strengths={"generate": "weak", "grade": "weak"},
    )
    searcher = resources.searcher()
    # the benchmark times this one instance's searches by wrapping its bound method in place
    searcher.search = INTERVALS.wrap("search", searcher.search)  # type: ignore[method-assign]
    return resources, model


def streamed_turn(session: Session, question: str, context: Context) -> tuple[dict[str, Any], float]:
    """(output state, wall ms) of one turn on a new thread, streamed as `rag ask` and the API stream it
    (tokens and the nodes' events: LangGraph's concurrent streaming, part of the overhead measured)."""
    started = time.perf_counter()
    result: dict[str, Any] = {}
    for kind, payload in session.stream(question, thread_id=new_thread_id(), context=context, events=True):
        if kind == "result":
            result = payload
    return result, (time.perf_counter() - started) * 1000


def question_costs(
    wall_ms: float, timings: dict[str, float], spans: Sequence[tuple[str, float, float]]
) -> tuple[float, dict[str, float]]:
    """(the question's overhead, each node's own ms) from its wall time, `timings_ms` and call intervals."""
    outside = union_ms(spans)
    nodes = {name: value for name, value in timings.items() if name not in ("model", "retrieval")}
    if "generate" in nodes:
        nodes["generate"] -= timings.get("model", 0.0)
    if "retrieve" in nodes:
        nodes["retrieve"] -= timings.get("retrieval", 0.0)
    if "compress_evidence" in nodes:
        nodes["compress_evidence"] -= kind_ms(spans, "embed_documents")
    return wall_ms - outside, nodes


def forget_seen_texts() -> None:
    """Empty the engine's per-text caches (token counts, content terms, grounding evidence, instruction
    checks, sentence terms), so the next question's passages and answer count as never seen."""
    from retrieval import answer_text, evidence, grounding, injection, tokens

    for cached in (  # the modules' private lru caches: the benchmark empties them between questions
        tokens.count_tokens,
        answer_text._content_terms,  # noqa: SLF001
        grounding._evidence_of,  # noqa: SLF001
        injection.is_instruction_like,
        evidence._sentence_terms,  # noqa: SLF001
    ):
        cached.cache_clear()


def time_questions(
    session: Session, context: Context, questions: int, *, new_texts: bool
) -> tuple[list[float], dict[str, list[float]]]:
    """(overhead per question, each node's own ms per question) of `questions` turns over the sample
    questions in turn; with `new_texts`, the per-text caches are emptied before each question."""
    pool = sample_questions()
    overheads: list[float] = []
    per_node: dict[str, list[float]] = {}
    INTERVALS.take()
    for index in range(questions):
        if new_texts:
            forget_seen_texts()
        result, wall = streamed_turn(session, pool[index % len(pool)], context)
        overhead, nodes = question_costs(wall, result.get("timings_ms") or {}, INTERVALS.take())
        overheads.append(overhead)
        for name, value in nodes.items():
            per_node.setdefault(name, []).append(value)
    return overheads, per_node


def summary(overheads: list[float], per_node: dict[str, list[float]]) -> dict[str, Any]:
    """Median and p95 overhead, each node's median own time, and what the medians leave outside the nodes
    (LangGraph's stepping and streaming, the thread's lock and checks, checkpoint writes)."""
    nodes = {name: round(linear_percentile(values, 50), 2) for name, values in sorted(per_node.items())}
    p50 = linear_percentile(overheads, 50)
    return {
        "p50_ms": round(p50, 2),
        "p95_ms": round(linear_percentile(overheads, 95), 2),
        "per_node_ms": nodes,
        "outside_nodes_p50_ms": round(p50 - sum(nodes.values()), 2),
    }


def run_graph_overhead(questions: int = DEFAULT_QUESTIONS) -> dict[str, Any]:
    """Time `questions` streamed questions after WARMUP_QUESTIONS, then the same questions again with the
    per-text caches emptied before each (`new_texts`: a question whose passages and answer no earlier
    question had); the report of the module docstring."""
    with tempfile.TemporaryDirectory(prefix="graph-overhead-") as scratch:
        settings = load_settings(data_dir=Path(scratch) / "rag", cache_enabled=False)
        resources, model = fake_resources(settings)
        with use_resources(resources):
            ingest_paths(resources.kb(), [SAMPLE_CORPUS], collection=LATENCY_COLLECTION)
            session = Session(settings)
            context = Context(collection=LATENCY_COLLECTION)
            pool = sample_questions()
            for index in range(WARMUP_QUESTIONS):
                streamed_turn(session, pool[index % len(pool)], context)
            load_before = os.getloadavg()[0]
            model.calls = 0
            warm = summary(*time_questions(session, context, questions, new_texts=False))
            calls = model.calls
            new_texts = summary(*time_questions(session, context, questions, new_texts=True))
            resources.kb().close()
    return {
        "machine": machine_description(),
        "load": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "questions": questions,
        "warmup_questions": WARMUP_QUESTIONS,
        "target_p50_ms": TARGET_P50_MS,
        "model_calls_per_question": round(calls / questions, 2) if questions else 0.0,
        **warm,
        "new_texts": new_texts,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m benchmarks.graph_overhead [--questions N] [--json OUT]`: print the medians, write the
    report."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.graph_overhead", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--questions", type=int, default=DEFAULT_QUESTIONS)
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args(argv)
    report = run_graph_overhead(args.questions)
    print(
        f"graph overhead per question: p50 {report['p50_ms']} ms, p95 {report['p95_ms']} ms "
        f"(target p50 <= {TARGET_P50_MS:g} ms), load {report['load']['before']}"
    )
    fresh = report["new_texts"]
    print(f"  with the per-text caches emptied before each question: p50 {fresh['p50_ms']} ms")
    print(f"  {'node (median ms)':<20} {'as run':>8} {'new texts':>10}")
    for name, value in report["per_node_ms"].items():
        print(f"  {name:<20} {value:8.2f} {fresh['per_node_ms'].get(name, 0.0):10.2f}")
    outside = f"{report['outside_nodes_p50_ms']:8.2f} {fresh['outside_nodes_p50_ms']:10.2f}"
    print(f"  {'(outside the nodes)':<20} {outside}")
    if args.json:
        import json

        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
