"""Operations routes: GET /health (liveness), GET /api/v1/rag/health (readiness), GET /metrics (Prometheus).

Without a key the readiness route says only up or down (no model call, nothing counted); with a valid key it
probes that tenant's dependencies with a tiny real operation each and reports them with their latency, the
time limits in force, and "degraded" for a collection that needs `rag doctor --repair` (docs/api.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from langchain_core.messages import HumanMessage

from models.structured import with_max_tokens
from nodes.resources import Resources, get_resources
from service.api.auth import key_tenant, presented_key
from service.api.metrics import CONTENT_TYPE
from service.api.runtime import ApiState, api_state

if TYPE_CHECKING:  # chromadb and SQLAlchemy come with it: imported on the first probe
    from retrieval.knowledge_base import KnowledgeBase

router = APIRouter(tags=["operations"])
logger = logging.getLogger(__name__)

#: What the model probe asks for (one token is enough to prove the endpoint answers).
PROBE_PROMPT = "Reply with OK."
PROBE_TOKENS = 1


#: Status of each view: the anonymous one says only up or down; the tenant's one may be degraded too.
PUBLIC_UP, PUBLIC_DOWN = "up", "down"
#: A failed probe's detail in the report (the error itself is logged).
PROBE_FAILED_MESSAGE = "this dependency failed its check; the server's log has the cause"
#: What a report naming a damaged collection tells the operator to run.
REPAIR_COMMAND = "rag doctor --repair"


class DegradedError(Exception):
    """A probe that answered, but found part of the tenant's data unusable (`detail` says which)."""

    def __init__(self, detail: dict[str, Any]) -> None:
        super().__init__(str(detail.get("message", "degraded")))
        self.detail = detail


def _check(probe: Callable[[], Any]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detail = probe()
        status = "ok"
    except DegradedError as degraded:
        detail, status = degraded.detail, "degraded"
    except Exception as error:  # noqa: BLE001 - a failed probe is the health report's content
        # the tenant reads the kind of failure, never the dependency's own text (it goes to the log)
        logger.warning("health probe failed: %s: %s", type(error).__name__, error)
        detail, status = f"{type(error).__name__}: {PROBE_FAILED_MESSAGE}", "down"
    check: dict[str, Any] = {"status": status, "latency_ms": round((time.perf_counter() - started) * 1000, 2)}
    if detail is not None:
        check["detail"] = detail
    return check


def _stores_answer(resources: Resources) -> None:
    """The anonymous view's probe: Chroma's heartbeat and one trivial catalog read (nothing counted)."""
    from persistence.vector_store import chroma_client

    kb = resources.kb()
    chroma_client(kb.settings).heartbeat()
    with kb.catalog.engine.connect() as connection:
        connection.exec_driver_sql("SELECT 1")


def _tenant_vectors(kb: KnowledgeBase, tenant: str) -> dict[str, Any]:
    """Vectors per collection of `tenant`; DegradedError naming unreadable or incomplete ones."""
    from retrieval.store_health import collection_states, damaged_collection_message

    states = collection_states(kb, tenant)
    detail: dict[str, Any] = {"collections": {s.collection: s.vectors for s in states if not s.damaged}}
    damaged = [state for state in states if state.damaged]
    incomplete = []
    for state in states:
        expected = kb.catalog.count_chunks(tenant, state.collection)
        if state.vectors is not None and state.vectors < expected:
            incomplete.append(
                {"collection": state.collection, "vectors": state.vectors, "catalog_chunks": expected}
            )
    if not damaged and not incomplete:
        return detail
    if damaged:
        detail["damaged"] = [
            {"collection": state.collection, "message": damaged_collection_message(state)}
            for state in damaged
        ]
    if incomplete:
        detail["incomplete"] = incomplete
    names = ", ".join(
        sorted({repr(state.collection) for state in damaged} | {repr(i["collection"]) for i in incomplete})
    )
    detail["message"] = (
        f"collection(s) {names} of tenant {tenant!r} cannot be read or lack vectors; run `{REPAIR_COMMAND}`"
    )
    detail["repair"] = REPAIR_COMMAND
    raise DegradedError(detail)


def _probes(state: ApiState, tenant: str) -> dict[str, Callable[[], Any]]:
    """The detailed view's probes, every figure `tenant`'s own."""
    resources = get_resources()

    def vector_store() -> Any:
        from persistence.vector_store import chroma_client

        kb = resources.kb()
        chroma_client(kb.settings).heartbeat()
        return _tenant_vectors(kb, tenant)

    def catalog() -> Any:
        kb = resources.kb()
        return {"chunks": kb.catalog.count_chunks(tenant), "collections": kb.catalog.collections(tenant)}

    def keyword_index() -> Any:
        resources.kb().catalog.keyword_rows()  # it answers; its size is every tenant's, so not shown
        return None

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
def liveness(request: Request) -> dict[str, str]:
    """The process answers, with its data directory's fingerprint (service/handoff.py)."""
    from service.handoff import data_dir_fingerprint

    return {"status": "ok", "data_dir": data_dir_fingerprint(api_state(request).settings)}


@router.get("/api/v1/rag/health")
async def health(request: Request) -> JSONResponse:
    """Without a key: up (200) or down (503). With a valid key: that tenant's dependencies each checked."""
    state = api_state(request)
    key = presented_key(request.headers)
    tenant = key_tenant(state.keys, key) if key is not None else None
    if tenant is None:
        return await _public_health(state)
    return await _tenant_health(state, tenant)


async def _public_health(state: ApiState) -> JSONResponse:
    """Up or down, nothing else (no model call, no counts, no reasons)."""
    limit = state.engine.policy.limits().retrieval_s
    try:
        check = await asyncio.wait_for(
            asyncio.to_thread(_check, lambda: _stores_answer(get_resources())), timeout=limit
        )
        up = check["status"] == "ok"
    except TimeoutError:
        up = False
    return JSONResponse({"status": PUBLIC_UP if up else PUBLIC_DOWN}, status_code=200 if up else 503)


async def _tenant_health(state: ApiState, tenant: str) -> JSONResponse:
    """The detailed view of one tenant: each probe with its latency, the time limits in force."""
    limits = state.engine.policy.limits()
    checks: dict[str, Any] = {}
    for name, probe in _probes(state, tenant).items():
        limit = limits.model_s if name == "model" else limits.retrieval_s
        try:
            checks[name] = await asyncio.wait_for(asyncio.to_thread(_check, probe), timeout=limit)
        except TimeoutError:
            checks[name] = {
                "status": "down",
                "latency_ms": limit * 1000,
                "detail": f"no answer in {limit:g} s",
            }
    statuses = {check["status"] for check in checks.values()}
    status = "down" if "down" in statuses else "degraded" if "degraded" in statuses else "ok"
    return JSONResponse(
        {"status": status, "tenant": tenant, "checks": checks, "limits": state.engine.policy.describe()},
        status_code=503 if status == "down" else 200,
    )


@router.get("/metrics")
def metrics(request: Request) -> Response:
    """Prometheus text format (requests, errors, latencies, tokens, answers, time limits)."""
    state = api_state(request)
    state.metrics.record_limits(state.engine.policy.limits())
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE)
