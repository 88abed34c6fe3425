"""From an HTTP request to an engine run, waiting for its answer only while the client stays, and batches.

Shared by the engine's routes (service.api.routes_rag) and the seed API's (service.api.routes_seed), which
would otherwise import each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from graphs.runner import new_thread_id
from service.api.auth import resolve_tenant
from service.api.engine import RunSpec
from service.api.errors import ClientDisconnected, ErrorInfo, classify, validation_info
from service.api.runtime import ApiState, api_state, wait_for_disconnect
from service.api.schemas import BATCH_CONCURRENCY, GenerateRequest, check_query_chars
from state.context import Context

#: The API's rewrite method names -> the context's (`decomposition` is the seed's name for `decompose`).
REWRITE_METHODS = {"decomposition": "decompose"}
T = TypeVar("T")
Item = TypeVar("Item", bound=BaseModel)


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`; cancel it when the client disconnects (then raise ClientDisconnected), so a client that
    gave up keeps no run waiting for or holding the model (listening as wait_for_disconnect does)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done() and gone.exception() is not None:  # cannot listen: just wait for the answer
            await asyncio.wait({task})
        if task.done():
            return task.result()
        raise ClientDisconnected("the client closed the connection before its answer")
    finally:
        for pending in (task, gone):
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pending


def run_context(body: GenerateRequest, tenant: str, state: ApiState) -> Context:
    """The run's context for a request (the query's length checked first, naming the field)."""
    settings = state.settings
    check_query_chars(body.query, settings.max_query_chars)
    values: dict[str, Any] = {
        "tenant": tenant,
        "mode": body.mode,
        "rewrite": REWRITE_METHODS.get(body.rewrite_method, body.rewrite_method),
        "top_k": body.top_k,
        "max_query_chars": settings.max_query_chars,
    }
    if body.temperature is not None:
        values["temperature"] = body.temperature
    if body.max_tokens is not None:
        values["generation_reserve"] = body.max_tokens
    if body.system_prompt:
        values["system_prompt"] = body.system_prompt
    if body.user_id is not None:
        values["user_id"] = body.user_id
    if body.directory:
        values["directory"] = body.directory
    if body.rerank is not None:
        values["rerank"] = body.rerank
    if "use_cache" in {spec.name for spec in fields(Context)}:  # the semantic cache's bypass flag
        values["use_cache"] = body.use_cache
    return Context(**values)


def run_spec(body: GenerateRequest, tenant: str, state: ApiState) -> RunSpec:
    """What the engine runs for a request."""
    inputs: dict[str, Any] = {"filters": body.filters or {}}
    if body.conversation_id:
        inputs["conversation_id"] = body.conversation_id
    if body.conversation_metadata:
        inputs["conversation_metadata"] = body.conversation_metadata
    return RunSpec(
        question=body.query,
        thread_id=body.thread_id or new_thread_id(),
        context=run_context(body, tenant, state),
        inputs=inputs,
    )


async def metered_answer(request: Request, state: ApiState, route: str, work: Awaitable[T], detail: str) -> T:
    """`work` unless the client leaves; a failure is counted under `route` (a client gone: a logged 499)."""
    try:
        return await unless_disconnected(request, work)
    except Exception as error:
        info = classify(error)
        state.metrics.record_error(route, info.kind, info.status)
        if isinstance(error, ClientDisconnected):
            state.client_left(route, request, detail)
        raise


def _item_error(index: int, info: ErrorInfo) -> dict[str, Any]:
    return {"index": index, "ok": False, **info.body()}


async def run_batch(
    request: Request,
    raw_items: list[Any],
    parse: Callable[[Any], Item],
    answer: Callable[[Item, str, ApiState], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """Answer a batch, BATCH_CONCURRENCY items at once, each validated (`parse`) and run on its own."""
    state = api_state(request)
    authorized = state.authorized_tenant(request)
    gate = asyncio.Semaphore(BATCH_CONCURRENCY)
    started = time.perf_counter()

    async def one(index: int, raw: Any) -> dict[str, Any]:
        async with gate:
            try:
                item = parse(raw)
            except ValidationError as error:
                state.metrics.record_error("batch", "ValidationError")
                return _item_error(index, validation_info(error, located=False))
            try:
                tenant = resolve_tenant(
                    authorized, getattr(item, "tenant_id", None), state.settings.default_tenant
                )
                return {"index": index, "ok": True, "status": 200, **(await answer(item, tenant, state))}
            except Exception as error:  # noqa: BLE001 - one item's failure is reported, never raised
                info = classify(error)
                state.metrics.record_error("batch", info.kind)
                return _item_error(index, info)

    try:
        results = await unless_disconnected(
            request, asyncio.gather(*(one(index, raw) for index, raw in enumerate(raw_items)))
        )
    except ClientDisconnected:
        state.client_left("batch", request, f"{len(raw_items)} questions")
        raise
    succeeded = sum(1 for item in results if item["ok"])
    return {
        "results": results,
        "succeeded": succeeded,
        "failed": len(results) - succeeded,
        "total_ms": round((time.perf_counter() - started) * 1000, 2),
    }
