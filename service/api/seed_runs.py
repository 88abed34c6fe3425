"""Seed 001's QueryRequest as an engine run, and the run's result as a QueryResponse.

Why apart from the routes (service.api.routes_seed): the mapping is pure over the request, the settings and
the run's result, and it is the contract docs/api-seed.md describes; the routes only wait, stream and count.

A QueryRequest becomes the GenerateRequest of the engine's /generate (run_request.run_spec: the same limits,
the same Context mapping, the same statuses), with these differences:
- `conversation_id` is the seed's conversation: the engine thread of the caller's tenant (its history
  rewrites follow-ups and reaches the prompt). It does NOT scope retrieval to documents tagged with the
  conversation, which is what the engine's own `conversation_id` does (a seed client's follow-up would find
  nothing on an ordinary corpus); the engine's routes keep that meaning (tests/test_conversation_scope.py);
- `mode` changes retrieval (nodes.retrieve.mode_retrieval, nodes.rewrite "advanced") as well as the prompt;
- per-request model, Self-RAG and HyDE switches set the run's context; citations and hallucination
  reporting shape the response; `metadata.features` says which ran, with each Self-RAG grade;
- seed 003's reflection switches (query rewriting, reflection rounds, retry strategy) set the run's context
  too; `metadata.features.reflection` reports each round's 1-10 score and suggestions and each retry.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

from config.settings import Settings
from core.text import strip_references
from graphs.runner import new_thread_id
from service.api.engine import RunSpec
from service.api.errors import ApiError
from service.api.run_request import run_spec
from service.api.runtime import ApiState
from service.api.schemas import GenerateRequest
from service.api.seed_schemas import CitationInfo, QueryRequest, QueryResponse, SourceInfo
from state.context import Context


def configured_models(settings: Settings) -> list[str]:
    """The models a request may name: RAG_LLM_MODEL, RAG_GRADER_MODEL and RAG_API_MODELS."""
    names = [settings.llm_model, settings.grader_model or "", *settings.api_models.split(",")]
    return list(dict.fromkeys(name.strip() for name in names if name and name.strip()))


def check_model(model: str | None, settings: Settings) -> None:
    """422 naming the field when `model` is not a configured one."""
    allowed = configured_models(settings)
    if model and model not in allowed:
        raise ApiError(
            422,
            "ValidationError",
            f"model: {model!r} is not a configured model; choose one of {', '.join(allowed)} "
            "(RAG_LLM_MODEL, RAG_GRADER_MODEL, RAG_API_MODELS)",
            "model",
        )


def seed_spec(body: QueryRequest, tenant: str, state: ApiState) -> RunSpec:
    """The engine run of a QueryRequest (run_request.run_spec, then the seed's switches on its context)."""
    check_model(body.model, state.settings)
    generate = GenerateRequest(
        query=body.query,
        tenant_id=body.tenant_id,
        thread_id=body.conversation_id or new_thread_id(),
        mode=body.mode,
        top_k=body.top_k,
        temperature=body.temperature,
        system_prompt=body.system_prompt,
        include_citations=body.enable_citations,
        filters=body.filters,
        directory=body.directory,
    )
    spec = run_spec(generate, tenant, state)
    overrides: dict[str, Any] = {}
    if body.model:
        overrides["model"] = body.model
    if body.enable_self_rag is not None:
        overrides["self_rag"] = body.enable_self_rag
    if body.max_reflection_rounds is not None:
        overrides["max_iterations"] = body.max_reflection_rounds
    if body.retry_strategy is not None:
        overrides["retry_strategy"] = body.retry_strategy
    rewrite = first_search_rewrite(body, spec.context.rewrite)
    if rewrite != spec.context.rewrite:
        overrides["rewrite"] = rewrite
    if body.enable_hyde is False:
        overrides["hyde"] = False
    if overrides:
        spec.context = replace(spec.context, **overrides)
    return spec


def first_search_rewrite(body: QueryRequest, configured: str) -> str:
    """The run's rewrite method from the request's switches: enable_hyde true = hyde; query rewriting off =
    none (HyDE off too), on = auto where the configuration said none; HyDE off = not hyde (auto, or none
    with rewriting off)."""
    rewrite = configured
    if body.enable_query_rewriting is False:
        rewrite = "none"
    elif body.enable_query_rewriting and rewrite == "none":
        rewrite = "auto"
    if body.enable_hyde:
        return "hyde"
    if body.enable_hyde is False and rewrite == "hyde":
        return "auto"
    return rewrite


def reflection_report(
    context: Context, result: dict[str, Any], events: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Seed 003's view of the run: whether the first search was rewritten, and each reflection round (its
    1-10 score, whether it needed improvement, the suggestions the next round used) and retry."""
    first = next(
        (e["data"] for e in events if e.get("event") == "query_rewritten" and e["data"].get("round") == 1),
        {},
    )
    searched = str(result.get("standalone_question") or result.get("question") or "").strip()
    first_queries = [str(text).strip() for text in first.get("queries") or []]
    rewritten = len(first_queries) > 1 or any(text != searched for text in first_queries)
    grades = [event["data"] for event in events if event.get("event") == "answer_graded"]
    return {
        "query_rewriting": {"enabled": context.rewrite != "none", "ran": rewritten},
        "reflection": {
            "enabled": context.self_rag,
            "ran": bool(grades),
            "max_rounds": context.max_iterations,
            "min_score": round(context.quality_threshold * 10, 2),
            "retry_strategy": context.retry_strategy,
            "rounds": [
                {
                    "round": grade["round"],
                    "score": grade.get("reflection_score"),
                    "needs_improvement": grade.get("needs_improvement"),
                    "suggestions": grade.get("suggestions") or [],
                    "action": grade.get("action"),
                }
                for grade in grades
            ],
            "retries": [
                {
                    "round": data.get("round"),
                    "strategy": data.get("retry"),
                    "depth": data.get("depth", 1),
                    "queries": data.get("queries") or [],
                }
                for event in events
                if event.get("event") == "query_rewritten" and (data := event["data"]).get("retry")
            ],
        },
    }


def retrieval_plan(mode: str, top_k: int, settings: Settings) -> dict[str, Any]:
    """What the mode does to retrieval (nodes.retrieve.mode_retrieval, nodes.rewrite), for the response."""
    if mode == "precise":
        weights = {"dense": settings.precise_dense_weight, "bm25": settings.precise_bm25_weight}
        return {"mode": mode, "queries": "by strategy", "k_per_query": top_k, "weights": weights}
    weights = {"dense": settings.dense_weight, "bm25": settings.bm25_weight}
    if mode == "advanced":
        per_query = max(1, math.ceil(top_k / settings.advanced_queries))
        return {
            "mode": mode,
            "queries": settings.advanced_queries,
            "k_per_query": per_query,
            "weights": weights,
        }
    return {"mode": mode, "queries": "by strategy", "k_per_query": top_k, "weights": weights}


def rewritten_query(result: dict[str, Any], events: list[dict[str, Any]], query: str) -> str | None:
    """The question as the engine searched it: the standalone rewrite of a follow-up, else the first
    rewritten search query that differs from the question (None when it was searched as asked)."""
    standalone = str(result.get("standalone_question") or "").strip()
    if standalone and standalone != query.strip():
        return standalone
    for event in events:
        if event.get("event") == "query_rewritten":
            for text in event["data"].get("queries") or []:
                if str(text).strip() != query.strip():
                    return str(text)
    return None


def seed_response(
    body: QueryRequest,
    spec: RunSpec,
    result: dict[str, Any],
    events: list[dict[str, Any]],
    seconds: float,
    settings: Settings,
) -> dict[str, Any]:
    """The QueryResponse of a finished run (validated, as JSON)."""
    citations_on = body.enable_citations
    answer = str(result.get("answer") or "")
    if not citations_on:
        answer = " ".join(strip_references(answer).split(" ")).strip()
    sources = [
        SourceInfo(
            id=str(doc.get("chunk_id") or ""),
            title=str(doc.get("title") or ""),
            content=str(doc.get("text") or ""),
            score=float(doc.get("score") or 0.0),
            source=str(doc.get("source") or ""),
            citation_id=number if citations_on else None,
        )
        for number, doc in enumerate(result.get("sources") or [], 1)
    ]
    citations = [
        CitationInfo(
            citation_num=int(item.get("marker", 0)),
            source_id=str(item.get("chunk_id") or ""),
            confidence=float(item.get("confidence") or 0.0),
        )
        for item in result.get("citations") or []
    ]
    grades = [event["data"] for event in events if event.get("event") == "answer_graded"]
    strategy = result.get("strategy") or None
    usage = result.get("usage") or {}
    context = spec.context
    features: dict[str, Any] = {
        "citations": {"enabled": citations_on, "ran": citations_on and bool(citations)},
        "hallucination_detection": {"enabled": body.enable_hallucination_detection, "ran": False},
        "self_rag": {"enabled": context.self_rag, "ran": bool(grades), "iterations": grades},
        "hyde": {"enabled": body.enable_hyde, "ran": strategy == "HYDE"},
        **reflection_report(context, result, events),
    }
    if body.enable_hallucination_detection and not result.get("cache_hit"):
        features["hallucination_detection"] = {
            "enabled": True,
            "ran": True,
            "unsupported_sentences": list(result.get("unsupported_sentences") or []),
        }
    response = QueryResponse(
        answer=answer,
        sources=sources if body.include_sources else [],
        query=body.query,
        rewritten_query=rewritten_query(result, events, body.query),
        retrieved_count=len(result.get("retrieved") or []),
        generation_time=round(seconds, 3),
        citations=citations if citations_on else [],
        metadata={
            "conversation_id": spec.thread_id,
            "answer_id": result.get("answer_id") or None,
            "tenant_id": context.tenant,
            "mode": body.mode,
            "model": context.model or settings.llm_model,
            "temperature": body.temperature,
            "strategy": strategy,
            "not_found": bool(result.get("not_found", False)),
            "cache_hit": bool(result.get("cache_hit", False)),
            "retrieval": retrieval_plan(body.mode, body.top_k, settings),
            "rewritten_queries": list(
                dict.fromkeys(
                    query
                    for event in events
                    if event.get("event") == "query_rewritten"
                    for query in event["data"]["queries"]
                )
            ),
            "features": features,
            "timings_ms": {
                stage: round(float(ms), 2) for stage, ms in (result.get("timings_ms") or {}).items()
            },
            "usage": {
                "prompt_tokens": int(usage.get("prompt_tokens", 0) or 0),
                "completion_tokens": int(usage.get("completion_tokens", 0) or 0),
            },
            "llm_calls": int(result.get("llm_calls", 0) or 0),
        },
    )
    return response.model_dump()


async def answer_query(body: QueryRequest, tenant: str, state: ApiState) -> dict[str, Any]:
    """Run one QueryRequest to the end (raises the run's error)."""
    started = time.perf_counter()
    spec = seed_spec(body, tenant, state)
    result, events = await state.engine.answer(spec)
    state.metrics.record_answer(result, bool(result.get("cache_hit", False)))
    return seed_response(body, spec, result, events, time.perf_counter() - started, state.settings)
