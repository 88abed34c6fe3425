"""The aggregate of a QA run's records: score means, answerability, not-found reasons, bands, the
confidence's AUROC and calibration error, cost, latency, load. Recomputed from the records at any time (a
resumed run, an older run with fewer scores), so it only reads them.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evals.metrics import (
    DIGITS,
    auroc,
    band_counts,
    expected_calibration_error,
    linear_percentile,
    mean_of_defined,
    rounded,
    share,
)
from evals.qa_scoring import (
    NOT_FOUND_REASONS,
    SCORE_KEYS,
    SUPPORT_RECALL_KEY,
    UNRECORDED_REASON,
    is_answerable,
    rescored,
)

#: Group name of records without a strategy (the no-retrieval graph sets none) or without a type.
NO_GROUP = "NONE"
#: Keys of `timings_ms` that are costs summed over nodes, not nodes.
COST_TIMING_KEYS = frozenset({"model", "retrieval"})


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def answerability_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How the run treated answerable and unanswerable questions, and how many declines threw away a right
    candidate (`candidate_right`). Rates over an empty group are None."""
    complete = [rescored(record) for record in records]
    answerable = [record for record in complete if is_answerable(record)]
    unanswerable = [record for record in complete if not is_answerable(record)]
    declines = [record for record in complete if record.get("not_found")]
    declines_with_gold = sum(1 for record in declines if float(record.get("candidate_right") or 0.0) == 1.0)
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "answerable_contains_gold": share(
            sum(float(record["contains_gold"]) == 1.0 for record in answerable), len(answerable)
        ),
        "answerable_not_found_rate": share(
            sum(bool(record.get("not_found")) for record in answerable), len(answerable)
        ),
        "unanswerable_declined_rate": share(
            sum(bool(record.get("not_found")) for record in unanswerable), len(unanswerable)
        ),
        "declines": len(declines),
        "declines_with_gold": declines_with_gold,
        "declines_with_gold_share": share(declines_with_gold, len(declines)),
    }


def score_means(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The mean of each answer score over `records` (rescored when they predate a score)."""
    complete = [rescored(record) for record in records]
    return {key: round(_mean([float(record[key]) for record in complete]), DIGITS) for key in SCORE_KEYS}


def reason_group(reason: str) -> str:
    """The NOT_FOUND_REASONS entry a reason starts with (the reason itself when none does)."""
    if not reason:
        return UNRECORDED_REASON
    return next((known for known in NOT_FOUND_REASONS if reason.startswith(known)), reason)


def not_found_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Why answers were "not found": the count per reason group."""
    groups = [
        reason_group(str(record.get("not_found_reason") or ""))
        for record in records
        if record.get("not_found")
    ]
    return {"reasons": {name: groups.count(name) for name in sorted(set(groups))}}


#: The band group of records written before records named their band (and of failed questions).
UNRECORDED_BAND = "unrecorded"


def band_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per band: answers, right candidates, unanswerable questions; the confidence's AUROC and ECE."""
    bands = [str(record.get("band") or UNRECORDED_BAND) for record in records]
    judged = [record for record in records if record.get("confidence") is not None]
    confidences = [float(record["confidence"]) for record in judged]
    right = [float(record.get("candidate_right") or 0.0) for record in judged]
    return {
        "by_band": band_counts(
            bands,
            [float(record.get("candidate_right") or 0.0) == 1.0 for record in records],
            [record.get("answerable") is False for record in records],
            sorted(set(bands)),
        ),
        "confidence_records": len(judged),
        "confidence_auroc": rounded(auroc(confidences, right)),
        "confidence_ece": rounded(expected_calibration_error(confidences, right)),
    }


#: How records from before the per-record stamps are counted in `code_commits`.
UNRECORDED_COMMIT = "unrecorded (answered before records named their commit)"


def load_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The 1-minute load average when the questions started against the core count: latencies of a run
    that shared the cores are not a quiet run's."""
    loads = [float(record["load_1m"]) for record in records if record.get("load_1m") is not None]
    return {
        "cores": os.cpu_count(),
        "questions_measured": len(loads),
        "load_1m_median": round(statistics.median(loads), 2) if loads else None,
        "load_1m_max": max(loads) if loads else None,
    }


def _breakdown(records: Sequence[Mapping[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """Per value of `key` (a strategy, a type): n, the answer scores, LLM calls and support recall."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        groups.setdefault(str(record.get(key) or NO_GROUP), []).append(record)
    return {
        name: {
            "n": len(members),
            **score_means(members),
            "llm_calls": round(_mean([record["llm_calls"] for record in members]), 2),
            SUPPORT_RECALL_KEY: rounded(
                mean_of_defined(record.get(SUPPORT_RECALL_KEY) for record in members)
            ),
        }
        for name, members in sorted(groups.items())
    }


def aggregate(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The run's numbers over its records. A failed question counts in `n` with zero scores (a benchmark
    must not improve by crashing) but not in the cost means, which describe answered questions."""
    answered = [record for record in records if not record.get("error")]
    latencies = [float(record["latency_s"]) for record in answered]
    tokens = [record["prompt_tokens"] + record["completion_tokens"] for record in answered]
    per_node: dict[str, float] = {}
    for record in answered:
        for node, value in (record.get("timings_ms") or {}).items():
            if node not in COST_TIMING_KEYS:
                per_node[node] = per_node.get(node, 0.0) + float(value)
    has_kinds = any(record.get("kind") for record in records)
    sources = [str(record.get("short_answer_source") or "none") for record in answered]
    return {
        "n": len(records),
        "errors": len(records) - len(answered),
        **score_means(records),
        "short_answer_sources": {name: sources.count(name) for name in sorted(set(sources))},
        SUPPORT_RECALL_KEY: rounded(mean_of_defined(record.get(SUPPORT_RECALL_KEY) for record in records)),
        "citation_precision": rounded(
            mean_of_defined(record.get("citation_precision") for record in records)
        ),
        "citation_rate": round(_mean([float(bool(record.get("cited"))) for record in answered]), DIGITS),
        "not_found_rate": round(_mean([float(record["not_found"]) for record in records]), DIGITS),
        "not_found": not_found_summary(records),
        "answerability": answerability_summary(records),
        "judgement": band_summary(records),
        "llm_calls_per_question": round(_mean([record["llm_calls"] for record in answered]), 2),
        "tokens_per_question": round(_mean(tokens), 1),
        "prompt_tokens_per_question": round(_mean([record["prompt_tokens"] for record in answered]), 1),
        "completion_tokens_per_question": round(
            _mean([record["completion_tokens"] for record in answered]), 1
        ),
        "latency_p50_s": round(linear_percentile(latencies, 50), 3) if latencies else None,
        "latency_p95_s": round(linear_percentile(latencies, 95), 3) if latencies else None,
        "latency_mean_s": round(_mean(latencies), 3) if latencies else None,
        "per_node_ms": {node: round(total / len(answered), 2) for node, total in sorted(per_node.items())},
        "by_strategy": _breakdown(records, "strategy"),
        "by_type": _breakdown(records, "kind") if has_kinds else {},
        "machine_load": load_summary(records),
        "code_commits": dict(
            Counter(str(record.get("code_commit") or UNRECORDED_COMMIT) for record in records)
        ),
    }
