"""RAG routes: POST /api/v1/rag/generate, /generate/events (the run's events as SSE) and /batch.

The answer's metadata comes from the run's own accounting (per-stage `timings_ms`, token `usage`) and events,
with the seed contract's RAGResponse fields (service.api.seed_runs).
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from sse_starlette.sse import EventSourceResponse

from service.answer_judgement import judgement
from service.api.draft import DRAFT_REPLACED, DraftWatch, sse_event
from service.api.engine import RunSpec
from service.api.routes_seed import generate_stream, seed_batch
from service.api.run_request import metered_answer, run_batch, run_spec
from service.api.runtime import ApiState, api_state
from service.api.schemas import AnswerJudgement, BatchRequest, GenerateRequest
from service.api.seed_runs import (
    cited_answer,
    rewritten_queries,
    rounded_timings,
    stage_seconds,
    token_usage,
)
from service.api.seed_schemas import RAGRequest
from service.api.seed_streams import stream_run

router = APIRouter(prefix="/api/v1/rag", tags=["rag"])


def response_body(
    body: GenerateRequest,
    spec: RunSpec,
    result: dict[str, Any],
    events: list[dict[str, Any]],
    total_ms: float,
) -> dict[str, Any]:
    """The generate response: answer, judgement, citations, sources, strategy, queries, metadata, id."""
    answer, citations = cited_answer(result, body.include_citations)
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
        "rewritten_queries": rewritten_queries(events),
        "not_found": bool(result.get("not_found", False)),
        **AnswerJudgement(**judgement(result)).model_dump(),
        "unsupported_sentences": list(result.get("unsupported_sentences") or []),
        "thread_id": spec.thread_id,
        "answer_id": result.get("answer_id") or None,
        "conversation_id": body.conversation_id,
        "metadata": {
            **stage_seconds(result, total_ms),
            "timings": rounded_timings(result),
            "total_ms": round(total_ms, 2),
            "usage": token_usage(result),
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
    """Answer one question with citations (`stream: true` answers as /generate/stream does)."""
    if body.stream:
        return await generate_stream(body, request)
    state = api_state(request)
    work = answer_one(body, state.tenant(request, body.tenant_id), state)
    return await metered_answer(request, state, "generate", work, f"thread {body.thread_id or '-'}")


class EngineEvents:
    """/generate/events: the engine's own events as SSE; on failure `error`, then `done` (ok false)."""

    def __init__(self) -> None:
        self.draft = DraftWatch()

    def event(self, name: str, data: dict[str, Any]) -> list[dict[str, str]]:
        """The event, after a `draft_replaced` when it withdraws the tokens sent."""
        replaced = self.draft.before(name, data)
        withdrawn = [] if replaced is None else [sse_event(DRAFT_REPLACED, replaced)]
        return [*withdrawn, sse_event(name, data)]

    def token(self, text: str) -> list[dict[str, str]]:
        """A piece of the answer."""
        self.draft.token(text)
        return [sse_event("token", {"text": text})]

    def failed(self, error: dict[str, Any]) -> list[dict[str, str]]:
        """The error event, then a `done` that says the run failed."""
        return [sse_event("error", error), sse_event("done", {"ok": False, "status": error["status"]})]


@router.post("/generate/events")
async def generate_events(body: GenerateRequest, request: Request) -> EventSourceResponse:
    """The answer as the engine's own Server-Sent Events, then done (the generate response)."""
    state = api_state(request)
    spec = run_spec(body, state.tenant(request, body.tenant_id), state)

    def finish(result: dict[str, Any], seen: list[dict[str, Any]], seconds: float) -> list[dict[str, str]]:
        response = _with_model(response_body(body, spec, result, seen, seconds * 1000), state)
        return [sse_event("done", {"ok": True, **response})]

    return stream_run(request, state, spec, EngineEvents(), "generate_events", finish)


@router.post("/batch")
async def batch(body: BatchRequest, request: Request) -> dict[str, Any]:
    """Answer 1-50 questions concurrently (`queries`, the seed API's body: routes_seed)."""
    if body.queries is not None:
        return await seed_batch(body.queries, request)
    return await run_batch(request, body.requests, GenerateRequest.model_validate, answer_one)
