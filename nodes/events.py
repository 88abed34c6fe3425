"""Custom stream events: what a client watching a run is told while it happens.

Why from the graph and not from the HTTP layer: the same events then reach every interface that streams a
run. `graph.stream(..., stream_mode="custom")`, the LangGraph server's `custom` stream mode (and so the SDK
and Studio) and the REST route `/api/v1/rag/generate/events` all carry `{"event": name, "data": {...}}`
written here by the nodes themselves, in the order the graph does the work.

Events (names are the REST API's SSE event names):
- query_rewritten: the round's search queries (rewrite, reformulate; a retry's also say what it did,
  `retry`: expand | rewrite | both | hop, and its `depth`, the factor on each query's k);
- documents_retrieved: how many passages the round found and how many were judged relevant (grade_retrieval);
- generation_start: the answer is about to be written (generate);
- answer_graded: one Self-RAG grade of a draft: round, score, grounded, action, problems, suggestions (the
  grader's own, then the loop's next step), reflection_score (1-10) and needs_improvement (the notes
  assistant's reflector, nodes.reflection) (grade_answer; none when Self-RAG is off or the answer had no
  sources);
- generation_complete: the final answer with its citations and sources (cite, not_found).
Tokens stream through `stream_mode="messages"` (the model's own chunks); the REST route forwards them as
`token` events and adds `error` and `done`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Literal

from langgraph.config import get_stream_writer

logger = logging.getLogger(__name__)

#: Where a run's events go when its runner collects them itself (graphs.runner.Session.stream) rather than
#: through LangGraph's "custom" stream mode, which hands every step of the run to a worker thread.
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
    """Write `{"event": name, "data": data}` to the run's custom stream; do nothing outside a run.

    Never raises: an event is a courtesy to a watcher and must not fail the node that sends it (a node
    called directly by a test or a script has no run, hence no writer).
    """
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
