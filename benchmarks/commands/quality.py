"""`python -m benchmarks report|graders|groundedness|answerability`: the campaigns behind results/README.md,
the relevance graders' comparison, the planted-error groundedness check and the not-found rates.

Not part of `rag eval`: they measure the engine on the project's own labelled sets and
fixtures, not on a user's corpus.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from benchmarks.answerability import DEFAULT_LIMIT as ANSWERABILITY_LIMIT
from evals.environment import DEFAULT_RESULTS_DIR
from service.cli.common import (
    JsonReportOption,
    console,
    fail,
    progress_bars,
    settings_or_exit,
    user_errors,
    write_json_report,
)
from service.cli.evaluations import parse_pool

#: Largest --top-k of `python -m benchmarks graders` (the context's own bound on top_k).
MAX_GRADED_TOP_K = 100


def report(
    results_dir: Annotated[
        Path, typer.Option(help="Folder of the JSON reports; README.md and the PNGs are written there.")
    ] = DEFAULT_RESULTS_DIR,
) -> None:
    """Write README.md (tables) and PNG plots from the benchmarks' JSON reports."""
    from benchmarks.report import write_report

    if not results_dir.is_dir():
        fail(f"results folder not found: {results_dir}")
    written = write_report(results_dir)
    counts = ", ".join(f"{count} {kind}" for kind, count in written["reports"].items())
    console.print(f"wrote {written['readme']} from {counts} report(s)")
    for path in written["plots"]:
        console.print(f"  {path}")


def graders(
    dataset: Annotated[
        Path, typer.Option(help="HotpotQA file (JSON array or JSONL) or CMRC 2018 / SQuAD-format file.")
    ],
    limit: Annotated[int, typer.Option(help="Grade the passages of the first N questions.")] = 30,
    top_k: Annotated[int, typer.Option(help="Passages retrieved (and graded) per question, 1-100.")] = 8,
    no_llm: Annotated[
        bool, typer.Option("--no-llm", help="Measure only the score grader (no model call).")
    ] = False,
    json_out: JsonReportOption = None,
) -> None:
    """Accuracy, precision, recall and F1 of the score and LLM relevance graders against the gold supporting
    passages, with their cost, over the pooled paragraphs of the evaluated questions."""
    from benchmarks.graders import run_grader_eval

    if limit < 1:
        fail("--limit must be at least 1")
    if not 1 <= top_k <= MAX_GRADED_TOP_K:
        fail(f"--top-k must be between 1 and {MAX_GRADED_TOP_K}")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_grader_eval(dataset, settings, limit=limit, top_k=top_k, llm=not no_llm, progress=bars)
    write_json_report(json_out, report)
    table = Table(
        title=f"{report['dataset']}: {report['passages']} passages of {report['questions']} questions "
        f"(base rate {report['base_rate']}; {report['model']})"
    )
    for column in (
        "grader",
        "accuracy",
        "precision",
        "recall",
        "F1",
        "judged rel.",
        "LLM calls",
        "ms/q",
        "failed",
    ):
        table.add_column(column, justify="right")
    for name, values in report["graders"].items():
        table.add_row(
            name,
            *[
                "-" if values[key] is None else f"{values[key]:.3f}"
                for key in ("accuracy", "precision", "recall", "f1", "judged_relevant")
            ],
            str(values["llm_calls"]),
            "-" if values["mean_ms_per_question"] is None else f"{values['mean_ms_per_question']:.1f}",
            str(values["failed_replies"]),
        )
    console.print(table)
    score = report["graders"]["score"]
    console.print(
        f"score grader ranking: AUC {score['auc']}, mean score relevant {score['mean_score_relevant']} vs "
        f"irrelevant {score['mean_score_irrelevant']} (threshold {report['relevance_threshold']}); "
        f"default grader under these settings: {report['default_grader']}",
        highlight=False,
    )


def groundedness(
    fixture: Annotated[
        Path | None,
        typer.Option(help="Planted-error cases (JSONL); default: benchmarks/fixtures/planted_errors.jsonl."),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full result here.")] = None,
) -> None:
    """How often the score grader's per-sentence groundedness check catches planted errors (wrong names,
    numbers, dates, titles) and how often it flags correct answers. No model: runs in a second."""
    from benchmarks.groundedness import DEFAULT_FIXTURE, run_groundedness

    raise typer.Exit(run_groundedness(fixture or DEFAULT_FIXTURE, json_out))


def answerability(
    dataset: Annotated[
        Path | None,
        typer.Option(
            help="HotpotQA or SQuAD-format (CMRC 2018) file (default: the HotpotQA sample in "
            "../shared/data), or a development-set JSON such as benchmarks/fixtures/answerability.json."
        ),
    ] = None,
    pipeline: Annotated[
        str, typer.Option(help="extractive (no model: retrieval and grounding only) | agentic (the graph).")
    ] = "extractive",
    limit: Annotated[
        int, typer.Option(help="Questions (each asked over the present and the absent corpus).")
    ] = ANSWERABILITY_LIMIT,
    skip: Annotated[
        int, typer.Option(help="Leave out the first N usable questions (a development block before them).")
    ] = 0,
    pool: Annotated[
        str | None,
        typer.Option(
            help="Also pool the paragraphs of the file's first N questions, or 'all' (needed for CMRC, whose "
            "questions have no distractors: the absent corpus is the other articles)."
        ),
    ] = None,
    json_out: JsonReportOption = None,
) -> None:
    """Not-found rate where the documents lack the answer (want high) and where they hold it (want low)."""
    from benchmarks.answerability import (
        HOTPOTQA_SAMPLE,
        PIPELINES,
        is_dev_set,
        load_dev_set,
        qa_set,
        run_answerability_eval,
    )

    if pipeline not in PIPELINES:
        fail(f"unknown pipeline {pipeline!r}; choose one of {', '.join(PIPELINES)}")
    if limit < 1:
        fail("--limit must be at least 1")
    path = dataset or HOTPOTQA_SAMPLE
    if not path.is_file():
        fail(f"dataset {path} not found (pass --dataset)")
    settings = settings_or_exit()
    with user_errors():
        pool_size = parse_pool(pool)
        chosen = load_dev_set(path) if is_dev_set(path) else qa_set(path, limit, skip=skip, pool=pool_size)
    with user_errors(), progress_bars() as bars:
        report = run_answerability_eval(chosen, settings, pipeline=pipeline, progress=bars)
    write_json_report(json_out, report)
    console.print(
        f"{report['dataset']} · {report['pipeline']} ({report['model']}): not found where the answer is "
        f"absent {report['not_found_rate_absent']} (n {report['n_absent']}), where it is present "
        f"{report['not_found_rate_present']} (n {report['n_present']}); {report['seconds']} s",
        highlight=False,
    )
