"""`rag eval qa`: answer quality and cost of a pipeline (naive, agentic, no-retrieval) on HotpotQA/CMRC/SQuAD.

How the benchmark is set up, and why:
- the corpus is the paragraphs of the evaluated questions pooled into one index, so every question competes
  with the other questions' paragraphs (distractors included) and retrieval is real, not an oracle;
- the corpus goes through the product's own ingestion into a dedicated data directory (evals/eval_index.py),
  reused while the questions and index settings are unchanged;
- each question runs through the same `Session` the CLI uses, with the models of the settings, so the same
  command measures the embedded model or any OpenAI-compatible endpoint;
- every answered question is appended to a JSONL file at once (flushed and synced), so an interrupted run
  continues where it stopped; a question that raises is recorded with its error and the run goes on (a
  rerun retries it). A record names the model it was answered with, and records of another model are run
  again rather than mixed into this model's numbers. It also names the commit that answered it and the
  machine's load when it started, since a resumed run may span commits and quiet and busy hours.
Scoring and aggregation live in evals/qa_scoring.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from config.settings import Settings
from core.text import contains_cjk
from evals.datasets import (
    LANGUAGE_CHINESE,
    LANGUAGE_ENGLISH,
    Passage,
    QAExample,
    load_hotpotqa,
    load_squad,
    open_text,
    pool_passages,
)
from evals.environment import (
    DEFAULT_RESULTS_DIR,
    code_commit,
    load_average,
    machine_description,
    model_description,
)
from evals.eval_index import (
    ProgressFactory,
    eval_root,
    index_settings,
    ingest_corpus,
    no_progress,
    write_corpus_once,
)
from evals.qa_aggregate import aggregate
from evals.qa_scoring import error_record, question_record
from evals.splits import ALL_SPLITS, examples_in_split
from graphs.runner import GraphName, Session
from nodes.resources import Resources, use_resources
from state.context import Context

logger = logging.getLogger(__name__)

#: gold: the naive pipeline searching only the question's own gold paragraphs (its SQuAD paragraph, its
#: HotpotQA supporting ones): the reader's ceiling with the same prompt, evidence step and model.
Pipeline = Literal["naive", "agentic", "no-retrieval", "gold"]
PIPELINES: tuple[str, ...] = get_args(Pipeline)
#: The graph behind each pipeline name of the command line.
PIPELINE_GRAPHS: dict[str, GraphName] = {
    "naive": "baseline",
    "agentic": "rag",
    "no-retrieval": "direct",
    "gold": "baseline",
}
#: Pipelines that search the corpus (the others need no index).
RETRIEVING_PIPELINES = frozenset({"naive", "agentic", "gold"})


def gold_filter(example: QAExample) -> dict[str, Any]:
    """The search filter of the gold pipeline: only the question's gold paragraphs (its supporting ones
    when the file names them, else its own context: a SQuAD question's paragraph, answerable or not).

    ValueError, recorded as the question's error, when the file gives the question no paragraph: an empty
    filter would be refused by the search with a message about filters instead of about the data."""
    gold = sorted(example.supporting_available or {passage.passage_id for passage in example.passages})
    if not gold:
        raise ValueError(f"question {example.qid}: the file gives it no gold paragraph to read")
    return {"doc_id": {"$in": gold}}


QA_COLLECTION = "qa"
RUNS_DIR_NAME = "runs"
CORPUS_KEY_CHARS = 12
#: Questions of a SQuAD-format file looked at to decide whether it is Chinese (CMRC) or English.
LANGUAGE_PROBE_QUESTIONS = 20

ResourcesFactory = Callable[[Settings], Resources]


# --------------------------------------------------------------------------------------------------------
# Dataset


def dataset_name(path: Path) -> str:
    """Short name of a dataset: its file name up to the first dot (cmrc2018_dev.json.gz -> cmrc2018_dev)."""
    return Path(path).name.split(".")[0]


def _squad_language(document: dict[str, Any]) -> str:
    """zh when the first questions of a SQuAD-format document contain CJK characters (CMRC 2018), else en."""
    questions = [
        str(qa.get("question", ""))
        for article in document.get("data", [])
        for paragraph in article.get("paragraphs", [])
        for qa in paragraph.get("qas", [])
    ][:LANGUAGE_PROBE_QUESTIONS]
    return LANGUAGE_CHINESE if any(contains_cjk(question) for question in questions) else LANGUAGE_ENGLISH


def load_qa_examples(path: Path) -> list[QAExample]:
    """Questions of a HotpotQA file (JSON array or JSONL) or a SQuAD-format file (CMRC 2018, SQuAD).

    The format is read from the content, not the name: a whole-file JSON object with a "data" list is
    SQuAD-format (Chinese when its questions are), anything else must be HotpotQA records.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset not found: {path}")
    with open_text(path) as handle:
        text = handle.read()
    if text.lstrip().startswith("{"):
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            document = None  # several objects: JSON lines
        if isinstance(document, dict) and isinstance(document.get("data"), list):
            return load_squad(path, language=_squad_language(document))
    return load_hotpotqa(path)


def select_examples(examples: list[QAExample], limit: int | None, skip: int = 0) -> list[QAExample]:
    """The first `limit` questions after the first `skip` (all when None): deterministic, so reruns and
    resumes agree. `skip` sets a development split apart: the questions after the reported ones."""
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be at least 1, got {limit}")
    if skip < 0:
        raise ValueError(f"--skip must be at least 0, got {skip}")
    remaining = examples[skip:]
    return remaining[:limit] if limit else list(remaining)


def pool_examples(
    every_example: list[QAExample], examples: list[QAExample], pool: int | Literal["all"] | None
) -> list[QAExample]:
    """The questions whose paragraphs make the corpus: the answered `examples`, or the first `pool` of the
    file and the answered ones (which may lie beyond them with --skip), or all of them."""
    if pool is None:
        return examples
    if pool == "all":
        return list(every_example)
    if pool < 1:
        raise ValueError(f"--pool must be at least 1 or 'all', got {pool}")
    head = every_example[:pool]
    pooled = {example.qid for example in head}
    return head + [example for example in examples if example.qid not in pooled]


# --------------------------------------------------------------------------------------------------------
# Corpus and index


def corpus_key(examples: Iterable[QAExample], passages: Iterable[Passage]) -> str:
    """A key of the evaluated questions and their pooled paragraphs (ids and texts)."""
    digest = hashlib.sha1()
    for example in examples:
        digest.update(f"q\x1f{example.qid}\x1e".encode())
    for passage in passages:
        digest.update(f"p\x1f{passage.passage_id}\x1f{passage.title}\x1f{passage.text}\x1e".encode())
    return digest.hexdigest()[:CORPUS_KEY_CHARS]


def prepare_corpus(examples: list[QAExample], settings: Settings, name: str) -> tuple[Path, list[Passage]]:
    """Pool the questions' paragraphs into `<data_dir>/eval/qa-<name>-<key>-corpus.jsonl` (written once)."""
    passages = pool_passages(examples)
    key = corpus_key(examples, passages)
    path = eval_root(settings) / f"qa-{name}-{key}-corpus.jsonl"
    return write_corpus_once(passages, path), passages


# --------------------------------------------------------------------------------------------------------
# Per-question records (resumable)


def default_results_path(
    dataset_path: Path, pipeline: str, limit: int | None, split: str = ALL_SPLITS
) -> Path:
    """results/runs/<dataset>-<pipeline>[-<split>]-<limit or all>.jsonl (no split part for every question,
    the name runs had before splits)."""
    split_part = "" if split == ALL_SPLITS else f"-{split}"
    return (
        DEFAULT_RESULTS_DIR
        / RUNS_DIR_NAME
        / f"{dataset_name(dataset_path)}-{pipeline}{split_part}-{limit or 'all'}.jsonl"
    )


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    """qid -> its latest record in a results file; none when the file does not exist.

    A line that is not valid JSON (the last line of a run killed mid-write) is skipped with a warning, so
    its question simply runs again.
    """
    records: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return records
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                logger.warning(
                    "%s:%d: unreadable record skipped (its question runs again)", path, line_number
                )
                continue
            if isinstance(record, dict) and "qid" in record:
                records[str(record["qid"])] = record
    return records


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one record as a JSON line, flushed and synced so a crash loses at most the current question.

    A file whose last line was cut off gets a newline first, so the new record starts on a line of its own.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    needs_newline = False
    if path.exists() and path.stat().st_size:
        with path.open("rb") as probe:
            probe.seek(-1, os.SEEK_END)
            needs_newline = probe.read(1) != b"\n"
    with path.open("a", encoding="utf-8") as handle:
        if needs_newline:
            handle.write("\n")
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


# --------------------------------------------------------------------------------------------------------
# The run


def _warm_up(resources: Resources, context: Context, retrieves: bool) -> None:
    """Load the models before the clock starts: model loading is not a question's latency."""
    resources.model("generate", context)
    if retrieves:
        resources.searcher().embed_query("warm-up")


def run_qa_eval(
    dataset_path: Path,
    settings: Settings,
    *,
    pipeline: str,
    limit: int | None = None,
    skip: int = 0,
    split: str = ALL_SPLITS,
    pool: int | Literal["all"] | None = None,
    results_path: Path | None = None,
    progress: ProgressFactory = no_progress,
    resources: ResourcesFactory = Resources,
) -> dict[str, Any]:
    """Run the first `limit` questions through `pipeline`, appending records to `results_path`; return the
    report (aggregate over the selected questions, resumed ones included).

    `split` keeps one half of the file's questions (evals.splits.split_of: "dev" to choose settings on,
    "test" to report) before `skip` and `limit` apply; "all" keeps every question.

    `pool` sets the corpus apart from the questions answered: the paragraphs of the first `pool` questions
    ("all": every question of the file; None: the answered ones). A fixed pool lets a long run grow with
    `limit` and resume, always over the same index, and makes retrieval compete with more distractors.

    `resources` builds the models and stores for the benchmark's data directory (tests pass fakes).
    """
    if pipeline not in PIPELINE_GRAPHS:
        raise ValueError(f"unknown pipeline {pipeline!r}; choose one of {', '.join(PIPELINES)}")
    plan = _plan_qa_run(Path(dataset_path), settings, limit=limit, skip=skip, split=split, pool=pool)
    results_path = results_path or default_results_path(plan.dataset_path, pipeline, limit, split)
    installed = resources(plan.eval_settings)
    context = Context(collection=QA_COLLECTION)
    stamp = {"model": model_description(settings), "code_commit": code_commit()}
    records, resumed, chunks = _run_questions(
        plan,
        installed,
        pipeline=pipeline,
        context=context,
        results_path=results_path,
        stamp=stamp,
        progress=progress,
    )
    ordered = [records[example.qid] for example in plan.examples]
    return {
        "pipeline": pipeline,
        "graph": PIPELINE_GRAPHS[pipeline],
        "dataset": plan.name,
        "limit": limit,
        "skip": skip,
        "split": split,
        "pool_questions": len(plan.pooled),
        **aggregate(ordered),
        "resumed": resumed,
        "corpus_passages": len(plan.passages),
        "chunks": chunks,
        "machine": machine_description(),
        "model": stamp["model"],
        "embedding": settings.embedding_provider,
        "context": asdict(context),
        "results_file": str(results_path),
    }


@dataclass(frozen=True)
class _QaPlan:
    """What a QA run answers and over which corpus: the selected questions, the pooled ones whose
    paragraphs make the corpus, and the corpus file the run's index is built from."""

    dataset_path: Path
    name: str
    examples: list[QAExample]
    pooled: list[QAExample]
    corpus_file: Path
    passages: list[Passage]
    eval_settings: Settings


def _plan_qa_run(
    dataset_path: Path,
    settings: Settings,
    *,
    limit: int | None,
    skip: int,
    split: str,
    pool: int | Literal["all"] | None,
) -> _QaPlan:
    """Select the questions (split, then skip and limit), pool the corpus's questions and write the corpus."""
    name = dataset_name(dataset_path)
    every_example = load_qa_examples(dataset_path)
    examples = select_examples(examples_in_split(every_example, split), limit, skip)
    if not examples:
        raise ValueError(f"{dataset_path}: no questions")
    pooled = pool_examples(every_example, examples, pool)
    corpus_file, passages = prepare_corpus(pooled, settings, name)
    return _QaPlan(
        dataset_path=dataset_path,
        name=name,
        examples=examples,
        pooled=pooled,
        corpus_file=corpus_file,
        passages=passages,
        eval_settings=index_settings(settings, f"qa-{name}", corpus_file),
    )


def _run_questions(
    plan: _QaPlan,
    installed: Resources,
    *,
    pipeline: str,
    context: Context,
    results_path: Path,
    stamp: dict[str, str],
    progress: ProgressFactory,
) -> tuple[dict[str, dict[str, Any]], int, int]:
    """Index the corpus (retrieving pipelines), then answer every question not already in `results_path` by
    this model, appending each record as it finishes; return (records by question id, resumed, chunks)."""
    retrieves = pipeline in RETRIEVING_PIPELINES
    in_corpus = {passage.passage_id for passage in plan.passages}
    with use_resources(installed):
        kb = installed.kb()
        try:
            if retrieves:
                ingest_corpus(kb, plan.corpus_file, collection=QA_COLLECTION, progress=progress)
            chunks = kb.catalog.count_chunks()
            selected = {example.qid for example in plan.examples}
            model = stamp["model"]
            records = {
                qid: record
                for qid, record in read_records(results_path).items()
                if qid in selected and not record.get("error") and record.get("model", model) == model
            }
            resumed = len(records)
            todo = [example for example in plan.examples if example.qid not in records]
            if todo:
                _warm_up(installed, context, retrieves)
            session = Session(plan.eval_settings, graph_name=PIPELINE_GRAPHS[pipeline], persistent=False)
            advance = progress("questions", len(todo))
            for example in todo:
                record = _answer_question(
                    session, example, pipeline=pipeline, context=context, in_corpus=in_corpus, stamp=stamp
                )
                append_record(results_path, record)
                records[example.qid] = record
                advance(1)
        finally:
            kb.close()
    return records, resumed, chunks


def _answer_question(
    session: Session,
    example: QAExample,
    *,
    pipeline: str,
    context: Context,
    in_corpus: set[str],
    stamp: dict[str, str],
) -> dict[str, Any]:
    """One question's record: its scores, or the error it ended in (one failing question must not end the
    run), stamped with the model, the code's commit and the machine's load when it started."""
    load_at_start = load_average()
    started = time.perf_counter()
    try:
        inputs: dict[str, Any] = {"filters": gold_filter(example)} if pipeline == "gold" else {}
        result = session.ask(example.question, context=context, **inputs)
        record = question_record(
            example, result, latency_s=time.perf_counter() - started, in_corpus=in_corpus
        )
    except Exception as error:  # noqa: BLE001 - one failing question must not end the run
        logger.warning("question %s failed: %s", example.qid, error)
        record = error_record(example, error, latency_s=time.perf_counter() - started, in_corpus=in_corpus)
    record.update(model=stamp["model"], code_commit=stamp["code_commit"], load_1m=load_at_start)
    return record
