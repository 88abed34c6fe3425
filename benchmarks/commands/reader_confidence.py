"""`python -m benchmarks reader-confidence`: each SQuAD 2.0 question read over its gold paragraph alone, the
reply's mean token log-probability recorded (the campaign: benchmarks/reader_confidence.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, cast

import typer

from config.settings import LocalModelName
from evals.environment import DEFAULT_RESULTS_DIR
from service.cli.common import console, fail, settings_or_exit, user_errors

#: The question file of `reader-confidence`: SQuAD 2.0 development questions, answerable and not.
DEFAULT_READER_DATASET = Path("data/squad/squad2_dev_mixed400.json.gz")


def eval_reader_confidence(
    model: Annotated[
        str, typer.Option(help="Catalog model that reads (models/local_catalog.py).")
    ] = "qwen2.5-coder-0.5b",
    split: Annotated[
        str, typer.Option(help="Half of the question file: dev or test (evals/splits.py).")
    ] = "dev",
    dataset: Annotated[
        Path, typer.Option(help="SQuAD-format file with answerable and unanswerable questions.")
    ] = DEFAULT_READER_DATASET,
    limit: Annotated[int, typer.Option(min=1, help="At most this many questions of the half.")] = 400,
    records: Annotated[
        Path | None,
        typer.Option(help="Per-question JSONL (default results/runs/reader-confidence-MODEL-SPLIT.jsonl)."),
    ] = None,
) -> None:
    """Read each question over its gold paragraph only, with the engine's focused-read prompt, and record the
    reply's mean token log-probability."""
    from benchmarks.bench_server import BenchServer
    from benchmarks.reader_confidence import run_reader_confidence
    from evals.datasets import load_squad
    from evals.splits import SPLITS, examples_in_split
    from models.local_catalog import LOCAL_MODEL_NAMES

    if model not in LOCAL_MODEL_NAMES:
        fail(f"unknown model {model!r}; choose among {', '.join(LOCAL_MODEL_NAMES)}")
    if split not in SPLITS:
        fail(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    if not dataset.is_file():
        fail(f"question file not found: {dataset}")
    name = cast(LocalModelName, model)  # checked above
    settings = settings_or_exit()
    path = records or DEFAULT_RESULTS_DIR / "runs" / f"reader-confidence-{model}-{split}.jsonl"
    with user_errors():
        examples = examples_in_split(load_squad(dataset), split)[:limit]
        with BenchServer(name, settings) as bench:
            rows = run_reader_confidence(name, bench, examples, path, console.print)
    console.print(f"{len(rows)} records written to {path}")
