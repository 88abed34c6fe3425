"""A turn the API abandons leaves no trace in its thread: what the run wrote is rolled back.

Why: a run stopped between its question (start_turn) and its answer (cite, not_found), because its client
left, a time limit passed or the model failed, saved a state whose history holds the question and no answer,
which the next turn's follow-up resolution and the conversation summaries then read as part of the
conversation. Completing the run instead would keep the model busy for a
client that is gone while others queue for it, which the API's limits exist to prevent (service.api.engine).

How: the worker holds the thread's lock for the whole turn (the runner's own lock is re-entrant, so its
turn inside nests), keeps the thread's latest checkpoint from before the run, and when the run ends without
its result, saves that state again as the newest checkpoint (the graphs save once when a run ends or fails,
RAG_CHECKPOINT_DURABILITY=exit, so the question is written when the stopped run closes) or, for a thread
the run created, deletes the thread. The lock makes this safe: no other turn can have written to the thread
in between. A turn whose run finished is kept, read or not.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple, create_checkpoint

from state.context import Context

logger = logging.getLogger(__name__)


@dataclass
class TurnRecord:
    """What the worker tells the guard: whether the run reached its result; and what the guard did."""

    finished: bool = False
    rolled_back: bool = False


def _checkpoint_id(saved: CheckpointTuple | None) -> str | None:
    return None if saved is None else str(saved.config["configurable"].get("checkpoint_id"))


def _root(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def roll_back(checkpointer: Any, thread_id: str, before: CheckpointTuple | None) -> bool:
    """Make the state of `before` the latest of the stored thread `thread_id` again (delete the thread when
    there was none); False when the run wrote nothing. The caller holds the thread's lock.

    `before` is saved again as a new checkpoint (a fork of it, newest by id) rather than referred to: the
    saver may have pruned it once the abandoned run saved (RAG_CHECKPOINT_KEEP)."""
    latest = checkpointer.get_tuple(_root(thread_id))
    if latest is None or _checkpoint_id(latest) == _checkpoint_id(before):
        return False
    if before is None:
        checkpointer.delete_thread(thread_id)
        return True
    step = int(latest.metadata.get("step", 0) or 0) + 1
    restored = create_checkpoint(before.checkpoint, None, step)
    metadata: CheckpointMetadata = {"source": "fork", "step": step, "parents": {}}
    checkpointer.put(_root(thread_id), restored, metadata, dict(restored["channel_versions"]))
    return True


@contextmanager
def guarded_turn(
    session: Any, thread_id: str, context: Context, inputs: dict[str, Any]
) -> Iterator[TurnRecord]:
    """Hold the thread for one run (the runner's checks and lock: ThreadBusyError, ThreadAccessError) and
    roll back what the run wrote unless the caller marks the record finished. A session without a
    checkpointer or without turns (a test's scripted session) stores nothing: nothing to guard."""
    record = TurnRecord()
    turn = getattr(session, "turn", None)
    if turn is None or getattr(session, "checkpointer", None) is None:
        yield record
        return
    with turn(thread_id, context, inputs) as config:
        stored = str(config["configurable"]["thread_id"])
        before = session.checkpointer.get_tuple(_root(stored))
        try:
            yield record
        finally:
            if not record.finished:
                try:
                    record.rolled_back = roll_back(session.checkpointer, stored, before)
                except Exception:  # the run's own outcome must reach the request
                    logger.exception("could not roll back the abandoned turn on thread %s", thread_id)
                if record.rolled_back:
                    logger.info("abandoned turn rolled back: thread %s", thread_id)
