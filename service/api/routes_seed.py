"""The seed contract's routes (docs/api-seed.md), on the engine's gates and limits: POST /api/v1/rag/query,
/query-stream and /generate/stream, seed bodies of /api/v1/rag/batch, and POST /api/v1/search (retrieval
only, optional LLM rerank). The mapping onto an engine run is service.api.seed_runs.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette.sse import EventSourceResponse

from config.settings import SearchMode
from core.types import SearchHit
from nodes.resources import Resources, get_resources
from retrieval.public_source import public_metadata, public_source
from retrieval.rerank import RERANK_CANDIDATES, RERANK_PASSAGE_CHARS, RerankResult, rerank
from retrieval.search_depth import PRECISE_WEIGHTS
from service.answer_judgement import judgement
from service.api.errors import classify
from service.api.gate import RunMonitor
from service.api.run_request import metered_answer, run_batch, run_spec
from service.api.runtime import ApiState, api_state
from service.api.schemas import AnswerJudgement, check_query_chars
from service.api.seed_runs import answer_query, cited_answer, rag_metadata, seed_response, seed_spec
from service.api.seed_schemas import QueryRequest, RAGRequest, SearchRequest
from service.api.seed_streams import GenerateStream, QueryStream, stream_run

router = APIRouter(prefix="/api/v1/rag", tags=["rag (seed API contract)"])
search_router = APIRouter(prefix="/api/v1", tags=["search"])
logger = logging.getLogger(__name__)

#: The search route's modes -> the searcher's ("precise" also sets PRECISE_WEIGHTS).
SEARCH_MODES: dict[str, SearchMode] = {
    "hybrid": "hybrid",
    "dense": "dense",
    "bm25": "bm25",
    "simple": "hybrid",
    "advanced": "hybrid",
    "precise": "hybrid",
}


@router.post("/query", response_model=None)
async def query(body: QueryRequest, request: Request) -> dict[str, Any] | EventSourceResponse:
    """The seed API's QueryRequest -> QueryResponse (`stream: true` answers as /query-stream does)."""
    if body.stream:
        return await query_stream(body, request)
    state = api_state(request)
    work = answer_query(body, state.tenant(request, body.tenant_id), state)
    return await metered_answer(request, state, "query", work, f"conversation {body.conversation_id or '-'}")


@router.post("/query-stream")
async def query_stream(body: QueryRequest, request: Request) -> EventSourceResponse:
    """The answer as the seed's stream, ending in generation_complete (the QueryResponse) and [DONE]."""
    state = api_state(request)
    spec = seed_spec(body, state.tenant(request, body.tenant_id), state)
    plan = QueryStream(body.query)

    def finish(result: dict[str, Any], seen: list[dict[str, Any]], seconds: float) -> list[dict[str, str]]:
        return plan.finish(seed_response(body, spec, result, seen, seconds, state.settings))

    return stream_run(request, state, spec, plan, "query_stream", finish)


@router.post("/generate/stream")
async def generate_stream(body: RAGRequest, request: Request) -> EventSourceResponse:
    """The answer as the seed's stream: context, chunk..., citations, done."""
    state = api_state(request)
    spec = run_spec(body, state.tenant(request, body.tenant_id), state)
    plan = GenerateStream(body.query)

    def finish(result: dict[str, Any], _seen: list[dict[str, Any]], seconds: float) -> list[dict[str, str]]:
        answer, citations = cited_answer(result, body.include_citations)
        metadata = rag_metadata(result, seconds * 1000, spec.context.model or state.settings.llm_model)
        done = {
            "thread_id": spec.thread_id,
            "answer_id": result.get("answer_id") or None,
            **AnswerJudgement(**judgement(result)).model_dump(),
            "metadata": metadata,
        }
        return plan.finish(answer, citations, done)

    return stream_run(request, state, spec, plan, "generate_stream", finish)


async def seed_batch(queries: list[dict[str, Any] | str], request: Request) -> dict[str, Any]:
    """The seed API's batch body, each item a QueryRequest or a bare query (called by routes_rag.batch)."""

    def parse(raw: dict[str, Any] | str) -> QueryRequest:
        return QueryRequest.model_validate({"query": raw} if isinstance(raw, str) else raw)

    return await run_batch(request, queries, parse, answer_query)


def _hit_json(hit: SearchHit, rank: int, fused_rank: int, tenant: str, data_dir: Path) -> dict[str, Any]:
    """One ranked passage; its source and doc id in public form (retrieval.public_source), never a path."""
    metadata = public_metadata(hit.metadata, tenant=tenant, data_dir=data_dir)
    return {
        "id": hit.chunk_id,
        "doc_id": public_source(hit.doc_id, tenant=tenant, data_dir=data_dir),
        "title": str(hit.metadata.get("title") or ""),
        "content": hit.text,
        "score": float(hit.score),
        "source": str(metadata.get("source") or ""),
        "rank": rank,
        "fused_rank": fused_rank,
        "metadata": {key: value for key, value in metadata.items() if key != "tenant"},
    }


def _gated_rerank(
    state: ApiState, resources: Resources, query: str, fused: list[SearchHit], tenant: str
) -> RerankResult:
    """Rerank the fused hits with the generation model, its call admitted at the engine's model gate."""
    deadline = time.monotonic() + state.settings.api_queue_timeout_s
    monitor = RunMonitor(state.engine.gates, lambda: time.monotonic() > deadline, tenant)
    monitor.admit()
    try:
        return rerank(
            resources.model("generate"),
            query,
            fused,
            passage_chars=RERANK_PASSAGE_CHARS,
            callbacks=[monitor],
        )
    finally:
        monitor.release_all()


def run_search(body: SearchRequest, tenant: str, state: ApiState) -> dict[str, Any]:
    """The search (in a worker thread): the searcher's fusion, then the optional rerank."""
    settings = state.settings
    check_query_chars(body.query, settings.max_query_chars)
    resources = get_resources()
    searcher = resources.searcher()
    weights = PRECISE_WEIGHTS if body.mode == "precise" else None
    rerank_on = settings.search_rerank if body.rerank is None else body.rerank
    k = max(body.top_k, RERANK_CANDIDATES) if rerank_on else body.top_k
    started = time.perf_counter()
    found = searcher.search(
        body.query,
        k=k,
        mode=SEARCH_MODES[body.mode],
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
        outcome = _gated_rerank(state, resources, body.query, fused, tenant)
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
        _hit_json(hit, rank, position[hit.chunk_id], tenant, settings.data_dir)
        for rank, hit in enumerate(ranked[: body.top_k], 1)
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
    """Retrieval only: ranked passages of the caller's tenant, in the engine's worker pool."""
    state = api_state(request)
    tenant = state.tenant(request, body.tenant_id)
    try:
        return await state.engine.in_worker(tenant, lambda: run_search(body, tenant, state))
    except Exception as error:
        state.metrics.record_error("search", classify(error).kind)
        raise
