"""`python -m benchmarks answerability`: how often the engine says "not found" when the documents lack the
answer, and
how often it wrongly says so when they hold it.

Two sets, kept apart on purpose:
- the development set (benchmarks/fixtures/answerability.json): an invented corpus with questions labelled
  answerable or not. The thresholds of retrieval/answerability.py were tuned on it and only on it;
- the held-out measurement (default): the first N HotpotQA questions whose gold paragraphs are all in the
  sample. Each question is asked twice, over two corpora built from the same pooled paragraphs (gold and
  distractors of all N questions): `present` holds everything, `absent` lacks the gold paragraphs of every
  evaluated question. The distractors stay, so the absent corpus still mentions the question's names;
  that is the hard case, and the honest one.
The figures are the not-found rate on `absent` (want high) and on `present` (want low).

Two pipelines:
- `agentic`: the product's graph through the same `Session` as the CLI, with the models of the settings;
- `extractive`: no model at all. The graph's own nodes run once in the graph's order (one search, the score
  grader and its decision, the extractive answer that `generate` falls back to, `cite`), so the figures
  isolate the retrieval and grounding decision from what a model writes.
The corpora go through the product's ingestion into dedicated data directories (evals/eval_index.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal, get_args

from benchmarks.data import HOTPOTQA_SAMPLE
from config.settings import Settings
from evals.datasets import Passage, QAExample, pool_passages

if TYPE_CHECKING:
    from evals.eval_index import ProgressFactory
    from graphs.runner import Session
    from nodes.resources import Resources
    from state.context import Context

# The graph, the stores and the models are imported where they are used: `rag` imports this module for the
# command's default --limit (service/cli/evaluations.py), and every other command would pay for them at
# start-up.

logger = logging.getLogger(__name__)

Pipeline = Literal["extractive", "agentic"]
PIPELINES: tuple[str, ...] = get_args(Pipeline)
DEV_SET = Path(__file__).resolve().parent / "fixtures" / "answerability.json"
#: Questions of the held-out set when --limit is not given (each is asked over both corpora).
DEFAULT_LIMIT = 30
COLLECTION = "answerability"
PRESENT, ABSENT = "present", "absent"

ResourcesFactory = Callable[[Settings], "Resources"]


@dataclass(frozen=True)
class Case:
    """One question over one corpus, and whether that corpus holds its answer."""

    qid: str
    question: str
    corpus: str
    answerable: bool


@dataclass
class AnswerabilitySet:
    """Named corpora and the cases asked over them."""

    name: str
    corpora: dict[str, list[Passage]]
    cases: list[Case]


# --------------------------------------------------------------------------------------------------------
# The two sets


def load_dev_set(path: Path = DEV_SET) -> AnswerabilitySet:
    """The invented development set: one corpus, questions labelled answerable or not."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        passages = [Passage(str(d["id"]), str(d["title"]), str(d["text"])) for d in data["documents"]]
        cases = [
            Case(f"dev-{index}", str(q["question"]), "dev", bool(q["answerable"]))
            for index, q in enumerate(data["questions"], start=1)
        ]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not an answerability set ({error!r})") from error
    return AnswerabilitySet("dev", {"dev": passages}, cases)


def is_dev_set(path: Path) -> bool:
    """Whether `path` is a development-set file (a JSON object with documents and questions)."""
    if path.suffix != ".json":
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"documents", "questions"} <= set(data)


def usable(example: QAExample) -> bool:
    """A question whose gold paragraphs are all in the sample (so `present` really holds the answer)."""
    return bool(example.supporting) and example.supporting_available == example.supporting


def qa_set(
    path: Path, limit: int, *, skip: int = 0, pool: int | Literal["all"] | None = None
) -> AnswerabilitySet:
    """Questions `skip+1`..`skip+limit` of a HotpotQA or SQuAD-format (CMRC 2018) file whose gold paragraphs
    are all in it, over the `present` and `absent` corpora.

    `present` pools the paragraphs of the evaluated questions (`pool`: also those of the file's first
    `pool` questions, or of "all", as `rag eval qa --pool`); `absent` is `present` without the gold
    paragraphs of every evaluated question. A CMRC question has no distractor of its own, so a CMRC set
    needs a pool: its absent corpus is then other articles of the same kind, the honest hard case.
    `skip` keeps a development block (for choosing rules) apart from the reported one."""
    from evals.qa import dataset_name, load_qa_examples, pool_examples, select_examples

    if limit < 1:
        raise ValueError(f"--limit must be at least 1, got {limit}")
    every_example = [example for example in load_qa_examples(path) if usable(example)]
    examples = select_examples(every_example, limit, skip)
    if not examples:
        raise ValueError(f"{path}: no question with its gold paragraphs after --skip {skip}")
    present = pool_passages(pool_examples(every_example, examples, pool))
    gold = set().union(*(example.supporting for example in examples))
    absent = [passage for passage in present if passage.passage_id not in gold]
    if not absent:
        raise ValueError(
            f"{path}: the absent corpus would be empty; pass --pool to add other questions' paragraphs"
        )
    cases = [
        Case(example.qid, example.question, corpus, corpus == PRESENT)
        for corpus in (PRESENT, ABSENT)
        for example in examples
    ]
    name = "hotpotqa" if path.name == HOTPOTQA_SAMPLE.name else dataset_name(path)
    return AnswerabilitySet(name, {PRESENT: present, ABSENT: absent}, cases)


# --------------------------------------------------------------------------------------------------------
# The two pipelines


def extractive_turn(question: str, context: Context) -> dict[str, Any]:
    """One turn through the graph's own nodes without a model: search once, grade with the score grader
    and take its decision, answer extractively (generate's fallback), then `cite` (the not-found check)."""
    from langchain_core.messages import HumanMessage

    from nodes.baseline_retrieve import baseline_retrieve
    from nodes.cite import cite
    from nodes.extractive import extractive_answer
    from nodes.grade_retrieval import grade_retrieval
    from nodes.turn import language_of, select_documents
    from state.graph_state import merge_documents

    runtime = SimpleNamespace(context=context)
    state: dict[str, Any] = {
        "question": question,
        "tenant": context.tenant,
        "filters": {},
        "conversation_id": "",
        "messages": [HumanMessage(question)],
        "retrieval_rounds": 0,
    }
    state |= baseline_retrieve(state, runtime)
    graded = grade_retrieval(state, runtime)
    state["documents"] = merge_documents(state["documents"], graded["documents"])
    if graded["retrieval_decision"] == "not_found":
        return {"not_found": True, "stage": "retrieval", "answer": ""}
    chosen = select_documents(state["documents"], context.relevance_threshold, context.top_k)
    draft, sources = extractive_answer(question, chosen, language_of(question), context.generation_reserve)
    output = cite({**state, "draft": draft, "sources": sources, "best_answer": None}, runtime)
    return {
        "not_found": bool(output["not_found"]),
        "stage": "answer" if output["not_found"] else None,
        "answer": output["answer"],
    }


def agentic_turn(session: Session, question: str, context: Context) -> dict[str, Any]:
    """One turn of the product's graph, as the CLI runs it."""
    result = session.ask(question, context=context)
    return {
        "not_found": bool(result.get("not_found")),
        "stage": None,
        "answer": str(result.get("answer", "")),
        "llm_calls": result.get("llm_calls", 0),
    }


# --------------------------------------------------------------------------------------------------------
# The run


def rate(records: Sequence[dict[str, Any]]) -> float | None:
    """Share of records answered "not found" (None without records)."""
    return round(sum(r["not_found"] for r in records) / len(records), 4) if records else None


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Not-found rates where the answer is absent (want high) and present (want low)."""
    absent = [r for r in records if not r["answerable"]]
    present = [r for r in records if r["answerable"]]
    return {
        "n_absent": len(absent),
        "n_present": len(present),
        "not_found_rate_absent": rate(absent),
        "not_found_rate_present": rate(present),
        "not_found_stages": {
            stage: sum(1 for r in records if r["not_found"] and r["stage"] == stage)
            for stage in ("retrieval", "answer")
        },
    }


def run_answerability_eval(
    dataset: AnswerabilitySet,
    settings: Settings,
    *,
    pipeline: str = "extractive",
    progress: ProgressFactory | None = None,
    resources: ResourcesFactory | None = None,
) -> dict[str, Any]:
    """Ask every case over its corpus with `pipeline`; return the report with per-case records.
    `resources` builds the models and stores for each corpus's data directory (tests pass fakes)."""
    from evals.environment import code_commit, machine_description, model_description
    from evals.eval_index import eval_root, index_settings, ingest_corpus, no_progress, write_corpus_once
    from evals.qa import corpus_key
    from graphs.runner import Session
    from nodes.resources import Resources, use_resources
    from state.context import Context

    progress = progress or no_progress
    resources = resources or Resources
    if pipeline not in PIPELINES:
        raise ValueError(f"unknown pipeline {pipeline!r}; choose one of {', '.join(PIPELINES)}")
    context = Context(collection=COLLECTION, max_iterations=settings.max_iterations)
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    for corpus, passages in dataset.corpora.items():
        cases = [case for case in dataset.cases if case.corpus == corpus]
        key = corpus_key([], passages)
        corpus_file = write_corpus_once(
            passages, eval_root(settings) / f"answerability-{dataset.name}-{corpus}-{key}-corpus.jsonl"
        )
        eval_settings = index_settings(settings, f"answerability-{dataset.name}-{corpus}", corpus_file)
        installed = resources(eval_settings)
        with use_resources(installed):
            kb = installed.kb()
            try:
                ingest_corpus(kb, corpus_file, collection=COLLECTION, progress=progress)
                session = Session(eval_settings, graph_name="rag", persistent=False)
                advance = progress(f"questions ({corpus})", len(cases))
                for case in cases:
                    began = time.perf_counter()
                    if pipeline == "extractive":
                        outcome = extractive_turn(case.question, context)
                    else:
                        outcome = agentic_turn(session, case.question, context)
                    records.append(
                        {**asdict(case), **outcome, "latency_s": round(time.perf_counter() - began, 3)}
                    )
                    advance(1)
            finally:
                kb.close()
    return {
        "dataset": dataset.name,
        "pipeline": pipeline,
        **summarize(records),
        "questions": len({case.qid for case in dataset.cases}),
        "corpus_passages": {name: len(passages) for name, passages in dataset.corpora.items()},
        "max_iterations": context.max_iterations,
        "seconds": round(time.perf_counter() - started, 1),
        "machine": machine_description(),
        "code_commit": code_commit(),
        "model": "none (extractive)" if pipeline == "extractive" else model_description(settings),
        "embedding": settings.embedding_provider,
        "records": records,
    }
