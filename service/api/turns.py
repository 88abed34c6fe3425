"""A turn the API abandons leaves no trace in its thread: what the run wrote is rolled back.

Why: a run stopped between its question and its answer (client gone, limit passed, model failed) saved a
history holding the question and no answer, which later follow-ups and summaries read; finishing the run
instead would keep the model busy for a client that is gone. The worker holds the thread's lock for the whole
turn (so no other turn wrote in between) and, when the run ends without its result, saves the thread's state
from before the run again as its newest checkpoint (or deletes a thread the run created).
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
    """Make `before` the thread's latest state again (a new checkpoint); False when the run wrote nothing.
    Saved anew rather than pointed to: the saver may have pruned `before` once the abandoned run saved."""
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
    """Hold the thread for one run and roll back what it wrote unless the record is marked finished."""
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
