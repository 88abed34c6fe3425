"""`rag eval router`: how often analyze + select_strategy tell single-hop from multi-hop questions.

The headline `accuracy` is the default analyzer's on the test half, whose questions are never listed (rules
are not written against them); `dev` lists misclassified ones for tuning. The scored prediction is the query
type; the strategy also depends on configuration, so it is reported beside. The model's analysis costs a call
per question, so it runs on a stratified subset.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from config.settings import Settings
from evals.environment import machine_description, model_description
from evals.eval_index import ProgressFactory, no_progress
from evals.metrics import share
from evals.router_questions import (
    LABELS,
    TEST_SHARE,
    Label,
    LabelledQuestion,
    default_labelled_set,
    extra_questions,
    split_questions,
    squad_questions,
    stratified_subset,
)
from nodes.analyze import llm_analysis, use_llm_analyzer
from nodes.resources import Resources, use_resources
from nodes.select_strategy import choose_strategy
from query.classification import heuristic_analysis
from state.context import Context
from state.schemas import QueryAnalysis

#: Query types that mean "needs more than one retrieval" (the scored mapping; see the module doc).
MULTI_HOP_TYPES = frozenset({"MULTI_HOP", "COMPARISON"})
#: Strategies that retrieve more than once or for several entities (the reported secondary mapping).
MULTI_HOP_STRATEGIES = frozenset({"ITERATIVE", "HYBRID", "QUERY_DECOMPOSITION"})
MAPPING_DESCRIPTION = "query type: MULTI_HOP or COMPARISON -> multi-hop; any other type -> single-hop"

DEFAULT_LLM_LIMIT = 100
#: Misclassified questions listed per analyzer in the dev half's report (for reading, not for the numbers).
MISCLASSIFIED_SHOWN = 8
#: The reported slice of long questions naming two entities: at least this many words...
SLICE_MIN_WORDS = 14
#: ... and at least this many capitalised names after the first word (counted here, not by the router).
SLICE_MIN_NAMES = 2
_SLICE_WORD = re.compile(r"[A-Za-z0-9][\w'’.\-]*")

LLMAnalyzer = Callable[[str, QueryAnalysis], QueryAnalysis]


def label_of(analysis: QueryAnalysis) -> Label:
    """single or multi, from the analysis's query type (the scored mapping)."""
    return "multi" if analysis.query_type in MULTI_HOP_TYPES else "single"


def strategy_label(strategy: str) -> Label:
    """single or multi, from the selected strategy (the secondary mapping)."""
    return "multi" if strategy in MULTI_HOP_STRATEGIES else "single"


def confusion_matrix(truth: Sequence[Label], predicted: Sequence[Label]) -> dict[str, dict[str, int]]:
    """true label -> predicted label -> count, every cell present (zeros included)."""
    matrix: dict[str, dict[str, int]] = {true: {guess: 0 for guess in LABELS} for true in LABELS}
    for true, guess in zip(truth, predicted, strict=True):
        matrix[true][guess] += 1
    return matrix


def accuracy(truth: Sequence[Label], predicted: Sequence[Label]) -> float | None:
    """Share of matching labels; None for an empty set."""
    return share(sum(t == p for t, p in zip(truth, predicted, strict=True)), len(truth))


@dataclass
class Prediction:
    """One analyzer's view of one question."""

    question: LabelledQuestion
    analysis: QueryAnalysis
    strategy: str

    @property
    def predicted(self) -> Label:
        """The scored single/multi prediction."""
        return label_of(self.analysis)


def predict(question: LabelledQuestion, analysis: QueryAnalysis, context: Context) -> Prediction:
    """The analysis with the strategy select_strategy would choose for it under `context`."""
    return Prediction(question, analysis, choose_strategy(analysis, context))


def long_with_two_names(text: str) -> bool:
    """Whether a question is long and names two entities (runs of capitalised words after its first word),
    counted apart from query/ so the slice does not move with the router's name finder."""
    words = _SLICE_WORD.findall(text)
    runs = 0
    previous_capitalised = False
    for word in words[1:]:
        capitalised = word[0].isupper()
        runs += capitalised and not previous_capitalised
        previous_capitalised = capitalised
    return len(words) >= SLICE_MIN_WORDS and runs >= SLICE_MIN_NAMES


def _scored(predictions: Sequence[Prediction]) -> dict[str, Any]:
    """n and accuracy of a group of predictions."""
    truth = [p.question.label for p in predictions]
    return {"n": len(predictions), "accuracy": accuracy(truth, [p.predicted for p in predictions])}


def summarize(predictions: Sequence[Prediction], list_misclassified: bool = True) -> dict[str, Any]:
    """Accuracy, confusion, per-source accuracy, strategy and type distributions of one analyzer."""
    truth = [p.question.label for p in predictions]
    guessed = [p.predicted for p in predictions]
    by_source: dict[str, list[Prediction]] = {}
    types: dict[str, Counter[str]] = {label: Counter() for label in LABELS}
    for prediction in predictions:
        by_source.setdefault(prediction.question.source, []).append(prediction)
        types[prediction.question.label][prediction.analysis.query_type] += 1
    wrong = [p for p in predictions if p.predicted != p.question.label][:MISCLASSIFIED_SHOWN]
    sliced = {
        source: [p for p in members if long_with_two_names(p.question.text)]
        for source, members in by_source.items()
    }
    return {
        **_scored(predictions),
        "strategy_accuracy": accuracy(truth, [strategy_label(p.strategy) for p in predictions]),
        "confusion": confusion_matrix(truth, guessed),
        "per_source": {
            source: {"n": len(members), "label": members[0].question.label, **_scored(members)}
            for source, members in by_source.items()
        },
        "long_two_names": {source: _scored(members) for source, members in sliced.items() if members},
        "strategies": {
            source: dict(Counter(p.strategy for p in members).most_common())
            for source, members in by_source.items()
        },
        "query_types": {label: dict(counts.most_common()) for label, counts in types.items()},
        "misclassified": [
            {
                "qid": p.question.qid,
                "source": p.question.source,
                "label": p.question.label,
                "query_type": p.analysis.query_type,
                "text": p.question.text,
            }
            for p in (wrong if list_misclassified else [])
        ],
    }


def _llm_predictions(
    subset: Sequence[LabelledQuestion],
    by_id: dict[tuple[str, str], Prediction],
    llm_analyze: LLMAnalyzer,
    context: Context,
    progress: ProgressFactory,
) -> tuple[list[Prediction], list[float]]:
    """The model's prediction of each question of `subset` (the heuristic's as default), and its seconds."""
    llm: list[Prediction] = []
    seconds: list[float] = []
    advance = progress("LLM analysis", len(subset))
    for question in subset:
        started = time.perf_counter()
        default = by_id[(question.source, question.qid)].analysis
        llm.append(predict(question, llm_analyze(question.text, default), context))
        seconds.append(time.perf_counter() - started)
        advance(1)
    return llm, seconds


def evaluate_router(
    questions: Sequence[LabelledQuestion],
    *,
    context: Context,
    llm_analyze: LLMAnalyzer | None = None,
    llm_limit: int = DEFAULT_LLM_LIMIT,
    default_analyzer: Literal["heuristic", "llm"] = "heuristic",
    progress: ProgressFactory = no_progress,
    list_misclassified: bool = True,
) -> dict[str, Any]:
    """Score the heuristic on every question and `llm_analyze` on a stratified subset of `llm_limit`
    (its fallbacks to the heuristic analysis, on an unusable reply, are counted)."""
    if not questions:
        raise ValueError("no labelled questions")
    advance = progress("heuristic analysis", len(questions))
    heuristic = [predict(question, heuristic_analysis(question.text), context) for question in questions]
    advance(len(questions))
    heuristic_summary = summarize(heuristic, list_misclassified)
    by_id = {(p.question.source, p.question.qid): p for p in heuristic}
    subset = stratified_subset(questions, llm_limit) if llm_analyze is not None else []
    llm, seconds = (
        _llm_predictions(subset, by_id, llm_analyze, context, progress)
        if llm_analyze is not None and subset
        else ([], [])
    )
    llm_summary = summarize(llm, list_misclassified) if llm else None
    subset_heuristic = [by_id[(q.source, q.qid)] for q in subset]
    labels = Counter(question.label for question in questions)
    default_summary = llm_summary if default_analyzer == "llm" and llm_summary else heuristic_summary
    return {
        "n": len(questions),
        "labels": {label: labels.get(label, 0) for label in LABELS},
        "default_analyzer": default_analyzer,
        "accuracy": default_summary["accuracy"],
        "accuracy_n": default_summary["n"],
        "heuristic_accuracy": heuristic_summary["accuracy"],
        "llm_accuracy": llm_summary["accuracy"] if llm_summary else None,
        "llm_n": len(llm),
        "heuristic_accuracy_on_llm_subset": summarize(subset_heuristic)["accuracy"] if subset else None,
        "llm_fallback_rate": share(sum(p.analysis.source != "llm" for p in llm), len(llm)),
        "llm_seconds_per_question": round(sum(seconds) / len(seconds), 3) if seconds else None,
        "mapping": MAPPING_DESCRIPTION,
        "confusion": {
            "heuristic": heuristic_summary["confusion"],
            **({"llm": llm_summary["confusion"]} if llm_summary else {}),
        },
        "heuristic": heuristic_summary,
        "llm": llm_summary,
    }


def evaluate_halves(
    questions: Sequence[LabelledQuestion],
    *,
    context: Context,
    llm_analyze: LLMAnalyzer | None = None,
    llm_limit: int = DEFAULT_LLM_LIMIT,
    default_analyzer: Literal["heuristic", "llm"] = "heuristic",
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """The test half's report with the dev half's (heuristic only, misclassified listed) under "dev"."""
    test, dev = split_questions(questions, "test"), split_questions(questions, "dev")
    if not test or not dev:
        raise ValueError(f"need questions in both halves (dev {len(dev)}, test {len(test)})")
    report = evaluate_router(
        test,
        context=context,
        llm_analyze=llm_analyze,
        llm_limit=llm_limit,
        default_analyzer=default_analyzer,
        progress=progress,
        list_misclassified=False,
    )
    dev_report = evaluate_router(dev, context=context, llm_analyze=None, progress=progress)
    return {
        **report,
        "split": {
            "rule": f"sha256(source:qid) below {TEST_SHARE} of the range -> test, else dev",
            "test_n": len(test),
            "dev_n": len(dev),
        },
        "dev": {
            key: dev_report[key] for key in ("n", "labels", "heuristic_accuracy", "confusion", "heuristic")
        },
    }


def run_router_eval(
    settings: Settings,
    *,
    data_dir: Path | None = None,
    squad_file: Path | None = None,
    extra: Iterable[Path] = (),
    llm_limit: int = DEFAULT_LLM_LIMIT,
    progress: ProgressFactory = no_progress,
) -> dict[str, Any]:
    """The labelled set from `data_dir`, `squad_file` and `extra`, scored with the settings' models."""
    if llm_limit < 0:
        raise ValueError(f"--llm-limit must be >= 0, got {llm_limit}")
    extra = list(extra)
    if data_dir is None and squad_file is None and not extra:
        raise ValueError("no labelled questions: give --data-dir, --squad or --dataset")
    questions = default_labelled_set(data_dir, squad_file) if data_dir is not None else []
    if data_dir is None and squad_file is not None:
        questions += squad_questions(Path(squad_file), "squad")
    for path in extra:
        questions += extra_questions(path)
    context = Context()
    llm_context = Context(analyzer="llm")

    def analyze_with_model(text: str, default: QueryAnalysis) -> QueryAnalysis:
        return llm_analysis(text, default, llm_context)[0]

    with use_resources(Resources(settings)):
        default_analyzer: Literal["heuristic", "llm"] = "llm" if use_llm_analyzer(context) else "heuristic"
        report = evaluate_halves(
            questions,
            context=context,
            llm_analyze=analyze_with_model if llm_limit else None,
            llm_limit=llm_limit,
            default_analyzer=default_analyzer,
            progress=progress,
        )
    return {
        **report,
        "sources": sorted({question.source for question in questions}),
        "machine": machine_description(),
        "model": model_description(settings),
    }
