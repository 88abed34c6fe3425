"""RAG routes: POST /api/v1/rag/generate, /generate/events (the run's events as SSE) and /batch.

A request maps onto the run's context (state.context.Context: tenant, mode, rewrite, top_k, temperature,
generation_reserve = max_tokens, system_prompt) and the graph's inputs (filters, conversation_id); the thread
is the caller's or a new one. The answer's metadata comes from the run's own accounting (per-stage
`timings_ms`, token `usage`) and its events (the rewritten queries); it carries the seed contract's
RAGResponse fields too (service.api.seed_runs). /generate/stream, the seed's stream, is routes_seed's.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from sse_starlette.sse import EventSourceResponse

from service.answer_judgement import judgement
from service.api.auth import resolve_tenant
from service.api.draft import DRAFT_REPLACED, DraftWatch, sse_event
from service.api.engine import RunSpec
from service.api.errors import ClientDisconnected, ErrorInfo, classify, validation_info
from service.api.routes_seed import generate_stream, seed_batch
from service.api.run_request import metered_answer, run_spec, unless_disconnected
from service.api.runtime import ApiState, api_state
from service.api.schemas import BATCH_CONCURRENCY, AnswerJudgement, BatchRequest, GenerateRequest
from service.api.seed_runs import rag_citations, stage_seconds
from service.api.seed_schemas import RAGRequest

router = APIRouter(prefix="/api/v1/rag", tags=["rag"])

#: Citation markers removed from the answer when the caller does not want citations.
_MARKERS = re.compile(r"\s*\[\d+(?:\s*[,;]\s*\d+)*\]")
#: Seconds between SSE keep-alive comments (proxies close idle streams).
SSE_PING_S = 15


def response_body(
    body: GenerateRequest,
    spec: RunSpec,
    result: dict[str, Any],
    events: list[dict[str, Any]],
    total_ms: float,
) -> dict[str, Any]:
    """The generate response: answer, its judgement (confidence, band, not_found_reason: schemas.
    AnswerJudgement), citations, sources, strategy, rewritten queries, metadata, and the answer's id
    (POST /api/v1/feedback rates it; null when the turn was not recorded)."""
    usage = result.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens", 0) or 0)
    completion_tokens = int(usage.get("completion_tokens", 0) or 0)
    answer = str(result.get("answer") or "")
    citations = rag_citations(result)
    if not body.include_citations:
        answer, citations = _MARKERS.sub("", answer).strip(), []
    rewritten = [
        query
        for event in events
        if event.get("event") == "query_rewritten"
        for query in event["data"]["queries"]
    ]
    return {
        "short_answer": str(result.get("short_answer") or ""),
        "answer": answer,
        "citations": citations,
        "sources": [
            {
                key: source.get(key)
                for key in ("chunk_id", "doc_id", "source", "title", "page", "score", "text")
            }
            for source in result.get("sources") or []
        ],
        "strategy": result.get("strategy") or None,
        "rewritten_queries": list(dict.fromkeys(rewritten)),
        "not_found": bool(result.get("not_found", False)),
        **AnswerJudgement(**judgement(result)).model_dump(),
        "unsupported_sentences": list(result.get("unsupported_sentences") or []),
        "thread_id": spec.thread_id,
        "answer_id": result.get("answer_id") or None,
        "conversation_id": body.conversation_id,
        "metadata": {
            **stage_seconds(result, total_ms),
            "timings": {stage: round(float(ms), 2) for stage, ms in (result.get("timings_ms") or {}).items()},
            "total_ms": round(total_ms, 2),
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "llm_calls": int(result.get("llm_calls", 0) or 0),
            "retrieval_rounds": int(result.get("retrieval_rounds", 0) or 0),
            "generation_rounds": int(result.get("generation_rounds", 0) or 0),
            "chunks_found": len(result.get("retrieved") or []),
            "model": spec.context.model or None,
            "cache_hit": bool(result.get("cache_hit", False)),
            "tenant_id": spec.context.tenant,
        },
    }


def _with_model(response: dict[str, Any], state: ApiState) -> dict[str, Any]:
    response["metadata"]["model"] = response["metadata"]["model"] or state.settings.llm_model
    return response


async def answer_one(body: GenerateRequest, tenant: str, state: ApiState) -> dict[str, Any]:
    """Run one request to the end and build its response (raises the run's error)."""
    started = time.perf_counter()
    spec = run_spec(body, tenant, state)
    result, events = await state.engine.answer(spec)
    response = _with_model(
        response_body(body, spec, result, events, (time.perf_counter() - started) * 1000), state
    )
    state.metrics.record_answer(result, response["metadata"]["cache_hit"])
    return response


@router.post("/generate", response_model=None)
async def generate(body: RAGRequest, request: Request) -> dict[str, Any] | EventSourceResponse:
    """Answer one question with citations, sources, strategy, rewritten queries, timings and token usage
    (`stream: true` answers as /generate/stream does)."""
    if body.stream:
        return await generate_stream(body, request)
    state = api_state(request)
    work = answer_one(body, state.tenant(request, body.tenant_id), state)
    return await metered_answer(request, state, "generate", work, f"thread {body.thread_id or '-'}")


@router.post("/generate/events")
async def generate_events(body: GenerateRequest, request: Request) -> EventSourceResponse:
    """The answer as Server-Sent Events: query_rewritten, documents_retrieved, generation_start, token...,
    generation_complete (answer, citations, sources), then done (the generate response); error on failure.
    draft_replaced (round, reason, answer) comes before a new round's generation_start or before
    generation_complete when the tokens already sent are withdrawn (service.api.draft).
    Bad input, keys and tenants are checked before the stream opens (plain 4xx responses)."""
    state = api_state(request)
    spec = run_spec(body, state.tenant(request, body.tenant_id), state)

    gone = asyncio.Event()  # set by the response when the client disconnects (not on a server shutdown)

    async def on_disconnect(_message: Any) -> None:
        gone.set()

    async def events() -> AsyncIterator[dict[str, str]]:
        started = time.perf_counter()
        seen: list[dict[str, Any]] = []
        result: dict[str, Any] = {}
        draft = DraftWatch()
        try:
            # aclosing: a client that leaves mid-stream closes the run at once (not when it is collected).
            async with contextlib.aclosing(state.engine.run(spec)) as run:
                async for kind, payload in run:
                    if kind == "event":
                        seen.append(payload)
                        replaced = draft.before(payload["event"], payload["data"])
                        if replaced is not None:
                            yield sse_event(DRAFT_REPLACED, replaced)
                        yield sse_event(payload["event"], payload["data"])
                    elif kind == "token":
                        draft.token(payload)
                        yield sse_event("token", {"text": payload})
                    else:
                        result = payload
        except (asyncio.CancelledError, GeneratorExit):
            # The response stops the stream when its client disconnects (cancelled while waiting for the
            # run, or closed at a `yield`); closing the run above abandons and rolls back the turn.
            if gone.is_set():
                state.client_left("generate_events", request, f"thread {body.thread_id or '-'}")
            raise
        except Exception as error:  # noqa: BLE001 - reported to the client as an event, not a broken stream
            info = classify(error)
            state.metrics.record_error("generate_events", info.kind)
            yield sse_event("error", info.body())
            yield sse_event("done", {"ok": False, "status": info.status})
            return
        response = _with_model(
            response_body(body, spec, result, seen, (time.perf_counter() - started) * 1000), state
        )
        state.metrics.record_answer(result, response["metadata"]["cache_hit"])
        yield sse_event("done", {"ok": True, **response})

    return EventSourceResponse(events(), ping=SSE_PING_S, client_close_handler_callable=on_disconnect)


def _item_error(index: int, info: ErrorInfo) -> dict[str, Any]:
    return {"index": index, "ok": False, **info.body()}


@router.post("/batch")
async def batch(body: BatchRequest, request: Request) -> dict[str, Any]:
    """Answer 1-50 questions concurrently (at most BATCH_CONCURRENCY at once). Each item is validated
    and run on its own: a bad or failing item reports its error and status, the others their answers.
    The seed API's body (`queries`) is answered by service.api.routes_seed."""
    if body.queries is not None:
        return await seed_batch(body.queries, request)
    state = api_state(request)
    authorized = state.authorized_tenant(request)  # 401 for the whole request
    gate = asyncio.Semaphore(BATCH_CONCURRENCY)  # at most MAX_BATCH items: the schema's bound
    started = time.perf_counter()

    async def one(index: int, raw: dict[str, Any]) -> dict[str, Any]:
        async with gate:
            try:
                item = GenerateRequest.model_validate(raw)
            except ValidationError as error:
                state.metrics.record_error("batch", "ValidationError")
                return _item_error(index, validation_info(error, located=False))
            try:
                tenant = resolve_tenant(authorized, item.tenant_id, state.settings.default_tenant)
                return {"index": index, "ok": True, "status": 200, **(await answer_one(item, tenant, state))}
            except Exception as error:  # noqa: BLE001 - one item's failure is reported, never raised
                info = classify(error)
                state.metrics.record_error("batch", info.kind)
                return _item_error(index, info)

    try:
        results = await unless_disconnected(
            request, asyncio.gather(*(one(index, raw) for index, raw in enumerate(body.requests)))
        )
    except ClientDisconnected:
        state.client_left("batch", request, f"{len(body.requests)} questions")
        raise
    succeeded = sum(1 for item in results if item["ok"])
    return {
        "results": results,
        "succeeded": succeeded,
        "failed": len(results) - succeeded,
        "total_ms": round((time.perf_counter() - started) * 1000, 2),
    }
