"""Prometheus metrics of the API (GET /metrics) and the figures `rag stats` prints from them.

Why a registry per app: two apps in one process (tests, the LangGraph server mounting this one) must not
share or double-register counters. Stage latencies come from the run's own `timings_ms` (per node, plus
`model` and `retrieval`), so the histograms show where the time of an answer went.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from service.api.limits import TimeLimits

#: Error kind of a request or batch item refused for its input (service.api.errors.validation_info).
REFUSED_KIND = "ValidationError"
#: Status of an input refused as invalid.
REFUSED_STATUS = 422
#: Routes whose failures are no answers (a search returns passages, not an answer).
NOT_ANSWERS = frozenset({"search"})
#: Latency buckets in seconds: from a cache hit (milliseconds) to a cold answer of a small local model.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: /metrics samples `rag stats` sums into one figure, and those it sums per label value (figure, label).
SUMMED = {"rag_requests_total": "requests", "rag_refused_total": "refused"}
SUMMED_BY_LABEL = {
    "rag_errors_total": ("errors", "kind"),
    "rag_answers_total": ("answers", "outcome"),
    "rag_strategy_total": ("strategies", "strategy"),
    "rag_cache_lookups_total": ("cache", "result"),
    "rag_tokens_total": ("tokens", "kind"),
    "rag_feedback_total": ("feedback", "rating"),
}


class ApiMetrics:
    """The counters and histograms of one app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("rag_requests", "HTTP requests", ["route", "method", "status"], registry=r)
        self.errors = Counter(
            "rag_errors", "Failed requests and batch items by kind", ["route", "kind"], registry=r
        )
        self.request_latency = Histogram(
            "rag_request_latency_seconds", "Request latency", ["route"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.stage_latency = Histogram(
            "rag_stage_latency_seconds",
            "Time per graph stage of an answer (nodes, model, retrieval)",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens = Counter("rag_tokens", "Model tokens", ["kind"], registry=r)
        self.strategies = Counter("rag_strategy", "Answers by retrieval strategy", ["strategy"], registry=r)
        self.cache = Counter("rag_cache_lookups", "Semantic cache lookups by result", ["result"], registry=r)
        self.answers = Counter("rag_answers", "Answers by outcome", ["outcome"], registry=r)
        self.refused = Counter(
            "rag_refused",
            "Requests and batch items refused for invalid input before any run (not failed answers)",
            ["route"],
            registry=r,
        )
        self.feedback = Counter(
            "rag_feedback", "Ratings of answers by users (up, down)", ["rating"], registry=r
        )
        self.disconnects = Counter(
            "rag_client_disconnects",
            "Requests whose client left before its answer (logged as 499; the turn is rolled back)",
            ["route"],
            registry=r,
        )
        self.time_limits = Gauge(
            "rag_api_time_limit_seconds",
            "Time limits in force for a run of the settings' shape, by limit and where it comes from",
            ["limit", "source"],
            registry=r,
        )

    def record_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """One HTTP request (the route template, never the raw path: ids would explode the label set)."""
        self.requests.labels(route, method, str(status)).inc()
        self.request_latency.labels(route).observe(seconds)

    def record_error(self, route: str, kind: str, status: int | None = None) -> None:
        """A failed request or batch item, by kind; invalid input counts as refused, not a failed answer."""
        self.errors.labels(route, kind).inc()
        if kind == REFUSED_KIND or status == REFUSED_STATUS:
            self.refused.labels(route).inc()
        elif route not in NOT_ANSWERS:
            self.answers.labels("failure").inc()

    def record_disconnect(self, route: str) -> None:
        """A client that closed its connection before its answer (a 499 in the log)."""
        self.disconnects.labels(route).inc()

    def record_answer(self, result: dict[str, Any], cache_hit: bool) -> None:
        """A finished run: stage latencies, tokens, strategy, cache result and outcome."""
        for stage, ms in (result.get("timings_ms") or {}).items():
            self.stage_latency.labels(stage).observe(float(ms) / 1000)
        usage = result.get("usage") or {}
        for kind in ("prompt_tokens", "completion_tokens"):
            self.tokens.labels(kind.removesuffix("_tokens")).inc(float(usage.get(kind, 0) or 0))
        self.strategies.labels(result.get("strategy") or "NONE").inc()
        self.cache.labels("hit" if cache_hit else "miss").inc()
        self.answers.labels("not_found" if result.get("not_found") else "success").inc()

    def record_feedback(self, rating: str) -> None:
        """A user's rating of an answer (POST /api/v1/feedback)."""
        self.feedback.labels(rating).inc()

    def record_limits(self, limits: TimeLimits) -> None:
        """The limits in force now (one series per limit: a changed source replaces the old series)."""
        self.time_limits.clear()
        self.time_limits.labels("model", limits.model_source).set(limits.model_s)
        self.time_limits.labels("run", limits.run_source).set(limits.run_s)
        self.time_limits.labels("retrieval", "setting").set(limits.retrieval_s)

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)


def summarize(exposition: str) -> dict[str, Any]:
    """The figures `rag stats` prints, from a /metrics text."""
    figures: dict[str, Any] = {"requests": 0.0, "refused": 0.0, "stage_mean_ms": {}}
    figures.update({group: {} for group, _label in SUMMED_BY_LABEL.values()})
    stage_sum: dict[str, float] = {}
    stage_count: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, float(sample.value)
            if name in SUMMED:
                figures[SUMMED[name]] += value
            elif name in SUMMED_BY_LABEL:
                group, label = SUMMED_BY_LABEL[name]
                figures[group][labels[label]] = figures[group].get(labels[label], 0.0) + value
            elif name == "rag_stage_latency_seconds_sum":
                stage_sum[labels["stage"]] = value
            elif name == "rag_stage_latency_seconds_count":
                stage_count[labels["stage"]] = value
    figures["stage_mean_ms"] = {
        stage: round(stage_sum[stage] / count * 1000, 2)
        for stage, count in sorted(stage_count.items())
        if count and stage in stage_sum
    }
    hits, misses = figures["cache"].get("hit", 0.0), figures["cache"].get("miss", 0.0)
    figures["cache_hit_rate"] = round(hits / (hits + misses), 4) if hits + misses else None
    return figures
