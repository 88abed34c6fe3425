"""The FastAPI app: `create_app(settings)` for `rag serve` and tests, and the module-level `app` that
langgraph.json mounts into the LangGraph server. Importing it opens nothing heavy; under `rag serve` the
lifespan warms the runner, stores and models up in a thread while GET /health already answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi_offline import FastAPIOffline
from starlette.types import ASGIApp, Receive, Scope, Send

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
#: Routes answered while the warm-up still loads the runner, stores and models (they use none of them).
WARM_UP_FREE = ("/health", "/metrics")
#: The API pages (fastapi-offline) and where their Swagger UI and ReDoc files are served.
DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OFFLINE_DOCS_URL = "/static-offline-docs"
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
    """The API's routes for the request guard: those that need a key, and the upload route."""
    keyed = [route for router in KEYED_ROUTERS for route in router.routes]
    upload = routes_documents.upload_documents
    uploads = [route for route in keyed if getattr(route, "endpoint", None) is upload]
    return GuardedRoutes(routes=[*keyed, *routes_ops.router.routes], keyed=keyed, uploads=uploads)


class AfterWarmUp:
    """Holds a request until the warm-up has loaded what its run needs (not liveness, metrics, API pages), so
    the first answer pays no model load inside its run limit. Innermost, so the guard refuses a bad key or
    body before any wait; plain ASGI, so streams pass through untouched."""

    def __init__(self, app: ASGIApp, warming: list[asyncio.Task[float]], free: tuple[str, ...]) -> None:
        self.app = app
        self.warming = warming
        self.free = free

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Wait for the warm-up (shielded: a client that leaves does not cancel it), then pass on."""
        if scope["type"] == "http" and self.warming and not self.warming[0].done():
            if not _is_free(scope["path"], self.free):
                await asyncio.shield(self.warming[0])
        await self.app(scope, receive, send)


def warm_up_free_paths(app: FastAPI) -> tuple[str, ...]:
    """Paths (or path prefixes, ending in '/') that never wait for the warm-up: they use no store or model."""
    pages = (DOCS_URL, REDOC_URL, app.openapi_url, app.swagger_ui_oauth2_redirect_url, f"{OFFLINE_DOCS_URL}/")
    return (*WARM_UP_FREE, *(page for page in pages if page))


def _is_free(path: str, free: tuple[str, ...]) -> bool:
    return any(path.startswith(entry) if entry.endswith("/") else path == entry for entry in free)


def create_app(
    settings: Settings | None = None, session_factory: Callable[[Settings], Session] | None = None
) -> FastAPI:
    """The API over `settings`; `session_factory` replaces the runner (tests)."""
    settings = settings or get_settings()
    state = ApiState(
        settings=settings,
        engine=Engine(settings, session_factory),
        metrics=ApiMetrics(),
        keys=parse_api_keys(settings.api_keys),
    )

    warming: list[asyncio.Task[float]] = []

    # the API pages' files from an installed package (fastapi-offline), not a CDN: they work offline
    app = FastAPIOffline(
        title=TITLE,
        description="Cited answers over your documents: generate, stream, batch, documents, health, metrics.",
        lifespan=_lifespan(state, warming),
        docs_url=DOCS_URL,
        redoc_url=REDOC_URL,
        static_url=OFFLINE_DOCS_URL,
    )
    app.state.api = state
    install_error_handlers(app)
    _include_routers(app)
    _add_middleware(app, state, warming)
    return app


def _lifespan(
    state: ApiState, warming: list[asyncio.Task[float]]
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the warm-up in a thread and the idle summary sweeper; then close the engine."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        warming[:] = [asyncio.create_task(asyncio.to_thread(state.engine.warm_up))]
        sweeper = (
            asyncio.create_task(routes_conversations.idle_sweeper(state))
            if state.settings.summary_idle_s > 0
            else None
        )
        yield
        if sweeper is not None:
            sweeper.cancel()
        await asyncio.shield(warming[0])  # a thread cannot be stopped: close what it opened after it ends
        state.engine.close()

    return lifespan


def _include_routers(app: FastAPI) -> None:
    """Mount every route group: those that resolve a tenant, then the operations routes."""
    for router in (*KEYED_ROUTERS, routes_ops.router):
        app.include_router(router)


def _add_middleware(app: FastAPI, state: ApiState, warming: list[asyncio.Task[float]]) -> None:
    """The middleware stack, innermost first: warm-up wait, request guard, CORS, request meter. Each added
    one wraps the earlier: the meter sees every answer, CORS headers reach the guard's refusals, and the
    guard runs before FastAPI reads a body."""
    settings = state.settings
    app.add_middleware(AfterWarmUp, warming=warming, free=warm_up_free_paths(app))
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
    app.middleware("http")(_meter(state))


def _meter(
    state: ApiState,
) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    """The middleware that counts every response into the API's metrics."""

    async def meter(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """Count every response, the 500 of an unhandled error too (it passes here on its way out)."""
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

    return meter


#: The app langgraph.json mounts (settings from the environment, like the graphs).
app = create_app()
