"""`python -m benchmarks models`: the embedded models compared (benchmarks/models.py) on the gold-passage
reading test."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from evals.environment import DEFAULT_RESULTS_DIR
from service.cli.common import EXIT_UNAVAILABLE, console, fail, settings_or_exit, user_errors

#: Where the comparison is written (one entry per model; rerunning a model replaces its entry).
DEFAULT_MODELS_RESULTS = DEFAULT_RESULTS_DIR / "models.json"


def eval_models(
    model: Annotated[
        list[str] | None,
        typer.Option(help="Catalog model to measure (repeatable); default every model of the catalog."),
    ] = None,
    hotpotqa: Annotated[
        int, typer.Option(min=0, help="HotpotQA questions (gold paragraphs in the prompt).")
    ] = 100,
    cmrc: Annotated[int, typer.Option(min=0, help="CMRC 2018 questions (the question's paragraph).")] = 50,
    json_questions: Annotated[
        int, typer.Option(min=0, help="Questions (in run order) also asked with json_schema output.")
    ] = 30,
    data_dir: Annotated[
        Path | None, typer.Option(help="The shared data folder (default ../shared/data).")
    ] = None,
    json_out: Annotated[
        Path, typer.Option("--json", help="Results file (merged per model).")
    ] = DEFAULT_MODELS_RESULTS,
) -> None:
    """EM, F1, gold contained in the answer, JSON-schema validity and speed of each embedded model
    (RAG_LOCAL_MODEL)."""
    from benchmarks.data import SHARED_DATA_DIR
    from benchmarks.models import run_models_eval
    from models.local_catalog import LOCAL_MODEL_NAMES, catalog_name

    names = model or list(LOCAL_MODEL_NAMES)
    unknown = [name for name in names if name not in LOCAL_MODEL_NAMES]
    if unknown:
        fail(f"unknown model {unknown[0]!r}; choose among {', '.join(LOCAL_MODEL_NAMES)}")
    if hotpotqa + cmrc == 0:
        fail("--hotpotqa and --cmrc are both 0: nothing to measure")
    settings = settings_or_exit()
    chosen = [known for known in map(catalog_name, names) if known is not None]  # each checked above
    import httpx

    with user_errors():
        try:
            report = run_models_eval(
                chosen,
                settings,
                results_path=json_out,
                data_dir=data_dir or SHARED_DATA_DIR,
                hotpotqa=hotpotqa,
                cmrc=cmrc,
                json_questions=json_questions,
                progress=console.print,
            )
        except httpx.HTTPError as error:  # the model's own server stopped answering: a model that is down
            fail(f"the embedded model's server failed ({type(error).__name__}: {error})", EXIT_UNAVAILABLE)
    table = Table(title=f"embedded models ({report['machine']})")
    for column in ["model", "n", "EM", "F1", "acc", "JSON ok", "pp tok/s", "gen tok/s", "s/q", "1500-tok s"]:
        table.add_column(column)
    for name, row in report["models"].items():
        table.add_row(
            name,
            str(row["questions"]),
            str(row["em"]),
            str(row["f1"]),
            str(row["contains_gold"]),
            str(row["json_valid"]),
            str(row["prompt_tok_s"]),
            str(row["gen_tok_s"]),
            str(row["s_per_question"]),
            f"{row['long_prompt']['alone_s']} (wall {row['long_prompt']['wall_s']})",
        )
    console.print(table)
    console.print(f"default by measurement: {report['default']}; written to {json_out}")


#: Where `python -m benchmarks choose-model` writes the rule's report (config.settings.DEFAULT_LOCAL_MODEL
#: follows it).
DEFAULT_MODEL_CHOICE_RESULTS = DEFAULT_RESULTS_DIR / "model_choice.json"


def eval_choose_model(
    summaries: Annotated[
        list[Path],
        typer.Argument(help="QA summaries (rag eval qa --split dev --json), one per model and dataset."),
    ],
    json_out: Annotated[
        Path, typer.Option("--json", help="Write the report here.")
    ] = DEFAULT_MODEL_CHOICE_RESULTS,
) -> None:
    """The embedded default by rule: the best mean accuracy over the SQuAD 2.0, CMRC 2018 and HotpotQA
    development halves with a median end-to-end answer within 15 s (benchmarks/model_choice.py)."""
    import json

    from benchmarks.model_choice import ModelChoiceError, model_choice_report

    loaded = []
    for path in summaries:
        try:
            loaded.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as error:
            fail(f"cannot read the QA summary {path}: {error}")
    try:
        report = model_choice_report(loaded)
    except (ModelChoiceError, KeyError) as error:
        fail(f"cannot choose a model from these runs: {error}")
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    table = Table(title=f"model choice ({report['machine']})")
    for column in (
        "dataset",
        "model",
        "contains gold",
        "answerable",
        "unanswerable declined",
        "p50 s",
        "p95 s",
    ):
        table.add_column(column)
    for row in report["runs"]:
        table.add_row(
            str(row["dataset"]),
            row["model"],
            f"{row['contains_gold']:.3f}",
            str(row["answerable_contains_gold"]),
            str(row["unanswerable_declined_rate"]),
            f"{row['latency_p50_s']:.1f}",
            str(row["latency_p95_s"]),
        )
    console.print(table)
    for model in report["models"]:
        console.print(
            f"{model['model']}: mean gold contained {model['contains_gold']:.3f} over "
            f"{len(model['datasets'])} dataset(s), slowest p50 {model['latency_p50_s']:.1f} s"
        )
    for name, datasets in report["missing"].items():
        console.print(f"missing for {name}: {', '.join(datasets)}")
    console.print(f"rule: {report['rule']}")
    console.print(f"chosen: {report['chosen']} (written to {json_out})")
