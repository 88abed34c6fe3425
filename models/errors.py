"""Errors of the model layer, and which provider failures mean "the model is down" (recognised by class
name and HTTP status, so callers import no provider package).

Garbage from a model has a fallback in each node; a down endpoint is the operator's problem, so it raises
`ModelUnavailableError` (CLI exit 1, API 503) instead of hiding behind normal-looking answers.
"""

from __future__ import annotations

import asyncio
from typing import Any


class ModelUnavailableError(RuntimeError):
    """A configured language model cannot be used; the message says what to install or set to fix it."""


#: Class names (anywhere in the MRO) of openai / httpx errors that mean no usable reply can come.
UNREACHABLE_ERRORS = frozenset(
    {"APIConnectionError", "APITimeoutError", "TransportError", "TimeoutException"}
)
#: HTTP statuses that mean "the service is unwell", not "this request was wrong" (after the client's retries).
SERVER_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: HTTP statuses that mean the endpoint is misconfigured: a refused key, or no such model / path.
CONFIG_STATUSES = frozenset({401, 403, 404})
#: Settings an operator checks when the endpoint is down, named in the error line.
ENDPOINT_SETTINGS = "RAG_LLM_BASE_URL / RAG_GRADER_BASE_URL"


def is_model_unavailable(error: BaseException) -> bool:
    """Whether a provider error means the endpoint is down or refuses us (no retry of the prompt can help)."""
    if isinstance(error, ModelUnavailableError):
        return True
    if isinstance(error, TimeoutError | ConnectionError | asyncio.TimeoutError):
        return True
    if {cls.__name__ for cls in type(error).__mro__} & UNREACHABLE_ERRORS:
        return True
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and status in SERVER_STATUSES | CONFIG_STATUSES


def endpoint_of(model: Any, error: BaseException) -> str:
    """The URL a model talks to (its base URL, else the failed request's URL), or its class name."""
    for attribute in ("openai_api_base", "base_url"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    request = getattr(error, "request", None)
    url = getattr(request, "url", None)
    return str(url) if url else type(model).__name__


def model_unavailable(error: BaseException, model: Any) -> ModelUnavailableError:
    """One line for a down endpoint: which endpoint, what failed, which settings to check."""
    if isinstance(error, ModelUnavailableError):
        return error
    endpoint = endpoint_of(model, error)
    status = getattr(error, "status_code", None)
    detail = f"{type(error).__name__}: {error}".replace("\n", " ")
    if status in (401, 403):
        hint = "the endpoint refused the API key; check RAG_LLM_API_KEY / RAG_GRADER_API_KEY"
    elif status == 404:
        hint = f"no such model or path; check RAG_LLM_MODEL and {ENDPOINT_SETTINGS}"
    else:
        hint = f"check {ENDPOINT_SETTINGS} and that the server is running"
    return ModelUnavailableError(f"model endpoint {endpoint} is unavailable ({detail}); {hint}")


def raise_if_unavailable(error: BaseException, model: Any) -> None:
    """Re-raise a down-endpoint error as ModelUnavailableError; return for anything else (a bad reply)."""
    if is_model_unavailable(error):
        raise model_unavailable(error, model) from error
