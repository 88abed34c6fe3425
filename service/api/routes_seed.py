"""Seed 001's routes ("API 详解"), served beside the engine's own on the same engine, gates and limits:
POST /api/v1/rag/query, /api/v1/rag/query-stream (SSE), seed bodies of /api/v1/rag/batch (through
routes_rag's batch), and POST /api/v1/search (retrieval only, optional LLM rerank). docs/api-seed.md is the
contract.

A QueryRequest becomes the GenerateRequest of the engine's /generate (routes_rag.run_spec: the same limits,
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

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from sse_starlette.sse import EventSourceResponse

from config.settings import Settings
from core.text import strip_references
from core.types import SearchHit
from graphs.runner import new_thread_id
from nodes.resources import get_resources
from retrieval.rerank import rerank
from service.api.auth import resolve_tenant
from service.api.draft import DRAFT_REPLACED, DraftWatch, sse_event
from service.api.engine import RunSpec
from service.api.errors import ApiError, ClientDisconnected, ErrorInfo, classify, validation_info
from service.api.gate import RunMonitor
from service.api.runtime import ApiState, api_state
from service.api.schemas import GenerateRequest, check_query_chars
from service.api.seed_schemas import (
    CitationInfo,
    QueryRequest,
    QueryResponse,
    SearchRequest,
    SourceInfo,
)
from state.context import Context

router = APIRouter(prefix="/api/v1/rag", tags=["rag (seed 001 contract)"])
search_router = APIRouter(prefix="/api/v1", tags=["search"])
logger = logging.getLogger(__name__)

#: Seconds between SSE keep-alive comments (as the engine's stream).
SSE_PING_S = 15
#: The search route's modes -> (searcher mode, fusion weights or None for the settings' own, or "precise").
SEARCH_MODES: dict[str, str] = {
    "hybrid": "hybrid",
    "dense": "dense",
    "bm25": "bm25",
    "simple": "hybrid",
    "advanced": "hybrid",
    "precise": "hybrid",
}


# --- mapping a QueryRequest onto an engine run --------------------------------------------------------------


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
    """The engine run of a QueryRequest (routes_rag.run_spec, then the seed's switches on its context)."""
    from service.api.routes_rag import run_spec  # late: routes_rag's batch hook imports this module

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


# --- routes ---------------------------------------------------------------------------------------------


@router.post("/query", response_model=None)
async def query(body: QueryRequest, request: Request) -> dict[str, Any] | EventSourceResponse:
    """Seed 001's QueryRequest -> QueryResponse (`stream: true` answers as /query-stream does)."""
    if body.stream:
        return await query_stream(body, request)
    from service.api.routes_rag import metered_answer

    state = api_state(request)
    work = answer_query(body, state.tenant(request, body.tenant_id), state)
    return await metered_answer(request, state, "query", work, f"conversation {body.conversation_id or '-'}")


@router.post("/query-stream")
async def query_stream(body: QueryRequest, request: Request) -> EventSourceResponse:
    """The answer as Server-Sent Events: `start`, `token`... (`draft_replaced` when shown tokens are
    withdrawn), `sources`, then `done` with the QueryResponse; or `error` (the stream's last event).
    Bad input, keys and tenants are checked before the stream opens (plain 4xx responses)."""
    state = api_state(request)
    spec = seed_spec(body, state.tenant(request, body.tenant_id), state)
    gone = asyncio.Event()

    async def on_disconnect(_message: Any) -> None:
        gone.set()

    async def events() -> AsyncIterator[dict[str, str]]:
        started = time.perf_counter()
        seen: list[dict[str, Any]] = []
        result: dict[str, Any] = {}
        draft = DraftWatch()
        yield sse_event(
            "start",
            {
                "query": body.query,
                "conversation_id": spec.thread_id,
                "mode": body.mode,
                "tenant_id": spec.context.tenant,
            },
        )
        try:
            async with contextlib.aclosing(state.engine.run(spec)) as run:
                async for kind, payload in run:
                    if kind == "event":
                        seen.append(payload)
                        replaced = draft.before(payload["event"], payload["data"])
                        if replaced is not None:
                            yield sse_event(DRAFT_REPLACED, replaced)
                    elif kind == "token":
                        draft.token(payload)
                        yield sse_event("token", {"text": payload})
                    else:
                        result = payload
        except (asyncio.CancelledError, GeneratorExit):
            if gone.is_set():
                state.client_left("query_stream", request, f"conversation {spec.thread_id}")
            raise
        except Exception as error:  # noqa: BLE001 - reported to the client as an event, not a broken stream
            info = classify(error)
            state.metrics.record_error("query_stream", info.kind)
            yield sse_event("error", info.body())
            return
        state.metrics.record_answer(result, bool(result.get("cache_hit", False)))
        response = seed_response(body, spec, result, seen, time.perf_counter() - started, state.settings)
        yield sse_event("sources", {"sources": response["sources"], "citations": response["citations"]})
        yield sse_event("done", response)

    return EventSourceResponse(events(), ping=SSE_PING_S, client_close_handler_callable=on_disconnect)


def _item_error(index: int, info: ErrorInfo) -> dict[str, Any]:
    return {"index": index, "ok": False, **info.body()}


async def seed_batch(queries: list[dict[str, Any] | str], request: Request) -> dict[str, Any]:
    """Seed 001's batch body ({"queries": [...]}, each a QueryRequest or a bare query): answered like the
    engine's batch (at most `api_batch_concurrency` at once, each item validated and run on its own), each
    result a QueryResponse with its index, ok and status. Called by routes_rag.batch."""
    from service.api.routes_rag import unless_disconnected

    state = api_state(request)
    authorized = state.authorized_tenant(request)
    if len(queries) > state.settings.api_max_batch:
        raise ApiError(
            422, "ValidationError", f"queries: at most {state.settings.api_max_batch} per batch", "queries"
        )
    gate = asyncio.Semaphore(state.settings.api_batch_concurrency)
    started = time.perf_counter()

    async def one(index: int, raw: dict[str, Any] | str) -> dict[str, Any]:
        async with gate:
            try:
                item = QueryRequest.model_validate({"query": raw} if isinstance(raw, str) else raw)
            except ValidationError as error:
                state.metrics.record_error("batch", "ValidationError")
                return _item_error(index, validation_info(error, located=False))
            try:
                tenant = resolve_tenant(authorized, item.tenant_id, state.settings.default_tenant)
                return {
                    "index": index,
                    "ok": True,
                    "status": 200,
                    **(await answer_query(item, tenant, state)),
                }
            except Exception as error:  # noqa: BLE001 - one item's failure is reported, never raised
                info = classify(error)
                state.metrics.record_error("batch", info.kind)
                return _item_error(index, info)

    try:
        results = await unless_disconnected(
            request, asyncio.gather(*(one(index, raw) for index, raw in enumerate(queries)))
        )
    except ClientDisconnected:
        state.client_left("batch", request, f"{len(queries)} questions")
        raise
    succeeded = sum(1 for item in results if item["ok"])
    return {
        "results": results,
        "succeeded": succeeded,
        "failed": len(results) - succeeded,
        "total_ms": round((time.perf_counter() - started) * 1000, 2),
    }


# --- search ---------------------------------------------------------------------------------------------


def _hit_json(hit: SearchHit, rank: int, fused_rank: int) -> dict[str, Any]:
    return {
        "id": hit.chunk_id,
        "doc_id": hit.doc_id,
        "title": str(hit.metadata.get("title") or ""),
        "content": hit.text,
        "score": float(hit.score),
        "source": str(hit.metadata.get("source") or ""),
        "rank": rank,
        "fused_rank": fused_rank,
        "metadata": {key: value for key, value in hit.metadata.items() if key != "tenant"},
    }


def run_search(body: SearchRequest, tenant: str, state: ApiState) -> dict[str, Any]:
    """The search (in a worker thread): the searcher's hybrid fusion, then the optional rerank, whose one
    model call waits at the engine's model gate like a run's calls (at most `api_queue_timeout_s`)."""
    settings = state.settings
    check_query_chars(body.query, settings.max_query_chars)
    resources = get_resources()
    searcher = resources.searcher()
    weights = (
        (settings.precise_dense_weight, settings.precise_bm25_weight) if body.mode == "precise" else None
    )
    rerank_on = settings.search_rerank if body.rerank is None else body.rerank
    k = max(body.top_k, settings.rerank_candidates) if rerank_on else body.top_k
    started = time.perf_counter()
    found = searcher.search(
        body.query,
        k=k,
        mode=SEARCH_MODES[body.mode],  # type: ignore[arg-type]
        filters=body.filters,
        tenant=tenant,
        collections=[body.collection] if body.collection else None,
        weights=weights,
        directory=body.directory,
    )
    timings = {name: round(ms, 2) for name, ms in found.timings_ms.items()}
    timings["search_ms"] = round((time.perf_counter() - started) * 1000, 2)
    fused = found.hits
    ranked = fused
    rerank_info: dict[str, Any] = {"requested": rerank_on, "ran": False, "reason": ""}
    if rerank_on:
        deadline = time.monotonic() + settings.api_queue_timeout_s
        monitor = RunMonitor(state.engine.gates, lambda: time.monotonic() > deadline)
        monitor.admit()
        try:
            outcome = rerank(
                resources.model("generate"),
                body.query,
                fused,
                passage_chars=settings.rerank_passage_chars,
                callbacks=[monitor],
            )
        finally:
            monitor.release_all()
        ranked = outcome.hits
        rerank_info = {
            "requested": True,
            "ran": outcome.reranked,
            "reason": outcome.reason,
            "candidates": len(fused),
        }
        timings["rerank_ms"] = round(outcome.elapsed_ms, 2)
    position = {hit.chunk_id: rank for rank, hit in enumerate(fused, 1)}
    results = [
        _hit_json(hit, rank, position[hit.chunk_id]) for rank, hit in enumerate(ranked[: body.top_k], 1)
    ]
    return {
        "query": body.query,
        "mode": body.mode,
        "tenant_id": tenant,
        "top_k": body.top_k,
        "count": len(results),
        "results": results,
        "rerank": rerank_info,
        "timings_ms": timings,
    }


@search_router.post("/search")
async def search(body: SearchRequest, request: Request) -> dict[str, Any]:
    """Retrieval only (seed 001's retrieval client): query, mode, filters, top_k, rerank -> ranked passages
    of the caller's tenant, in the engine's worker pool."""
    state = api_state(request)
    tenant = state.tenant(request, body.tenant_id)
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(state.engine.executor, run_search, body, tenant, state)
    except Exception as error:
        state.metrics.record_error("search", classify(error).kind)
        raise
