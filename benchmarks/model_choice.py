"""`python -m benchmarks choose-model`: the embedded default chosen by a stated rule from end-to-end QA runs.

The rule (MODEL_CHOICE_RULE): among the embedded instruct models measured end to end on the same questions
of the development halves of every dataset in REQUIRED_DATASETS (`rag eval qa --split dev`; per dataset the
same pipeline and question count for each model), the one with the best mean accuracy over those datasets
whose median answer time (the slowest of its per-dataset latency_p50_s) is within MODEL_CHOICE_P50_BUDGET_S;
ties go to the faster one. Accuracy is a run's `accuracy`: right answers over all questions, where on a set
with unanswerable questions a decline counts as the right answer, so a model that answers more but declines
less honestly does not win by that alone. All three datasets are required because a default serves English
single-hop, multi-hop and Chinese questions alike: a model that wins on one (SmolLM2-135M on SQuAD, through
the extractive answerer) may not read Chinese at all. Until every model has every dataset, the report names
what is missing and chooses nothing.

Why end to end and not the reading test of `python -m benchmarks models`: what a user waits for is the whole
turn
(retrieval, evidence, the answer, the graders), and evidence compression changed how long the answer call
takes, so the reading test's "long prompt within 30 s" no longer decides. The runs record the machine's load
(`machine_load`): the budget is meant for an idle 2-core machine, and the report carries the load so a reader
can tell a busy measurement from an idle one.

`config.settings.DEFAULT_LOCAL_MODEL` must equal the rule's choice in the committed results/model_choice.json;
tests/test_model_choice.py checks it, so the default cannot drift from its measurement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evals.qa_scoring import current_names
from models.local_catalog import CATALOG, LocalModelName

#: Longest median end-to-end answer time a default model may take (s), on an idle 2-core machine.
MODEL_CHOICE_P50_BUDGET_S = 15.0
MODEL_CHOICE_RULE = (
    "the embedded instruct model with the best mean accuracy (right answers and right declines over all "
    "questions) over the development halves of SQuAD 2.0, CMRC 2018 and HotpotQA whose median end-to-end "
    f"answer time is <= {MODEL_CHOICE_P50_BUDGET_S:g} s on each, every model on the same questions; ties -> "
    "the faster; nothing is chosen while a model lacks a dataset"
)
#: Fields that must agree between the runs of one dataset (the same questions, asked the same way).
SAME_RUN_FIELDS = ("dataset", "split", "pipeline", "n", "limit", "skip")
#: Development sets every candidate must be measured on (names as `rag eval qa` reports them).
REQUIRED_DATASETS = ("squad2_dev_mixed400", "cmrc2018_dev", "hotpot_dev_distractor_sample500_amor")


class ModelChoiceError(ValueError):
    """The runs cannot be compared (different questions, a test split, an unknown model)."""


def catalog_name(model_description: str) -> LocalModelName:
    """The catalog name of the embedded model a QA summary names ("<file name> (embedded)")."""
    for name, model in CATALOG.items():
        if model_description.startswith(model.file_name):
            return name
    raise ModelChoiceError(f"{model_description!r} is not an embedded catalog model")


def model_row(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the rule reads of one QA summary (`rag eval qa --json`)."""
    summary = current_names(summary)  # older QA reports say "accuracy"
    name = catalog_name(str(summary.get("model") or ""))
    answerability = current_names(summary.get("answerability") or {})
    return {
        "model": name,
        "instruct": CATALOG[name].instruct,
        "contains_gold": float(summary["contains_gold"]),
        "answerable_contains_gold": answerability.get("answerable_contains_gold"),
        "unanswerable_declined_rate": answerability.get("unanswerable_declined_rate"),
        "short_contains_gold": summary.get("short_contains_gold"),
        "latency_p50_s": float(summary["latency_p50_s"]),
        "latency_p95_s": summary.get("latency_p95_s"),
        "prompt_tokens_per_question": summary.get("prompt_tokens_per_question"),
        "llm_calls_per_question": summary.get("llm_calls_per_question"),
        "questions": int(summary.get("n") or 0),
        "errors": int(summary.get("errors") or 0),
        "machine_load": summary.get("machine_load"),
        "results_file": summary.get("results_file"),
    }


def check_comparable(summaries: Sequence[Mapping[str, Any]]) -> None:
    """ModelChoiceError unless every run is a development run and, per dataset, every model was asked the
    same questions the same way, once."""
    if not summaries:
        raise ModelChoiceError("no QA summary given")
    by_dataset: dict[str, list[Mapping[str, Any]]] = {}
    for summary in summaries:
        if summary.get("split") != "dev":
            raise ModelChoiceError(
                f"a run of split {summary.get('split')!r}: the default is chosen on development questions "
                "only (rag eval qa --split dev)"
            )
        by_dataset.setdefault(str(summary.get("dataset")), []).append(summary)
    for runs in by_dataset.values():
        first = runs[0]
        for summary in runs:
            for name in SAME_RUN_FIELDS:
                if summary.get(name) != first.get(name):
                    raise ModelChoiceError(
                        f"the runs differ in {name} ({first.get(name)!r} vs {summary.get(name)!r}): "
                        "compare models on the same questions"
                    )
        models = [catalog_name(str(summary.get("model") or "")) for summary in runs]
        if len(set(models)) != len(models):
            raise ModelChoiceError(f"a model measured twice on {first.get('dataset')}: {models}")


def model_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One model over its per-dataset rows: mean accuracy, the slowest median, errors and datasets."""
    return {
        "model": rows[0]["model"],
        "instruct": rows[0]["instruct"],
        "contains_gold": round(sum(row["contains_gold"] for row in rows) / len(rows), 4),
        "latency_p50_s": max(row["latency_p50_s"] for row in rows),
        "errors": sum(row["errors"] for row in rows),
        "questions": sum(row["questions"] for row in rows),
        "datasets": sorted(str(row["dataset"]) for row in rows),
    }


def choose_model(
    models: Sequence[Mapping[str, Any]],
    budget_s: float = MODEL_CHOICE_P50_BUDGET_S,
    required: Sequence[str] = REQUIRED_DATASETS,
) -> str | None:
    """The rule's model among `models` (model_summary); None when no instruct model measured on every
    required dataset answered within the budget without errors."""
    eligible = [
        model
        for model in models
        if model["instruct"]
        and model["errors"] == 0
        and model["questions"]
        and set(required) <= set(model["datasets"])
        and model["latency_p50_s"] <= budget_s
    ]
    if not eligible:
        return None
    best = max(eligible, key=lambda model: (model["contains_gold"], -model["latency_p50_s"]))
    return str(best["model"])


def model_choice_report(
    summaries: Sequence[Mapping[str, Any]], required: Sequence[str] = REQUIRED_DATASETS
) -> dict[str, Any]:
    """The report of `python -m benchmarks choose-model`: the rule, each run's row, each model's summary, what
    is still
    missing, and the choice (None while anything required is missing)."""
    check_comparable(summaries)
    rows = [{**model_row(summary), "dataset": summary.get("dataset")} for summary in summaries]
    per_model: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        per_model.setdefault(str(row["model"]), []).append(row)
    models = sorted(
        (model_summary(runs) for runs in per_model.values()), key=lambda model: -model["contains_gold"]
    )
    missing = {
        str(model["model"]): [name for name in required if name not in model["datasets"]] for model in models
    }
    missing = {name: datasets for name, datasets in missing.items() if datasets}
    return {
        "rule": MODEL_CHOICE_RULE,
        "p50_budget_s": MODEL_CHOICE_P50_BUDGET_S,
        "required_datasets": list(required),
        "machine": summaries[0].get("machine"),
        "runs": sorted(rows, key=lambda row: (str(row["dataset"]), -row["contains_gold"])),
        "models": models,
        "missing": missing,
        "chosen": None if missing else choose_model(models, required=required),
    }
