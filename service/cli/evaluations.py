"""`rag eval ...`: the evaluations a user runs on their own labelled files (retrieval, latency, QA here; the
group's other commands are added in service/cli/__init__.py). Project campaigns are `python -m benchmarks`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table

from service.cli.common import (
    JsonReportOption,
    console,
    error_console,
    fail,
    progress_bars,
    settings_or_exit,
    user_errors,
    write_json_report,
)

eval_app = typer.Typer(
    help="Evaluate on your own labelled files: retrieval quality and speed, graph latency, QA, routing, "
    "load; fit the answer calibrator on QA results.",
    no_args_is_help=True,
)


@eval_app.command("retrieval")
def eval_retrieval(
    dataset: Annotated[Path, typer.Option(help="BEIR folder, or a CMRC 2018 / SQuAD-format file.")],
    mode: Annotated[
        list[str] | None, typer.Option(help="Modes to run (repeatable); default all three.")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N queries.")] = None,
    split: Annotated[
        str,
        typer.Option(
            help="dev | test | all: keep one half of the judged queries (by a hash of the query id; "
            "evals.splits.split_of) before --limit. Choose settings on dev, report on test."
        ),
    ] = "all",
    rerank: Annotated[
        bool,
        typer.Option(
            "--rerank",
            help="Also rerank the hybrid list with the configured generation model (one call per query: slow "
            "on a CPU; use --limit).",
        ),
    ] = False,
    json_out: JsonReportOption = None,
) -> None:
    """Retrieval quality (nDCG@10, Recall@10/100, MRR@10) and speed per mode; ingest throughput."""
    from evals.retrieval import run_retrieval_eval

    settings = settings_or_exit()
    from retrieval.search import QueryError, search_mode

    try:
        modes = [search_mode(name) for name in (mode or ["bm25", "dense", "hybrid"])]
    except QueryError as error:
        fail(str(error))
    if rerank and "hybrid" not in modes:
        fail("--rerank reranks the hybrid list: add --mode hybrid")
    rerank_model = None
    if rerank:
        from nodes.resources import get_resources

        rerank_model = get_resources().model("generate")
    with user_errors(), progress_bars() as bars:
        report = run_retrieval_eval(
            dataset,
            settings,
            modes=modes,
            limit=limit,
            progress=bars,
            rerank_model=rerank_model,
            split=split,
        )
    write_json_report(json_out, report)
    _print_retrieval_report(report)


def _print_retrieval_report(report: dict[str, Any]) -> None:
    """Retrieval quality and latency per mode as one table, then the ingest and query-embedding speed."""
    table = Table(title=f"{report['dataset']}: {report['queries']} queries ({report['machine']})")
    metrics = [name for name in next(iter(report["modes"].values())) if name not in ("p50_ms", "p95_ms")]
    for column in ["mode", *metrics, "p50 ms", "p95 ms"]:
        table.add_column(column)
    for name, values in report["modes"].items():
        table.add_row(
            name, *[f"{values[m]:.3f}" for m in metrics], f"{values['p50_ms']:.1f}", f"{values['p95_ms']:.1f}"
        )
    console.print(table)
    console.print(
        f"ingest {report['chunks']} chunks at {report['ingest_chunks_per_s']} chunks/s; re-ingest "
        f"{report['reingest_seconds']}s ({report['reingest_speedup']}x faster); query embedding p50 "
        f"{report['embed_query_ms']} ms"
    )


@eval_app.command("latency")
def eval_latency(
    questions: Annotated[int, typer.Option(help="Questions to run (cycling through --questions-file).")] = 50,
    corpus: Annotated[
        Path | None, typer.Option(help="Folder or file to index and ask about (default: samples/corpus).")
    ] = None,
    questions_file: Annotated[
        Path | None,
        typer.Option(help='JSONL of {"question": ...} about the corpus (default: samples/questions.jsonl).'),
    ] = None,
    json_out: JsonReportOption = None,
) -> None:
    """Per-node time and graph overhead (wall - model - retrieval) with the configured model, on your corpus
    and questions or the checkout's samples."""
    from evals.latency import SAMPLE_CORPUS, SAMPLE_QUESTIONS, run_latency_eval

    if questions < 1:
        fail("--questions must be at least 1")
    corpus = corpus or SAMPLE_CORPUS
    questions_file = questions_file or SAMPLE_QUESTIONS
    if not corpus.exists():
        fail(f"corpus not found: {corpus} (--corpus)")
    if not questions_file.is_file():
        fail(f"questions file not found: {questions_file} (--questions-file)")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_latency_eval(
            settings, questions=questions, corpus=corpus, questions_file=questions_file, progress=bars
        )
    write_json_report(json_out, report)
    table = Table(title=f"graph latency over {report['questions']} questions ({report['machine']})")
    table.add_column("node")
    table.add_column("mean ms per question", justify="right")
    for node, value in report["per_node_ms"].items():
        table.add_row(node, f"{value:.1f}")
    console.print(table)
    console.print(
        f"wall {report['wall_s']}s (model {report['model_s']}s, retrieval {report['retrieval_s']}s); "
        "overhead "
        f"{report['overhead_fraction'] * 100:.2f}% = {report['overhead_ms_per_question']} ms/question; "
        f"{report['llm_calls_per_question']} LLM calls/question"
    )
    first, targets = report["first_token_ms_p50"], report["targets"]
    console.print(
        f"p50 {report['wall_ms_p50'] / 1000:.1f}s per answer (target <= {targets['wall_p50_s']:g}s), "
        + (f"first answer token p50 {first / 1000:.1f}s" if first is not None else "no answer streamed")
        + f" (target <= {targets['first_token_p50_s']:g}s), 1-min load {report['load_1m_after']}"
    )


def parse_pool(pool: str | None) -> int | Literal["all"] | None:
    """--pool's value: None, "all", or a positive number of questions (anything else exits with a message)."""
    if pool is None:
        return None
    if pool == "all":
        return "all"
    if not pool.isdigit() or int(pool) < 1:
        fail(f"--pool must be a positive number of questions or 'all', got {pool!r}")
    return int(pool)


QaSplitOption = Annotated[
    str,
    typer.Option(
        help="dev | test | all: keep one half of the questions (by a hash of the question id; "
        "evals.splits.split_of) before --skip and --limit. Choose settings on dev, report on test.",
    ),
]
PoolOption = Annotated[
    str | None,
    typer.Option(
        help="Corpus: the paragraphs of the first N questions, or 'all' of the file's (default: of the "
        "evaluated questions). A fixed pool lets a run grow with --limit and resume over one index.",
    ),
]
QaResultsOption = Annotated[
    Path | None,
    typer.Option(
        help="Per-question JSONL, appended as questions finish; a rerun resumes from it. "
        "Default: results/runs/<dataset>-<pipeline>-<limit>.jsonl.",
    ),
]


@eval_app.command("qa")
def eval_qa(
    dataset: Annotated[
        Path, typer.Option(help="HotpotQA file (JSON array or JSONL) or CMRC 2018 / SQuAD-format file.")
    ],
    pipeline: Annotated[
        str,
        typer.Option(help="naive | agentic | no-retrieval | gold (naive over the gold paragraphs only)."),
    ],
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N questions.")] = None,
    skip: Annotated[
        int,
        typer.Option(
            min=0, help="Start after the first N questions (a development split beside the reported ones)."
        ),
    ] = 0,
    split: QaSplitOption = "all",
    pool: PoolOption = None,
    json_out: JsonReportOption = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write qa_f1_vs_llm_calls.png into DIR from its QA JSON reports plus this run."),
    ] = None,
    results: QaResultsOption = None,
) -> None:
    """EM / F1 / ROUGE-L, support recall, citation precision, not-found rate, answers per band with the
    confidence's AUROC and ECE, LLM calls, tokens and latency of a pipeline over the pooled paragraphs."""
    from evals.qa import run_qa_eval
    from evals.qa_plot import write_qa_plot

    pool_size = parse_pool(pool)
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_qa_eval(
            dataset,
            settings,
            pipeline=pipeline,
            limit=limit,
            skip=skip,
            split=split,
            pool=pool_size,
            results_path=results,
            progress=bars,
        )
    write_json_report(json_out, report)
    _print_qa_table(report, split)
    _print_qa_breakdowns(report)
    if report["errors"]:
        error_console.print(f"[yellow]{report['errors']} questions failed[/] (see {report['results_file']})")
    console.print(f"[dim]per-question records: {report['results_file']} ({report['resumed']} resumed)[/]")
    if plot:
        written = write_qa_plot(plot, extra=[report])
        console.print(f"plot: {written}")


def _print_qa_table(report: dict[str, Any], split: str) -> None:
    """The headline row of a QA report: scores, support recall, citation precision, cost per question."""
    from evals.qa_scoring import SCORE_KEYS
    from evals.splits import ALL_SPLITS

    table = Table(
        title=f"{report['dataset']}{'' if split == ALL_SPLITS else f' ({split})'} · {report['pipeline']}: "
        f"{report['n']} questions ({report['model']})"
    )
    for column in (
        "EM",
        "F1",
        "gold in ans.",
        "ROUGE-L",
        "short EM",
        "short F1",
        "short gold in ans.",
        "short ROUGE-L",
        "support R@5",
        "cit. precision",
        "not found",
        "LLM calls/q",
        "tokens/q",
        "p50 s",
    ):
        table.add_column(column, justify="right")
    table.add_row(
        *[
            "-" if report[key] is None else f"{report[key]:.3f}"
            for key in (*SCORE_KEYS, "support_recall@5", "citation_precision", "not_found_rate")
        ],
        f"{report['llm_calls_per_question']:.2f}",
        f"{report['tokens_per_question']:.0f}",
        "-" if report["latency_p50_s"] is None else f"{report['latency_p50_s']:.2f}",
    )
    console.print(table)


def _print_qa_breakdowns(report: dict[str, Any]) -> None:
    """The lines under the headline row: per strategy and type, answerability, bands."""
    for title, key in (("strategy", "by_strategy"), ("type", "by_type")):
        for group, values in report[key].items():
            console.print(
                f"  {title} {group}: n {values['n']}  EM {values['em']:.3f}  F1 {values['f1']:.3f}  "
                f"gold in answer {values['contains_gold']:.3f}  ROUGE-L {values['rouge_l']:.3f}  "
                f"short EM {values['short_em']:.3f}  "
                f"short F1 {values['short_f1']:.3f}  {values['llm_calls']:.2f} LLM calls",
                highlight=False,
            )
    answerability = report["answerability"]
    if answerability["unanswerable"]:
        console.print(
            f"  answerable {answerability['answerable']}: gold in answer "
            f"{answerability['answerable_contains_gold']}, "
            f"not found {answerability['answerable_not_found_rate']}; unanswerable "
            f"{answerability['unanswerable']}: declined {answerability['unanswerable_declined_rate']}; "
            f"declines holding a gold answer {answerability['declines_with_gold']} of "
            f"{answerability['declines']}",
            highlight=False,
        )
    judgement = report["judgement"]
    bands = ", ".join(
        f"{band} {values['n']} ({values['right']} right, {values['unanswerable']} unanswerable)"
        for band, values in judgement["by_band"].items()
    )
    auroc, ece = judgement["confidence_auroc"], judgement["confidence_ece"]
    console.print(
        f"  bands: {bands}; confidence AUROC {'-' if auroc is None else f'{auroc:.3f}'}, calibration error "
        f"{'-' if ece is None else f'{ece:.3f}'} over {judgement['confidence_records']} answers",
        highlight=False,
    )
