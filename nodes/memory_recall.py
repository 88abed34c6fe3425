"""Memories recalled into an answer: the tenant's notes (persistence.memories) nearest the turn's question.

Scope: the turn's tenant, its conversation's memories plus the tenant-wide ones; at most RAG_MEMORY_RECALL_K.
A tenant without memories costs one indexed EXISTS query; a failing store is logged, never the answer's cost.
A memory travels as a RetrievedDoc whose chunk id and source are `memory:<id>`, numbered and cited like one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from nodes.resources import get_resources
from retrieval.citations import extract_markers
from state.context import Context
from state.graph_state import State
from state.schemas import RetrievedDoc

if TYPE_CHECKING:
    from persistence.memories import Memory

logger = logging.getLogger(__name__)

#: Chunk id and source of a recalled memory: `memory:<id>`.
MEMORY_PREFIX = "memory:"
#: Cosine similarity to the question a memory needs to be recalled: below it, a note about something else
#: would only take room from the sources.
MEMORY_RECALL_MIN_SCORE = 0.3


def is_memory_doc(doc: dict[str, Any] | RetrievedDoc) -> bool:
    """Whether a source is a recalled memory rather than a passage of the documents."""
    return str(doc.get("chunk_id") or "").startswith(MEMORY_PREFIX)


def memory_doc(memory: Memory, query: str) -> RetrievedDoc:
    """A memory as a source of the answer (`memory:<id>`), its similarity as score and relevance."""
    key = f"{MEMORY_PREFIX}{memory.id}"
    score = float(memory.score or 0.0)
    return RetrievedDoc(
        chunk_id=key,
        text=memory.content,
        source=key,
        title=f"memory {memory.id}",
        page=0,
        doc_id=key,
        score=score,
        relevance=score,
        query=query,
        metadata={
            "source_kind": "memory",
            "memory_id": memory.id,
            "memory_kind": memory.kind,
            "conversation_id": memory.conversation_id,
            "created_at": memory.created_at,
        },
    )


def recalled_memories(state: State, context: Context, question: str) -> list[RetrievedDoc]:
    """This turn's memories for `question`: those recalled earlier in the turn, else searched now."""
    earlier = state.get("recalled_memories")
    if earlier is not None:
        return earlier
    resources = get_resources()
    settings = resources.settings
    if settings.memory_recall_k <= 0 or not question.strip() or not resources.uses_store(context):
        return []
    # sqlalchemy and numpy: imported on the first recall, not with the graph.
    from persistence.memories import has_memories, recall_memories

    tenant = state.get("tenant") or context.tenant
    conversation_id = state.get("conversation_id") or ""
    try:
        if not has_memories(tenant, conversation_id, settings=settings):
            return []
        embeddings = resources.kb().embeddings
        found = recall_memories(
            question,
            tenant=tenant,
            conversation_id=conversation_id,
            k=settings.memory_recall_k,
            min_score=MEMORY_RECALL_MIN_SCORE,
            settings=settings,
            embeddings=embeddings,
            model_key=embeddings.model_key,
        )
    except Exception as error:  # noqa: BLE001 - memories enrich an answer, they never cost it
        logger.warning("could not recall memories (%s); answering without them", error)
        return []
    return [memory_doc(memory, question) for memory in found]


def memory_sources(reply: str, documents_used: int, memories: list[RetrievedDoc]) -> list[RetrievedDoc]:
    """The memories a draft's sources end with (without passages, only when the reply cites one)."""
    if not memories or documents_used:
        return list(memories)
    return list(memories) if any(1 <= number <= len(memories) for number in extract_markers(reply)) else []
