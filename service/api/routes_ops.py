"""Operations routes: GET /health (liveness), GET /api/v1/rag/health (each dependency checked, with its
latency), GET /metrics (Prometheus).

Why the engine's health checks each store separately: when answers fail, an operator needs to know which
part is down. The vector store, the catalog, the keyword index, the embedding model and the chat model are
each probed with a tiny real operation; the model check asks for one token unless
`RAG_API_HEALTH_MODEL_PROBE=false` (a paid endpoint may not want a call per probe). Any failure makes the
route answer 503 with the reason of each failed check. The report also shows the time limits in force and
how they were derived (service.api.limits: set, an endpoint's fixed values, or the embedded model's measured
speed); /metrics has them as `rag_api_time_limit_seconds`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from langchain_core.messages import HumanMessage

from models.structured import with_max_tokens
from nodes.resources import get_resources
from service.api.metrics import CONTENT_TYPE
from service.api.runtime import ApiState, api_state

router = APIRouter(tags=["operations"])

#: What the model probe asks for (one token is enough to prove the endpoint answers).
PROBE_PROMPT = "Reply with OK."
PROBE_TOKENS = 1


def _check(probe: Callable[[], Any]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detail = probe()
        status = "ok"
    except Exception as error:  # noqa: BLE001 - a failed probe is the health report's content
        detail, status = f"{type(error).__name__}: {error}", "down"
    check: dict[str, Any] = {"status": status, "latency_ms": round((time.perf_counter() - started) * 1000, 2)}
    if detail is not None:
        check["detail"] = detail
    return check


def _probes(state: ApiState) -> dict[str, Callable[[], Any]]:
    resources = get_resources()

    def vector_store() -> Any:
        from persistence.vector_store import chroma_client

        client = chroma_client(resources.kb().settings)
        client.heartbeat()
        return {"collections": len(client.list_collections())}

    def catalog() -> Any:
        return {"chunks": resources.kb().catalog.count_chunks()}

    def keyword_index() -> Any:
        return {"rows": resources.kb().catalog.keyword_rows()}

    def embeddings() -> Any:
        return {"dimensions": len(resources.kb().embeddings.embed_query("health check"))}

    def model() -> Any:
        chat = resources.model("generate")
        if not state.settings.api_health_model_probe:
            return {"model": type(chat).__name__, "probed": False}
        bound = with_max_tokens(chat, PROBE_TOKENS)
        bound.invoke([HumanMessage(PROBE_PROMPT)])
        return {"model": state.settings.llm_model, "probed": True}

    return {
        "vector_store": vector_store,
        "catalog": catalog,
        "keyword_index": keyword_index,
        "embeddings": embeddings,
        "model": model,
    }


@router.get("/health")
def liveness() -> dict[str, str]:
    """The process answers (no dependency is touched)."""
    return {"status": "ok"}


@router.get("/api/v1/rag/health")
async def health(request: Request) -> JSONResponse:
    """Each dependency checked with its latency; 200 when all are ok, else 503."""
    state = api_state(request)
    limits = state.engine.policy.limits()
    checks: dict[str, Any] = {}
    for name, probe in _probes(state).items():
        limit = limits.model_s if name == "model" else limits.retrieval_s
        try:
            checks[name] = await asyncio.wait_for(asyncio.to_thread(_check, probe), timeout=limit)
        except TimeoutError:
            checks[name] = {
                "status": "down",
                "latency_ms": limit * 1000,
                "detail": f"no answer in {limit:g} s",
            }
    healthy = all(check["status"] == "ok" for check in checks.values())
    return JSONResponse(
        {"status": "ok" if healthy else "down", "checks": checks, "limits": state.engine.policy.describe()},
        status_code=200 if healthy else 503,
    )


@router.get("/metrics")
def metrics(request: Request) -> Response:
    """Prometheus text format: requests, errors, latencies per route and per stage, tokens, strategies,
    cache hits and misses, answers by outcome, and the time limits in force."""
    state = api_state(request)
    state.metrics.record_limits(state.engine.policy.limits())
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE)
