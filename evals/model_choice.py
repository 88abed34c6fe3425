"""`rag eval choose-model`: the embedded default chosen by a stated rule from end-to-end QA runs.

The rule (MODEL_CHOICE_RULE): among the embedded instruct models measured end to end on the same questions
of a development split (`rag eval qa --split dev`, the same dataset, pipeline and question count for each),
the most accurate one whose median answer time (latency_p50_s) is within MODEL_CHOICE_P50_BUDGET_S; ties go
to the faster one. Accuracy is the run's `accuracy`: right answers over all questions, where on a set with
unanswerable questions a decline counts as the right answer, so a model that answers more but declines less
honestly does not win by that alone.

Why end to end and not the reading test of `rag eval models`: what a user waits for is the whole turn
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

from models.local_catalog import CATALOG

#: Longest median end-to-end answer time a default model may take (s), on an idle 2-core machine.
MODEL_CHOICE_P50_BUDGET_S = 15.0
MODEL_CHOICE_RULE = (
    "the most accurate embedded instruct model (accuracy: right answers and right declines over all "
    f"questions) whose median end-to-end answer time is <= {MODEL_CHOICE_P50_BUDGET_S:g} s, measured on the "
    "same development questions; ties -> the faster"
)
#: Fields that must agree between the runs compared (the same questions, asked the same way).
SAME_RUN_FIELDS = ("dataset", "split", "pipeline", "n", "limit", "skip")


class ModelChoiceError(ValueError):
    """The runs cannot be compared (different questions, a test split, an unknown model)."""


def catalog_name(model_description: str) -> str:
    """The catalog name of the embedded model a QA summary names ("<file name> (embedded)")."""
    for name, model in CATALOG.items():
        if model_description.startswith(model.file_name):
            return name
    raise ModelChoiceError(f"{model_description!r} is not an embedded catalog model")


def model_row(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the rule reads of one QA summary (`rag eval qa --json`)."""
    name = catalog_name(str(summary.get("model") or ""))
    answerability = summary.get("answerability") or {}
    return {
        "model": name,
        "instruct": CATALOG[name].instruct,  # type: ignore[index]  # catalog_name returns catalog keys
        "accuracy": float(summary["accuracy"]),
        "answerable_accuracy": answerability.get("answerable_accuracy"),
        "unanswerable_declined_rate": answerability.get("unanswerable_declined_rate"),
        "short_accuracy": summary.get("short_accuracy"),
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
    """ModelChoiceError unless every run asked the same development questions the same way."""
    if not summaries:
        raise ModelChoiceError("no QA summary given")
    first = summaries[0]
    for summary in summaries:
        if summary.get("split") != "dev":
            raise ModelChoiceError(
                f"a run of split {summary.get('split')!r}: the default is chosen on development questions "
                "only (rag eval qa --split dev)"
            )
        for name in SAME_RUN_FIELDS:
            if summary.get(name) != first.get(name):
                raise ModelChoiceError(
                    f"the runs differ in {name} ({first.get(name)!r} vs {summary.get(name)!r}): "
                    "compare models on the same questions"
                )
    models = [catalog_name(str(summary.get("model") or "")) for summary in summaries]
    if len(set(models)) != len(models):
        raise ModelChoiceError(f"a model measured twice: {models}")


def choose_model(
    rows: Sequence[Mapping[str, Any]], budget_s: float = MODEL_CHOICE_P50_BUDGET_S
) -> str | None:
    """The rule's model among `rows` (model_row); None when no instruct model answered within the budget
    without errors."""
    eligible = [
        row
        for row in rows
        if row["instruct"] and row["errors"] == 0 and row["questions"] and row["latency_p50_s"] <= budget_s
    ]
    if not eligible:
        return None
    best = max(eligible, key=lambda row: (row["accuracy"], -row["latency_p50_s"]))
    return str(best["model"])


def model_choice_report(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The report of `rag eval choose-model`: the rule, each model's row and the choice."""
    check_comparable(summaries)
    rows = sorted((model_row(summary) for summary in summaries), key=lambda row: -row["accuracy"])
    first = summaries[0]
    return {
        "rule": MODEL_CHOICE_RULE,
        "p50_budget_s": MODEL_CHOICE_P50_BUDGET_S,
        "questions": {name: first.get(name) for name in SAME_RUN_FIELDS},
        "machine": first.get("machine"),
        "models": rows,
        "chosen": choose_model(rows),
    }
