"""The director's events for an answer (retrieval.director): when this conversation has gone
RAG_DIRECTOR_STALL_TURNS turns without progress, the events of this conversation and of the tenant's other
conversations nearest the question, for their own (uncited) section of the answer prompt. Searched once per
turn (kept in `director_events`); a failing store is logged and the answer is written without them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from core.types import SearchHit
from nodes.resources import get_resources
from nodes.retrieve import to_retrieved
from state.context import Context
from state.graph_state import State
from state.schemas import RetrievedDoc

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

logger = logging.getLogger(__name__)

#: `metadata.director` of a recalled event: from this conversation, or from another one of the tenant.
THIS_CONVERSATION = "conversation"
OTHER_CONVERSATION = "other"
#: Events the director retrieves of this conversation and of the tenant's others (a minority share).
DIRECTOR_CONVERSATION_K = 15
DIRECTOR_OTHER_K = 5


def director_doc(hit: SearchHit, query: str, scope: str) -> RetrievedDoc:
    """A recalled event as the graph carries it, marked with where it came from (`metadata.director`)."""
    doc = to_retrieved(hit, query)
    turns = (hit.metadata.get("turn_first"), hit.metadata.get("turn_last"))
    extra = {"director": scope, "turn_first": turns[0], "turn_last": turns[1]}
    return {**doc, "metadata": {**doc["metadata"], **extra}}


def director_events(
    state: State, context: Context, question: str, store: BaseStore | None = None
) -> list[RetrievedDoc]:
    """This turn's director events: those recalled earlier, else searched now when stalled."""
    earlier = state.get("director_events")
    if earlier is not None:
        return earlier
    resources = get_resources()
    settings = resources.settings
    conversation_id = state.get("conversation_id") or ""
    needed = settings.director_stall_turns
    if needed <= 0 or not conversation_id or not question.strip():
        return []
    # sqlalchemy and numpy: imported when a conversation asks for the director, not with the graph.
    from retrieval.director import director_search, stalled_turns

    if stalled_turns(state.get("messages") or [], question) < needed:
        return []
    try:
        found = director_search(
            resources.kb(),
            question,
            tenant=state.get("tenant") or context.tenant,
            conversation_id=conversation_id,
            conversation_k=DIRECTOR_CONVERSATION_K,
            other_k=DIRECTOR_OTHER_K,
            filters=state.get("filters") or None,
            store=store,
        )
    except Exception as error:  # noqa: BLE001 - the director helps an answer, it never costs it
        logger.warning("director: could not recall the conversation's events (%s); answering without", error)
        return []
    return [director_doc(hit, question, THIS_CONVERSATION) for hit in found.conversation] + [
        director_doc(hit, question, OTHER_CONVERSATION) for hit in found.others
    ]
