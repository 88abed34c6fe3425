"""From an HTTP request to an engine run, and waiting for its answer only while the client stays.

Why a module of its own: the engine's routes (service.api.routes_rag) and the seed API's
(service.api.routes_seed) map their bodies onto the same Context and wait for answers the same way, and
routes_rag's batch also answers seed bodies; with these helpers in routes_rag, the two route modules imported
each other.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import fields
from typing import Any, TypeVar

from fastapi import Request

from graphs.runner import new_thread_id
from service.api.engine import RunSpec
from service.api.errors import ClientDisconnected, classify
from service.api.runtime import ApiState, wait_for_disconnect
from service.api.schemas import GenerateRequest, check_query_chars
from state.context import Context

#: The API's rewrite method names -> the context's (`decomposition` is the seed's name for `decompose`).
REWRITE_METHODS = {"decomposition": "decompose"}
T = TypeVar("T")


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`; cancel it when the client disconnects (then raise ClientDisconnected).

    Why: a client that gave up (its own timeout, a closed tab) must not keep its run waiting for or holding
    the single model while other requests queue behind it; cancelling abandons the run (service.api.engine).
    Listening on `receive` rather than polling `Request.is_disconnected`, which never sees the disconnect
    behind a BaseHTTPMiddleware (the app's request meter)."""
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
    """`work` unless the client leaves (unless_disconnected); a failure is counted under `route`, and a
    client that left is logged and counted as a 499 (`detail` names what it left)."""
    try:
        return await unless_disconnected(request, work)
    except Exception as error:
        info = classify(error)
        state.metrics.record_error(route, info.kind, info.status)
        if isinstance(error, ClientDisconnected):
            state.client_left(route, request, detail)
        raise
