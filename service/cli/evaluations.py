"""`rag eval ...`: evaluations a user runs on their own files (retrieval, latency, QA, router, chaos); the
fit of the answer calibrator on QA results is `rag eval calibrate` (service/cli/eval_calibrate.py).

Each reads the labelled set it is given, in the formats labelled sets come in (BEIR folders, SQuAD / CMRC
JSON, HotpotQA JSON/JSONL). `rag eval load` lives in service/cli/serve.py and is added to `eval_app` in
service/cli/__init__.py, after these. The project's own campaigns (model and prompt ablations, scale,
graders, results/README.md) are `python -m benchmarks ...` in the checkout (benchmarks/README.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.markup import escape
from rich.table import Table

from config.settings import SearchMode
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
    "load, chaos; fit the answer calibrator on QA results.",
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
    modes: list[SearchMode] = [m for m in (mode or ["bm25", "dense", "hybrid"])]  # type: ignore[misc]
    for name in modes:
        if name not in ("dense", "bm25", "hybrid"):
            fail(f"unknown search mode {name!r}; choose among dense, bm25, hybrid")
    if rerank and "hybrid" not in modes:
        fail("--rerank reranks the hybrid list: add --mode hybrid")
    from evals.splits import ALL_SPLITS, SPLITS

    if split not in (*SPLITS, ALL_SPLITS):
        fail(f"unknown split {split!r}; choose one of {', '.join((*SPLITS, ALL_SPLITS))}")
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
    if pool is None or pool == "all":
        return pool
    if not pool.isdigit() or int(pool) < 1:
        fail(f"--pool must be a positive number of questions or 'all', got {pool!r}")
    return int(pool)


@eval_app.command("qa")
def eval_qa(
    dataset: Annotated[
        Path, typer.Option(help="HotpotQA file (JSON array or JSONL) or CMRC 2018 / SQuAD-format file.")
    ],
    pipeline: Annotated[
        str, typer.Option(help="naive | agentic | no-retrieval | gold (naive over the gold paragraphs only).")
    ],
    limit: Annotated[int | None, typer.Option(help="Evaluate only the first N questions.")] = None,
    skip: Annotated[
        int,
        typer.Option(
            min=0, help="Start after the first N questions (a development split beside the reported ones)."
        ),
    ] = 0,
    split: Annotated[
        str,
        typer.Option(
            help="dev | test | all: keep one half of the questions (by a hash of the question id; "
            "evals.splits.split_of) before --skip and --limit. Choose settings on dev, report on test."
        ),
    ] = "all",
    pool: Annotated[
        str | None,
        typer.Option(
            help="Corpus: the paragraphs of the first N questions, or 'all' of the file's (default: of the "
            "evaluated questions). A fixed pool lets a run grow with --limit and resume over one index."
        ),
    ] = None,
    json_out: JsonReportOption = None,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write qa_f1_vs_llm_calls.png into DIR from its QA JSON reports plus this run."),
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(
            help="Per-question JSONL, appended as questions finish; a rerun resumes from it. "
            "Default: results/runs/<dataset>-<pipeline>-<limit>.jsonl."
        ),
    ] = None,
) -> None:
    """EM / F1 / gold contained in the answer / ROUGE-L, support recall, citation precision, not-found rate,
    answers per band (and how many had a right short answer) with the confidence's AUROC and calibration
    error, LLM calls, tokens and latency of a pipeline over the pooled paragraphs of the evaluated
    questions."""
    from evals.qa import PIPELINES, run_qa_eval
    from evals.qa_plot import write_qa_plot
    from evals.qa_scoring import SCORE_KEYS
    from evals.splits import ALL_SPLITS, SPLITS

    if pipeline not in PIPELINES:
        fail(f"unknown pipeline {pipeline!r}; choose one of {', '.join(PIPELINES)}")
    if split not in (*SPLITS, ALL_SPLITS):
        fail(f"unknown split {split!r}; choose one of {', '.join((*SPLITS, ALL_SPLITS))}")
    if limit is not None and limit < 1:
        fail("--limit must be at least 1")
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
    if report["errors"]:
        error_console.print(f"[yellow]{report['errors']} questions failed[/] (see {report['results_file']})")
    console.print(f"[dim]per-question records: {report['results_file']} ({report['resumed']} resumed)[/]")
    if plot:
        written = write_qa_plot(plot, extra=[report])
        console.print(f"plot: {written}")


@eval_app.command("router")
def eval_router(
    json_out: JsonReportOption = None,
    dataset: Annotated[
        list[Path] | None,
        typer.Option(
            help="Extra labelled file (repeatable): HotpotQA format = multi-hop; "
            "BEIR queries.jsonl, BEIR folder or SQuAD format = single-hop."
        ),
    ] = None,
    llm_limit: Annotated[
        int | None,
        typer.Option(
            help="Questions analysed by the model, an equal share per source (default 100; 0 = none)."
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder in the shared-data layout: hotpotqa/*.json* (multi-hop), beir-scifact/ and "
            "cmrc2018/cmrc2018_dev.json.gz (single-hop)."
        ),
    ] = None,
    squad: Annotated[
        Path | None, typer.Option(help="SQuAD-format file of single-hop questions (source 'squad').")
    ] = None,
) -> None:
    """Single- vs multi-hop accuracy of analyze + select_strategy: heuristic and model side by side, on the
    labelled questions of --data-dir, --squad and --dataset (at least one)."""
    from evals.router import DEFAULT_LLM_LIMIT, run_router_eval
    from service.cli.router_report import print_router_report

    if llm_limit is not None and llm_limit < 0:
        fail("--llm-limit must be at least 0")
    settings = settings_or_exit()
    with user_errors(), progress_bars() as bars:
        report = run_router_eval(
            settings,
            data_dir=data_dir,
            squad_file=squad,
            extra=dataset or [],
            llm_limit=DEFAULT_LLM_LIMIT if llm_limit is None else llm_limit,
            progress=bars,
        )
    write_json_report(json_out, report)
    print_router_report(report)


@eval_app.command("chaos")
def eval_chaos(
    json_out: JsonReportOption = None,
    suite: Annotated[
        list[str] | None,
        typer.Option(
            help="Suites to run (repeatable): tenants, turns, injection, hostile, ingest, api, storage, "
            "bounds, sharing, seeds, fairness. Default all."
        ),
    ] = None,
    code_root: Annotated[
        Path | None,
        typer.Option(
            help="Attack another checkout of the engine (for before/after figures). Default: this one."
        ),
    ] = None,
) -> None:
    """Attack the engine as a hostile tenant would and count harm: tenant leaks (CLI and REST API), lost or
    mixed turns, obeyed injections and suppressed answers, stack traces, hangs, wrong exit codes and statuses,
    oversize bodies accepted, checkpoint bytes per turn at turns 10 and 100, peak memory on hostile files.
    Real models, temp data; the last line is 'N passed, M failed'."""
    from evals.chaos import REPO_ROOT, SUITES, run_chaos

    unknown = [name for name in suite or () if name not in SUITES]
    if unknown:
        fail(f"unknown chaos suite(s) {', '.join(unknown)}; choose among {', '.join(SUITES)}")
    with user_errors():
        report = run_chaos(
            code_root=code_root or REPO_ROOT,
            suites=suite or list(SUITES),
            progress=lambda line: error_console.print(escape(line), highlight=False),
        )
    write_json_report(json_out, report)
    table = Table(title=f"chaos ({report['machine']}, {report['seconds']} s)")
    table.add_column("figure")
    table.add_column("count", justify="right")
    for name, value in report["figures"].items():
        table.add_row(name, f"{value:g}")
    if report["bytes_per_turn"] is not None:
        table.add_row(
            "bytes per turn (10 turns)",
            f"{report['bytes_per_turn']:.0f} (target <= {report['bytes_per_turn_target']})",
        )
        table.add_row("checkpoints per turn (10 turns)", f"{report['checkpoints_per_turn']:.1f}")
    if report.get("bytes_per_turn_at_100") is not None:
        table.add_row(
            "bytes per turn at turn 100",
            f"{report['bytes_per_turn_at_100']:.0f} (target <= {report['bytes_per_turn_at_100_target']})",
        )
        table.add_row(
            "bytes added by turn 20 / turn 100",
            f"{report['bytes_added_turn_20']:.0f} / {report['bytes_added_turn_100']:.0f}",
        )
    if report.get("hostile_peak_rss_bytes") is not None:
        table.add_row("peak RSS on hostile inputs", f"{report['hostile_peak_rss_bytes'] / 1024**2:.0f} MiB")
    console.print(table)
    for probe in report["probes"]:
        if not probe["passed"]:
            console.print(
                f"FAIL {probe['suite']}/{probe['name']}: {probe['detail']}", highlight=False, markup=False
            )
    console.print(f"{report['passed']} passed, {report['failed']} failed", highlight=False)
