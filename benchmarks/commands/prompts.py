"""`python -m benchmarks prompts`: the answer prompt's devices (few-shot, stop sequences, JSON schema)
switched one at a
time on development questions with an embedded model (benchmarks/prompt_ablation.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from config.settings import LocalModelName, Settings
from evals.environment import DEFAULT_RESULTS_DIR
from service.cli.common import EXIT_UNAVAILABLE, console, fail, settings_or_exit, user_errors

DEFAULT_PROMPTS_RESULTS = DEFAULT_RESULTS_DIR / "prompts.json"
ModelOption = Annotated[
    str | None, typer.Option(help="Catalog model (default: RAG_LOCAL_MODEL, the default model).")
]


def embedded_model(model: str | None, settings: Settings) -> LocalModelName:
    """The catalog model a campaign runs: `model`, or the configured one; exit 2 naming an unknown one."""
    from models.local_catalog import LOCAL_MODEL_NAMES, catalog_name

    name = model or settings.local_model
    known = catalog_name(name)
    if known is None:
        fail(f"unknown model {name!r}; choose among {', '.join(LOCAL_MODEL_NAMES)}")
    return known


def run_on_embedded_server(campaign: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The campaign's report; a failed embedded server is one line and exit 1, a wrong input exit 2."""
    import httpx

    with user_errors():
        try:
            return campaign()
        except httpx.HTTPError as error:
            fail(f"the embedded model's server failed ({type(error).__name__}: {error})", EXIT_UNAVAILABLE)
    raise AssertionError("unreachable: fail() exits")


def eval_prompts(
    model: ModelOption = None,
    hotpotqa: Annotated[int, typer.Option(min=0, help="HotpotQA development questions.")] = 50,
    cmrc: Annotated[int, typer.Option(min=0, help="CMRC 2018 development questions.")] = 25,
    data_dir: Annotated[
        Path | None, typer.Option(help="The shared data folder (default ../shared/data).")
    ] = None,
    json_out: Annotated[Path, typer.Option("--json", help="Results file.")] = DEFAULT_PROMPTS_RESULTS,
) -> None:
    """Short-answer EM / F1 / accuracy, format and grounding rates, tokens and time per prompt variant."""
    from benchmarks.data import SHARED_DATA_DIR
    from benchmarks.prompt_ablation import markdown_table, run_prompt_ablation, write_report

    settings = settings_or_exit()
    name = embedded_model(model, settings)
    if hotpotqa + cmrc == 0:
        fail("--hotpotqa and --cmrc are both 0: nothing to measure")
    report = run_on_embedded_server(
        lambda: run_prompt_ablation(
            settings,
            model=name,
            data_dir=data_dir or SHARED_DATA_DIR,
            hotpotqa=hotpotqa,
            cmrc=cmrc,
            progress=console.print,
        )
    )
    write_report(json_out, report)
    console.print(f"answer prompt variants, {name} ({report['machine']})")
    console.print("\n".join(markdown_table(report)), markup=False, highlight=False)
    console.print(f"written to {json_out}")


DEFAULT_PROMPT_CACHE_RESULTS = DEFAULT_RESULTS_DIR / "prompt_cache.json"


def eval_prompt_cache(
    model: ModelOption = None,
    questions: Annotated[
        Path, typer.Option(help="JSONL of {'question': ...} lines (default: the sample questions).")
    ] = Path("samples/questions.jsonl"),
    corpus: Annotated[Path, typer.Option(help="Folder whose documents are the sources.")] = Path(
        "samples/corpus"
    ),
    json_out: Annotated[Path, typer.Option("--json", help="Results file.")] = DEFAULT_PROMPT_CACHE_RESULTS,
) -> None:
    """Prompt tokens read and reused, and prompt time, with llama.cpp's prompt cache off and on, for the
    engine's answer templates on its embedded server (benchmarks/prompt_cache.py)."""
    import json

    from benchmarks.prompt_ablation import write_report
    from benchmarks.prompt_cache import markdown_table, run_prompt_cache

    settings = settings_or_exit()
    name = embedded_model(model, settings)
    for option, path in (("--questions", questions), ("--corpus", corpus)):
        if not path.exists():
            fail(f"{option}: {path} does not exist")
    lines = questions.read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["question"] for line in lines if line.strip()]
    english = [text for text in texts if text.isascii()]
    if len(english) < 2:
        fail(f"--questions: {questions} holds fewer than two English questions")
    report = run_on_embedded_server(
        lambda: run_prompt_cache(
            settings, model=name, questions=english, corpus=corpus, progress=console.print
        )
    )
    write_report(json_out, report)
    console.print(f"prompt cache, {name} ({report['machine']})")
    console.print("\n".join(markdown_table(report)), markup=False, highlight=False)
    console.print(f"written to {json_out}")
