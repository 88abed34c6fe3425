"""The director's events for an answer (retrieval.director): when this conversation has gone
RAG_DIRECTOR_STALL_TURNS turns without progress, the events of this conversation and of the tenant's other
conversations nearest the question, for their own section of the answer prompt (retrieval.prompt_budget).

Why a step of generate: every graph that answers writes its answer there, so the section reaches all of
them without new edges; the result is kept in state (`director_events`, reset by
start_turn) so the Self-RAG rounds of a turn search once. The events are context, not evidence: they are not
numbered or cited, and a RAG turn with no relevant passage still ends at the honest "not found" (generate
does not run then); in chat mode (`answer_source="chat"`) and with passages they reach the model.

Where: the long-term store (persistence.summary_store), the run's `runtime.store` when it has one.
Scope: the turn's tenant only, a conversation id is needed (no "this conversation" without one), and the
turn's metadata filters apply. Never at the answer's expense: a store that fails is logged and the answer is
written without the section.
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
#: Events the director retrieves of this conversation and of the tenant's other conversations: mostly the
#: stalled conversation's own, a few from elsewhere (the conversational-memory design's minority share).
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
    """This turn's director events: those recalled earlier in the turn, else searched now when the
    conversation is stalled ([] when it is not, or has no conversation id). `store`: the run's
    `runtime.store` when the graph was given one, else the process's long-term store is read."""
    earlier = state.get("director_events")
    if earlier is not None:
        return earlier
    resources = get_resources()
    settings = resources.settings
    conversation_id = state.get("conversation_id") or ""
    needed = settings.director_stall_turns
    if needed <= 0 or not conversation_id or not question.strip():
        return []
    # The director reads the long-term store (sqlalchemy, numpy): imported when a conversation asks for
    # it, not with the graph.
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
