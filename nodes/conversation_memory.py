"""The graph's side of automatic conversation summaries (retrieval.auto_summary): after a turn is recorded,
queue the thread's turns for the background summary worker when the thread may be due."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from langchain_core.language_models import BaseChatModel

from nodes.resources import Resources, get_resources
from persistence.threads import visible_thread_id
from state.graph_state import State

if TYPE_CHECKING:
    # sqlalchemy and numpy: imported when a turn may be summarized, not with the graph.
    from retrieval.conversation_summary import Summarizer

logger = logging.getLogger(__name__)


def summary_model(resources: Resources) -> BaseChatModel | None:
    """The generation model when it is strong, else None (the extractive summary: a weak model invents)."""
    try:
        return resources.model("generate") if resources.strength("generate") == "strong" else None
    except Exception as error:  # noqa: BLE001 - the extractive summary needs no model
        logger.warning("summary model unavailable (%s); using the extractive summary", error)
        return None


def summarizer_of(resources: Resources) -> Summarizer | None:
    """The Summarizer of `resources` (see summary_model)."""
    from retrieval.conversation_summary import SUMMARY_MAX_TOKENS, model_summarizer

    model = summary_model(resources)
    return model_summarizer(model, SUMMARY_MAX_TOKENS) if model is not None else None


def schedule_summary(state: State, tenant: str, stored_thread_id: str) -> bool:
    """Queue this thread's turns for the summary worker when it may be due; whether it queued."""
    resources = get_resources()
    every = resources.settings.summary_every_turns
    conversation_id = state.get("conversation_id") or ""
    if every <= 0 or not stored_thread_id or not conversation_id:
        return False
    from retrieval.auto_summary import SummaryJob, summary_worker
    from retrieval.conversation_summary import conversation_metadata, turns_from_messages

    turns = turns_from_messages(state.get("messages") or [])
    if len(turns) < every:
        return False
    summary_worker().submit(
        SummaryJob(
            kb=resources.kb(),
            turns=tuple(turns),
            thread_id=visible_thread_id(stored_thread_id, tenant),
            conversation_id=conversation_id,
            tenant=tenant,
            metadata=conversation_metadata(state.get("conversation_metadata")),
            summarizer=lambda: summarizer_of(resources),
            every=every,
        )
    )
    return True
