"""`rag ask` and `rag search` through a running `rag serve` of the same data directory (service/handoff.py):
the options become the API's request fields and its answer the shape the commands print. The server's
refusal is the command's error: exit 2 for a refused request, 1 for a server down, busy or out of time.
"""

from __future__ import annotations

from typing import Any, NoReturn

from config.settings import Settings
from service.cli.common import EXIT_BAD_INPUT, EXIT_UNAVAILABLE, fail

#: The first HTTP status of a server-side failure (below it, the request itself was refused).
SERVER_ERROR_STATUS = 500
#: Statuses that mean "not now" rather than "not this request": overloaded (429) or out of time (408).
BUSY_STATUSES = frozenset({408, 429})


def handoff_server(settings: Settings, local: bool) -> str | None:
    """The base URL of a running `rag serve` of this data directory, unless `--local` was given."""
    if local:
        return None
    from service.handoff import same_data_server

    return same_data_server(settings)


def _post(base: str, path: str, body: dict[str, Any], settings: Settings) -> dict[str, Any]:
    from service.handoff import ServerLost, ServerRefused, post_json

    try:
        return post_json(
            base, path, {key: value for key, value in body.items() if value is not None}, settings
        )
    except ServerRefused as error:
        _refused(base, error.status, str(error))
    except ServerLost as error:
        fail(f"the server stopped answering: {error}", EXIT_UNAVAILABLE)


def _refused(base: str, status: int, message: str) -> NoReturn:
    unavailable = status >= SERVER_ERROR_STATUS or status in BUSY_STATUSES
    fail(
        f"{message} (rag serve at {base}, HTTP {status})", EXIT_UNAVAILABLE if unavailable else EXIT_BAD_INPUT
    )


def ask_on_server(
    base: str,
    settings: Settings,
    question: str,
    *,
    thread: str | None,
    mode: str | None,
    tenant: str | None,
    filters: dict[str, Any] | None,
    conversation_id: str | None,
    user: str | None,
    directory: str | None,
) -> dict[str, Any]:
    """The server's answer to `question` as the output state `rag ask` prints (POST /api/v1/rag/generate)."""
    response = _post(
        base,
        "/api/v1/rag/generate",
        {
            "query": question,
            "thread_id": thread,
            "mode": mode,
            "tenant_id": tenant,
            "filters": filters or None,
            "conversation_id": conversation_id,
            "user_id": user,
            "directory": directory,
        },
        settings,
    )
    return answer_result(question, response)


def answer_result(question: str, response: dict[str, Any]) -> dict[str, Any]:
    """The generate route's answer in the output state's shape that `rag ask` prints."""
    metadata = response.get("metadata") or {}
    usage = metadata.get("usage") or {}
    return {
        "question": question,
        "short_answer": response.get("short_answer") or "",
        "answer": response.get("answer") or "",
        "not_found": bool(response.get("not_found")),
        "confidence": response.get("confidence"),
        "band": response.get("band"),
        "not_found_reason": response.get("not_found_reason") or "",
        "citations": list(response.get("citations") or []),
        "sources": list(response.get("sources") or []),
        "unsupported_sentences": list(response.get("unsupported_sentences") or []),
        "strategy": response.get("strategy") or "",
        "thread_id": response.get("thread_id"),
        "answer_id": response.get("answer_id"),
        "conversation_id": response.get("conversation_id"),
        "retrieval_rounds": int(metadata.get("retrieval_rounds") or 0),
        "generation_rounds": int(metadata.get("generation_rounds") or 0),
        "timings_ms": dict(metadata.get("timings") or {}),
        "usage": {
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
        },
        "llm_calls": int(metadata.get("llm_calls") or 0),
        "cache_hit": bool(metadata.get("cache_hit")),
    }


def search_on_server(
    base: str,
    settings: Settings,
    query: str,
    *,
    k: int | None,
    mode: str | None,
    filters: dict[str, Any] | None,
    tenant: str | None,
    collection: str | None,
    directory: str | None,
) -> Any:
    """The server's hits for `query` as the searcher's SearchResult (POST /api/v1/search, no rerank)."""
    from core.types import SearchHit
    from retrieval.search import SearchResult

    response = _post(
        base,
        "/api/v1/search",
        {
            "query": query,
            "top_k": k or settings.top_k,
            "mode": mode,
            "filters": filters or None,
            "tenant_id": tenant,
            "collection": collection,
            "directory": directory,
            "rerank": False,
        },
        settings,
    )
    hits = [
        SearchHit(
            chunk_id=str(item.get("id") or ""),
            text=str(item.get("content") or ""),
            metadata=dict(item.get("metadata") or {}),
            score=float(item.get("score") or 0.0),
        )
        for item in response.get("results") or []
    ]
    timings = {name: float(ms) for name, ms in (response.get("timings_ms") or {}).items()}
    return SearchResult(hits=hits, timings_ms=timings)
