"""The FastAPI app: `create_app(settings)` for `rag serve` and tests, and the module-level `app` that
langgraph.json's `"http": {"app": "./service/api/app.py:app"}` mounts into the LangGraph server, so one
`langgraph dev` serves the LangGraph API and these routes together.

Importing this module builds nothing heavy: settings are read, the runner, stores and models open on first
use (the LangGraph server imports it at start, as it imports the graphs).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi_offline import FastAPIOffline

from config.settings import Settings, get_settings
from graphs.runner import Session
from service.api import (
    routes_conversations,
    routes_documents,
    routes_memory,
    routes_ops,
    routes_rag,
    routes_seed,
    routes_usage,
)
from service.api.auth import parse_api_keys
from service.api.engine import Engine
from service.api.errors import install_error_handlers
from service.api.metrics import ApiMetrics
from service.api.request_guard import BodyCap, GuardedRoutes, RequestGuard
from service.api.runtime import ApiState

TITLE = "Agentic RAG API"
#: Status the client gets for an error no handler maps (counted by the meter as it passes).
INTERNAL_ERROR_STATUS = 500
#: Routes left out of the request metrics (scrapes and liveness probes would drown the real traffic).
UNMETERED = frozenset({"/metrics", "/health"})
#: Routers whose routes resolve a tenant (so need a key when keys are configured).
KEYED_ROUTERS = (
    routes_rag.router,
    routes_seed.router,
    routes_seed.search_router,
    routes_documents.router,
    routes_memory.router,
    routes_conversations.router,
    routes_usage.router,
)


def _route_name(request: Request) -> str:
    """The matched route's template (`/api/v1/documents`), never the raw path."""
    route = request.scope.get("route")
    return getattr(route, "path", "unmatched")


def guarded_routes() -> GuardedRoutes:
    """The API's routes for the request guard: the rag, document and memory routes resolve a tenant, so they
    need a key (when keys are configured); the upload route takes the upload cap."""
    keyed = [route for router in KEYED_ROUTERS for route in router.routes]
    upload = routes_documents.upload_documents
    uploads = [route for route in keyed if getattr(route, "endpoint", None) is upload]
    return GuardedRoutes(routes=[*keyed, *routes_ops.router.routes], keyed=keyed, uploads=uploads)


def create_app(
    settings: Settings | None = None, session_factory: Callable[[Settings], Session] | None = None
) -> FastAPI:
    """The API over `settings` (the process settings by default); `session_factory` replaces the runner
    (tests that script a run's stream item by item)."""
    settings = settings or get_settings()
    state = ApiState(
        settings=settings,
        engine=Engine(settings, session_factory),
        metrics=ApiMetrics(),
        keys=parse_api_keys(settings.api_keys),
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # Loaded before the first request is accepted, not inside its run limit (Engine.warm_up).
        await asyncio.to_thread(state.engine.warm_up)
        # Idle conversations summarize themselves while the server runs (retrieval.auto_summary).
        sweeper = (
            asyncio.create_task(routes_conversations.idle_sweeper(state))
            if settings.summary_idle_s > 0
            else None
        )
        yield
        if sweeper is not None:
            sweeper.cancel()
        state.engine.close()

    # /docs and /redoc with Swagger UI's and ReDoc's files from an installed package (fastapi-offline),
    # not a CDN: the pages work on a machine without internet access.
    app = FastAPIOffline(
        title=TITLE,
        description="Cited answers over your documents: generate, stream, batch, documents, health, metrics.",
        lifespan=lifespan,
    )
    app.state.api = state
    install_error_handlers(app)
    app.include_router(routes_rag.router)
    app.include_router(routes_seed.router)  # seed 001's contract (docs/api-seed.md)
    app.include_router(routes_seed.search_router)
    app.include_router(routes_documents.router)
    app.include_router(routes_ops.router)
    app.include_router(routes_memory.router)
    app.include_router(routes_conversations.router)
    app.include_router(routes_usage.router)  # feedback on answers, the tenant's answer stats
    # Middleware added later wraps the earlier: the meter sees every answer, CORS headers reach the
    # guard's refusals, and the guard runs before FastAPI reads a body.
    app.add_middleware(
        RequestGuard,
        routes=guarded_routes(),
        keys=state.keys,
        json_cap=BodyCap(settings.api_max_json_bytes, "RAG_API_MAX_JSON_BYTES"),
        upload_cap=BodyCap(settings.api_max_upload_bytes, "RAG_API_MAX_UPLOAD_BYTES"),
    )
    origins = [origin.strip() for origin in settings.api_cors_origins.split(",") if origin.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["Content-Type", "Authorization", "X-API-Key"],
        )

    @app.middleware("http")
    async def meter(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """Count every response, the 500 of an unhandled error too: that error passes through here on its
        way to the outermost handler, which answers 500 (service.api.errors)."""
        started = time.perf_counter()

        def record(status: int) -> None:
            route = _route_name(request)
            if route not in UNMETERED:
                state.metrics.record_request(route, request.method, status, time.perf_counter() - started)

        try:
            response = await call_next(request)
        except Exception:
            record(INTERNAL_ERROR_STATUS)
            raise
        record(response.status_code)
        return response

    return app


#: The app langgraph.json mounts (settings from the environment, like the graphs).
app = create_app()
