"""Custom stream events: what a client watching a run is told while it happens.

Written by the nodes themselves as `{"event": name, "data": {...}}`, so every interface that streams a run
(`stream_mode="custom"`, the LangGraph server, `/api/v1/rag/generate/events`) carries the same events, in
the order the graph does the work; names are the REST API's SSE event names (docs/api-seed.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Literal

from langgraph.config import get_stream_writer

logger = logging.getLogger(__name__)

#: Where a run's events go when its runner collects them itself (graphs.runner.Session.stream).
EVENT_SINK: ContextVar[Callable[[dict[str, Any]], None] | None] = ContextVar("rag_event_sink", default=None)

#: Every event name a graph node may emit (the REST route adds `done`).
EventName = Literal[
    "query_rewritten",
    "documents_retrieved",
    "generation_start",
    "token",
    "answer_graded",
    "generation_complete",
    "error",
]


def emit(name: EventName, data: dict[str, Any]) -> None:
    """Write `{"event": name, "data": data}` to the run's custom stream, if any; never raises."""
    writer = EVENT_SINK.get()
    if writer is None:
        try:
            writer = get_stream_writer()
        except RuntimeError:  # called outside a graph run
            return
    try:
        writer({"event": name, "data": data})
    except Exception:  # a broken watcher must not break the answer
        logger.debug("could not emit %s", name, exc_info=True)


def source_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """The JSON-safe fields of a passage that clients show (no full text)."""
    return {
        key: doc.get(key) for key in ("chunk_id", "doc_id", "source", "title", "page", "score", "relevance")
    }
