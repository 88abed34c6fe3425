"""One mapping from the engine's errors to HTTP statuses (table: docs/api.md), used by every route, the SSE
`error` event and each batch item, so the same failure always reads the same way: bad input 422, keys 401 /
403, a busy thread 409, a model or store down or a full queue 503 (with Retry-After), a time limit 504, a
client gone 499 (logged and counted only), anything else 500 (logged with its stack, one line to the client).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from models.errors import ModelUnavailableError
from persistence.errors import STORE_DOWN_MESSAGE
from persistence.thread_lock import ThreadBusyError
from persistence.vector_store import StoreUnavailableError
from retrieval.embeddings import EmbeddingError

logger = logging.getLogger(__name__)

#: Status of a request whose client went away (nginx's convention; no client ever receives it).
CLIENT_CLOSED_REQUEST = 499
#: Attribute set on an exception once it is logged: a route classifies an error twice (its metrics, then
#: its answer), and the server log should hold it once.
_LOGGED_MARK = "_rag_logged"


class RunTimeout(TimeoutError):
    """A run, a model call or a retrieval took longer than its setting allows."""


class QueueTimeout(TimeoutError):
    """Waited past `api_queue_timeout_s` for a run slot or the model: busy, not broken (503, Retry-After)."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ClientDisconnected(ConnectionError):
    """The client left while its request waited or ran: the run is abandoned, so it no longer holds a worker
    or the model for the requests still waiting."""


class ApiError(Exception):
    """An error a route raises on purpose, with its status and kind."""

    def __init__(self, status: int, kind: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.field = status, kind, field


@dataclass(frozen=True)
class ErrorInfo:
    """What a client is told about a failure."""

    status: int
    kind: str
    message: str
    field: str | None = None
    retry_after_s: int | None = None

    def body(self) -> dict[str, Any]:
        """The JSON body of an error response (and of an SSE `error` event, a failed batch item)."""
        body: dict[str, Any] = {"error": self.kind, "message": self.message, "status": self.status}
        if self.field:
            body["field"] = self.field
        if self.retry_after_s is not None:
            body["retry_after_s"] = self.retry_after_s
        return body

    def headers(self) -> dict[str, str] | None:
        """Response headers: Retry-After when the client should come back later."""
        return None if self.retry_after_s is None else {"Retry-After": str(self.retry_after_s)}


def classify(error: BaseException) -> ErrorInfo:
    """The status, kind and one-line message of an exception."""
    kind = type(error).__name__
    message = str(error) or kind
    if isinstance(error, ApiError):
        return ErrorInfo(error.status, error.kind, message, error.field)
    if isinstance(error, RunTimeout):
        return ErrorInfo(504, "Timeout", message)
    if isinstance(error, QueueTimeout):
        return ErrorInfo(503, "Busy", message, retry_after_s=error.retry_after_s)
    if isinstance(error, ClientDisconnected):
        return ErrorInfo(CLIENT_CLOSED_REQUEST, "ClientDisconnected", message)
    if isinstance(error, ThreadBusyError):
        return ErrorInfo(409, kind, message)
    if isinstance(error, PermissionError):  # ThreadAccessError is one
        return ErrorInfo(403, kind, message)
    if isinstance(error, StoreUnavailableError):
        if _first_time_logged(error):
            logger.error("store unavailable (%s): %s", kind, message)  # the cause, for the operator only
        return ErrorInfo(503, kind, STORE_DOWN_MESSAGE)
    if isinstance(error, ModelUnavailableError | EmbeddingError):
        return ErrorInfo(503, kind, message)
    if isinstance(error, ValueError):  # InvalidQuestionError, FilterError, QueryError, Context fields
        return ErrorInfo(422, kind, message)
    if _first_time_logged(error):
        logger.exception("unexpected error", exc_info=error)
    return ErrorInfo(500, "InternalError", f"internal error ({kind}); see the server log")


def _first_time_logged(error: BaseException) -> bool:
    """True the first time `error` is asked about (it is then marked): the caller logs it then only."""
    if getattr(error, _LOGGED_MARK, False):
        return False
    try:
        setattr(error, _LOGGED_MARK, True)
    except AttributeError:  # an exception type with __slots__: logged each time rather than never
        pass
    return True


def validation_info(error: RequestValidationError | ValidationError, *, located: bool = True) -> ErrorInfo:
    """A pydantic 422 as one line naming the field (`located`: a request's, not a batch item's)."""
    first = error.errors()[0] if error.errors() else {}
    location = [str(part) for part in first.get("loc", ())]
    if located and location and location[0] in ("body", "query", "path", "form", "header"):
        location = location[1:]
    field = ".".join(location) or None
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    return ErrorInfo(422, "ValidationError", f"{field}: {message}" if field else message, field)


def install_error_handlers(app: FastAPI) -> None:
    """Every failure leaves the API as `{"error", "message", "status"[, "field"]}` with its status."""

    # Starlette types every handler as taking Exception: each narrows to the class it is registered for.
    async def on_validation(request: Request, error: Exception) -> JSONResponse:
        if not isinstance(error, RequestValidationError):
            return await on_error(request, error)
        info = validation_info(error)
        detail = [{key: item.get(key) for key in ("loc", "msg", "type")} for item in error.errors()]
        return JSONResponse({**info.body(), "detail": detail}, status_code=422)

    async def on_http(request: Request, error: Exception) -> JSONResponse:
        if not isinstance(error, StarletteHTTPException):
            return await on_error(request, error)
        info = ErrorInfo(error.status_code, "HTTPError", str(error.detail))
        return JSONResponse(info.body(), status_code=error.status_code, headers=error.headers)

    async def on_error(_request: Request, error: Exception) -> JSONResponse:
        info = classify(error)
        return JSONResponse(info.body(), status_code=info.status, headers=info.headers())

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    # by class: a handler for plain Exception runs in Starlette's outermost middleware, which re-raises
    for documented in DOCUMENTED_ERRORS:
        app.add_exception_handler(documented, on_error)
    app.add_exception_handler(Exception, on_error)


#: Errors with a documented status (see the table above).
DOCUMENTED_ERRORS: tuple[type[Exception], ...] = (
    ApiError,
    RunTimeout,
    QueueTimeout,
    ClientDisconnected,
    ThreadBusyError,
    ValueError,
    PermissionError,
    ModelUnavailableError,
    StoreUnavailableError,
    EmbeddingError,
)
