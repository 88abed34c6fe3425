"""Figures of the recorded answers from the audit table (per strategy, per model, tokens, cost, feedback),
as SQL aggregates, so `rag stats` reports with no server running. Rows without a strategy or model count
under `unknown` and are left out of averages (the `..._measured` counts say how many answers they rest on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, case, func, select

from config.settings import Settings
from persistence.audit import ANSWER_ACTION
from persistence.database import AuditLogRow, Database, as_utc

#: The group of rows that did not record a strategy or a model (written before revision 0004, or none).
UNKNOWN = "unknown"
DIGITS = 4


@dataclass(frozen=True)
class Prices:
    """Token prices per 1,000 (RAG_PRICE_PROMPT_PER_1K, RAG_PRICE_COMPLETION_PER_1K): with neither set there
    is no cost to report (None), with one set the other counts 0."""

    prompt_per_1k: float | None = None
    completion_per_1k: float | None = None

    @classmethod
    def of(cls, settings: Settings) -> Prices:
        """The settings' prices."""
        return cls(settings.price_prompt_per_1k, settings.price_completion_per_1k)

    @property
    def set(self) -> bool:
        """Whether any price is set (a cost is reported)."""
        return self.prompt_per_1k is not None or self.completion_per_1k is not None

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float | None:
        """The price of these tokens; None when no price is set."""
        if not self.set:
            return None
        prompt = prompt_tokens / 1000 * (self.prompt_per_1k or 0.0)
        completion = completion_tokens / 1000 * (self.completion_per_1k or 0.0)
        return round(prompt + completion, 6)


def _round(value: Any) -> float | None:
    return None if value is None else round(float(value), DIGITS)


def _answers(tenant: str | None) -> Any:
    """The WHERE clause of a tenant's answers (every tenant's when None)."""
    clause = AuditLogRow.action == ANSWER_ACTION
    return clause if tenant is None else clause & (AuditLogRow.tenant == tenant)


def _count_where(condition: Any) -> Any:
    """How many rows meet `condition` (a portable SUM(CASE ...): SQLite and PostgreSQL alike)."""
    return func.sum(case((condition, 1), else_=0))


def _strategy_query(tenant: str | None) -> Select[Any]:
    row = AuditLogRow
    return (
        select(
            row.strategy,
            func.count(),
            func.avg(row.latency_ms),
            func.count(row.latency_ms),
            func.avg(row.confidence),
            func.count(row.confidence),
            func.sum(row.prompt_tokens),
            func.sum(row.completion_tokens),
            func.count(row.prompt_tokens),
            _count_where(row.feedback == "up"),
            _count_where(row.feedback == "down"),
        )
        .where(_answers(tenant))
        .group_by(row.strategy)
    )


def _strategy_figures(values: tuple[Any, ...], prices: Prices) -> dict[str, Any]:
    _, answers, latency, latencies, confidence, confidences, prompt, completion, measured, up, down = values
    figures: dict[str, Any] = {
        "answers": int(answers),
        "mean_latency_ms": None if latency is None else round(float(latency), 2),
        "latency_measured": int(latencies),
        "mean_confidence": _round(confidence),
        "confidence_measured": int(confidences),
        "prompt_tokens": int(prompt or 0),
        "completion_tokens": int(completion or 0),
        "tokens_measured": int(measured),
        "feedback_up": int(up or 0),
        "feedback_down": int(down or 0),
    }
    cost = prices.cost(figures["prompt_tokens"], figures["completion_tokens"])
    if cost is not None:
        figures["cost"] = cost
    return figures


def _totals(database: Database, tenant: str | None) -> dict[str, Any]:
    row = AuditLogRow
    query = select(
        func.count(),
        _count_where(row.not_found),
        _count_where(row.cache_hit),
        func.min(row.created_at),
        func.max(row.created_at),
        _count_where(row.feedback == "up"),
        _count_where(row.feedback == "down"),
        func.count(row.feedback_comment),
    ).where(_answers(tenant))
    with database.session() as session:
        answers, not_found, cache_hits, first, last, up, down, comments = session.execute(query).one()
    return {
        "answers": int(answers or 0),
        "not_found": int(not_found or 0),
        "cache_hits": int(cache_hits or 0),
        "feedback": {"up": int(up or 0), "down": int(down or 0), "comments": int(comments or 0)},
        "first_answer_at": None if first is None else as_utc(first).isoformat(),
        "last_answer_at": None if last is None else as_utc(last).isoformat(),
    }


def answer_stats(
    database: Database, *, tenant: str | None = None, prices: Prices | None = None
) -> dict[str, Any]:
    """The figures of `tenant`'s recorded answers (every tenant's when None): totals, `strategies` (per
    strategy: answers, mean latency and confidence, tokens, feedback, cost when priced), `models` (answers
    per model), `feedback` (thumbs up, down, comments), `tokens` and `cost` (only when a price is set)."""
    prices = prices or Prices()
    figures: dict[str, Any] = {"tenant": tenant, **_totals(database, tenant)}
    with database.session() as session:
        strategies = {
            (values[0] or UNKNOWN): _strategy_figures(tuple(values), prices)
            for values in session.execute(_strategy_query(tenant)).all()
        }
        models_query = (
            select(AuditLogRow.model, func.count()).where(_answers(tenant)).group_by(AuditLogRow.model)
        )
        models: dict[str, int] = {}
        for model, answers in session.execute(models_query).all():
            models[model or UNKNOWN] = models.get(model or UNKNOWN, 0) + int(answers)
    figures["strategies"] = dict(sorted(strategies.items()))
    figures["models"] = dict(sorted(models.items()))
    prompt = sum(group["prompt_tokens"] for group in strategies.values())
    completion = sum(group["completion_tokens"] for group in strategies.values())
    figures["tokens"] = {
        "prompt": prompt,
        "completion": completion,
        "measured": sum(group["tokens_measured"] for group in strategies.values()),
    }
    cost = prices.cost(prompt, completion)
    if cost is not None:
        figures["cost"] = cost
    return figures
