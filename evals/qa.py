"""`rag eval qa`: answer quality and cost of a pipeline (naive, agentic, no-retrieval) on HotpotQA/CMRC/SQuAD.

The questions' paragraphs are pooled into one index, so retrieval competes with distractors rather than
reading an oracle. Each question runs through the CLI's `Session` and its record is appended at once, so an
interrupted run resumes; records name their model (another model's are run again), commit and load.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
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

#: gold: the naive pipeline searching only the question's gold paragraphs: the reader's ceiling.
Pipeline = Literal["naive", "agentic", "no-retrieval", "gold"]
PIPELINES: tuple[str, ...] = get_args(Pipeline)
PIPELINE_GRAPHS: dict[str, GraphName] = {
    "naive": "baseline",
    "agentic": "rag",
    "no-retrieval": "direct",
    "gold": "baseline",
}
#: Pipelines that search the corpus (the others need no index).
RETRIEVING_PIPELINES = frozenset({"naive", "agentic", "gold"})


def gold_filter(example: QAExample) -> dict[str, Any]:
    """The gold pipeline's search filter: the question's supporting paragraphs, else its own context.
    ValueError naming the question when it has none (an empty filter's error would speak of filters)."""
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
    """Questions of a SQuAD-format file (a JSON object with a "data" list), else of a HotpotQA file."""
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
    """The first `limit` questions after the first `skip` (all when None): deterministic, so resumes agree."""
    if limit is not None and limit < 1:
        raise ValueError(f"--limit must be at least 1, got {limit}")
    if skip < 0:
        raise ValueError(f"--skip must be at least 0, got {skip}")
    return examples[skip:][:limit]


def pool_examples(
    every_example: list[QAExample], examples: list[QAExample], pool: int | Literal["all"] | None
) -> list[QAExample]:
    """The questions whose paragraphs make the corpus: the answered ones, plus the first `pool` (or all)."""
    if pool is None:
        return examples
    if pool == "all":
        return list(every_example)
    if pool < 1:
        raise ValueError(f"--pool must be at least 1 or 'all', got {pool}")
    head = every_example[:pool]
    pooled = {example.qid for example in head}
    return head + [example for example in examples if example.qid not in pooled]


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


def default_results_path(
    dataset_path: Path, pipeline: str, limit: int | None, split: str = ALL_SPLITS
) -> Path:
    """results/runs/<dataset>-<pipeline>[-<split>]-<limit or all>.jsonl (no split part for "all")."""
    split_part = "" if split == ALL_SPLITS else f"-{split}"
    name = f"{dataset_name(dataset_path)}-{pipeline}{split_part}-{limit or 'all'}.jsonl"
    return DEFAULT_RESULTS_DIR / RUNS_DIR_NAME / name


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    """qid -> its latest record in a results file; an unreadable line (a run killed mid-write) is skipped
    with a warning, so its question runs again."""
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
                logger.warning("%s:%d: unreadable record skipped (it runs again)", path, line_number)
                continue
            if isinstance(record, dict) and "qid" in record:
                records[str(record["qid"])] = record
    return records


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one record as a JSON line, flushed and synced (a crash loses at most the current question),
    after a newline when the file's last line was cut off."""
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
    """Run the selected questions through `pipeline`, appending records to `results_path`; return the report
    over them (resumed ones included). `split` keeps one half (evals.splits) before `skip` and `limit`;
    `pool` fixes the corpus (see pool_examples) so a long run can grow and resume over one index."""
    if pipeline not in PIPELINE_GRAPHS:
        raise ValueError(f"unknown pipeline {pipeline!r}; choose one of {', '.join(PIPELINES)}")
    name = dataset_name(dataset_path)
    every_example = load_qa_examples(dataset_path)
    examples = select_examples(examples_in_split(every_example, split), limit, skip)
    if not examples:
        raise ValueError(f"{dataset_path}: no questions")
    pooled = pool_examples(every_example, examples, pool)
    corpus_file, passages = prepare_corpus(pooled, settings, name)
    eval_settings = index_settings(settings, f"qa-{name}", corpus_file)
    results_path = results_path or default_results_path(dataset_path, pipeline, limit, split)
    context = Context(collection=QA_COLLECTION)
    stamp = {"model": model_description(settings), "code_commit": code_commit()}
    records, resumed, chunks = _run_questions(
        resources(eval_settings),
        examples,
        corpus_file,
        in_corpus={passage.passage_id for passage in passages},
        pipeline=pipeline,
        context=context,
        results_path=results_path,
        stamp=stamp,
        progress=progress,
    )
    return {
        "pipeline": pipeline,
        "graph": PIPELINE_GRAPHS[pipeline],
        "dataset": name,
        "limit": limit,
        "skip": skip,
        "split": split,
        "pool_questions": len(pooled),
        **aggregate([records[example.qid] for example in examples]),
        "resumed": resumed,
        "corpus_passages": len(passages),
        "chunks": chunks,
        "machine": machine_description(),
        "model": stamp["model"],
        "embedding": settings.embedding_provider,
        "context": asdict(context),
        "results_file": str(results_path),
    }


def _run_questions(
    installed: Resources,
    examples: list[QAExample],
    corpus_file: Path,
    *,
    in_corpus: set[str],
    pipeline: str,
    context: Context,
    results_path: Path,
    stamp: dict[str, str],
    progress: ProgressFactory,
) -> tuple[dict[str, dict[str, Any]], int, int]:
    """Index the corpus, answer every question `results_path` lacks for this model, appending each record;
    return (records by question id, resumed, chunks)."""
    retrieves = pipeline in RETRIEVING_PIPELINES
    with use_resources(installed):
        kb = installed.kb()
        try:
            if retrieves:
                ingest_corpus(kb, corpus_file, collection=QA_COLLECTION, progress=progress)
            chunks = kb.catalog.count_chunks()
            selected = {example.qid for example in examples}
            model = stamp["model"]
            records = {
                qid: record
                for qid, record in read_records(results_path).items()
                if qid in selected and not record.get("error") and record.get("model", model) == model
            }
            resumed = len(records)
            todo = [example for example in examples if example.qid not in records]
            if todo:  # load the models first: model loading is not a question's latency
                installed.model("generate", context)
                if retrieves:
                    installed.searcher().embed_query("warm-up")
            session = Session(installed.settings, graph_name=PIPELINE_GRAPHS[pipeline], persistent=False)
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
    """One question's record (or the error it ended in), stamped with model, commit and load at start."""
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
