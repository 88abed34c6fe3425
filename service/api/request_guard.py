"""What a request must show before its body is read: an API key (where the route needs one) and a body within
its cap (RAG_API_MAX_UPLOAD_BYTES for uploads, RAG_API_MAX_JSON_BYTES otherwise). Pure ASGI, in front of
FastAPI, because FastAPI reads a whole body before a route's code runs (300 MB of JSON added ~0.9 GB of
memory). A body is refused from its Content-Length or as soon as its chunks pass the cap; other apps' paths
pass untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.auth import key_tenant, presented_key
from service.api.errors import ApiError, ErrorInfo

#: Methods that never need a key (CORS preflights carry none).
KEYLESS_METHODS = frozenset({"OPTIONS"})


@dataclass(frozen=True)
class BodyCap:
    """A body limit and the setting that sets it (named in the 413)."""

    limit: int
    setting: str

    def refusal(self) -> ErrorInfo:
        """The 413 of a body over this cap."""
        return ErrorInfo(
            413, "PayloadTooLarge", f"request body too large: more than {self.limit} bytes ({self.setting})"
        )


class BodyTooLarge(StarletteHTTPException):
    """Raised from `receive` past the cap (an HTTPException: FastAPI makes other errors a 400)."""

    def __init__(self, cap: BodyCap) -> None:
        super().__init__(413, cap.refusal().message)


@dataclass(frozen=True)
class GuardedRoutes:
    """The API's routes as the guard sees them: all, those needing a key, those taking uploads."""

    routes: Sequence[BaseRoute]
    keyed: Sequence[BaseRoute]
    uploads: Sequence[BaseRoute]


def _route_path(scope: Scope) -> str:
    """The path the app's router matches (without the root path a proxy mounts the app under)."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        return path[len(root) :] or "/"
    return path


def _matching(routes: Sequence[BaseRoute], path: str, method: str | None = None) -> BaseRoute | None:
    """The first route whose path template matches `path` (and that takes `method`, when given)."""
    for route in routes:
        pattern = getattr(route, "path_regex", None)
        methods = getattr(route, "methods", None) or ()
        if pattern is not None and pattern.match(path) and (method is None or method in methods):
            return route
    return None


def _content_length(headers: Headers) -> int | None:
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None


async def _refuse(scope: Scope, receive: Receive, send: Send, info: ErrorInfo, *, close: bool) -> None:
    headers = {"Connection": "close"} if close else None
    await JSONResponse(info.body(), status_code=info.status, headers=headers)(scope, receive, send)


class RequestGuard:
    """ASGI middleware: the key and the body cap, checked before the app reads the body."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: GuardedRoutes,
        keys: Mapping[str, str],
        json_cap: BodyCap,
        upload_cap: BodyCap,
    ) -> None:
        self.app = app
        self.routes, self.keys = routes, dict(keys)
        self.json_cap, self.upload_cap = json_cap, upload_cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = _route_path(scope)
        route = _matching(self.routes.routes, path)
        if route is None:  # not this API's (a LangGraph server route, or a 404)
            await self.app(scope, receive, send)
            return
        scope.setdefault("route", route)  # the request meter names the route of a refused request too
        headers = Headers(scope=scope)
        has_body = "transfer-encoding" in headers or bool(_content_length(headers))
        if scope["method"] not in KEYLESS_METHODS and _matching(self.routes.keyed, path) is not None:
            try:
                key_tenant(self.keys, presented_key(headers))
            except ApiError as error:
                info = ErrorInfo(error.status, error.kind, str(error), error.field)
                await _refuse(scope, receive, send, info, close=has_body)
                return
        upload = _matching(self.routes.uploads, path, scope["method"]) is not None
        cap = self.upload_cap if upload else self.json_cap
        length = _content_length(headers)
        if length is not None and length > cap.limit:
            await _refuse(scope, receive, send, cap.refusal(), close=True)
            return
        await _CappedRequest(self.app, cap)(scope, receive, send)


class _CappedRequest:
    """One request whose body is counted as it arrives; past the cap, its answer is the 413."""

    def __init__(self, app: ASGIApp, cap: BodyCap) -> None:
        self.app, self.cap = app, cap
        self.received = 0
        self.over = False
        self.started = False  # a response went out (the app's or the 413)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counted_receive() -> Message:
            if self.over:
                raise BodyTooLarge(self.cap)
            message = await receive()
            if message["type"] == "http.request":
                self.received += len(message.get("body", b""))
                if self.received > self.cap.limit:
                    self.over = True
                    raise BodyTooLarge(self.cap)
            return message

        async def guarded_send(message: Message) -> None:
            if self.over:  # the app's answer to the exception (a 400, a 413) gives way to the guard's
                if message["type"] == "http.response.start" and not self.started:
                    self.started = True
                    await _refuse(scope, _no_body, send, self.cap.refusal(), close=True)
                return
            if message["type"] == "http.response.start":
                self.started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except BodyTooLarge:
            if self.started:
                return
            self.started = True
            await _refuse(scope, _no_body, send, self.cap.refusal(), close=True)
            return
        if self.over and not self.started:  # the app swallowed the exception and answered nothing
            self.started = True
            await _refuse(scope, _no_body, send, self.cap.refusal(), close=True)


async def _no_body() -> dict[str, Any]:
    """The `receive` of a refusal's response (it reads nothing)."""
    return {"type": "http.disconnect"}
