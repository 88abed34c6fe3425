"""retrieve: one hybrid search per query (fanned out with `Send`), scoped and turned into RetrievedDocs.

Scoping, in order: the tenant (always, enforced by the searcher), the context's collection and directory
(retrieval.directory_scope), the caller's metadata filters, then the conversation: with a conversation id,
results come only from that conversation (strict by default: another conversation's memories are not this
one's), unless the run opts into a minority share from other conversations
(`context.cross_conversation_share` > 0, at least one result then). When the question asks
how / for details, summary chunks are expanded into the detail chunks of the same document ("deep search").
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from config.settings import Settings
from core.types import SearchHit
from nodes.instrumentation import timed
from nodes.resources import get_resources
from nodes.retry_strategy import search_k
from persistence.errors import STORE_DOWN_MESSAGE
from persistence.vector_store import StoreUnavailableError
from retrieval.public_source import public_source
from state.context import Context, run_context
from state.graph_state import RetrieveTask
from state.schemas import RetrievedDoc

if TYPE_CHECKING:
    from retrieval.search import PassageSearcher

logger = logging.getLogger(__name__)

#: Detail chunks fetched per summary chunk when the question wants details.
DETAILS_PER_SUMMARY = 3
SUMMARY_LEVEL = "summary"
DETAIL_LEVEL = "detail"


def to_retrieved(hit: SearchHit, query: str) -> RetrievedDoc:
    """A search hit as the graph carries it, its source and doc id in public form (never a server path:
    everything downstream — answers, citations, stream events, checkpoints — shows them to callers)."""
    page = hit.metadata.get("page", -1)
    tenant = str(hit.metadata.get("tenant", ""))
    data_dir = get_resources().settings.data_dir
    return RetrievedDoc(
        chunk_id=hit.chunk_id,
        text=hit.text,
        source=public_source(str(hit.metadata.get("source", "")), tenant=tenant, data_dir=data_dir),
        title=str(hit.metadata.get("title", "")),
        page=int(page) if isinstance(page, int | float) else -1,
        doc_id=public_source(hit.doc_id, tenant=tenant, data_dir=data_dir),
        score=float(hit.score),
        relevance=-1.0,
        query=query,
        metadata={
            key: hit.metadata.get(key)
            for key in (
                "collection",
                "section",
                "chapter",
                "doc_type",
                "level",
                "conversation_id",
                "chunk_index",
            )
        }
        | {"dense_score": hit.dense_score, "bm25_score": hit.bm25_score},
    )


def _and(*filters: dict[str, Any] | None) -> dict[str, Any] | None:
    present = [item for item in filters if item]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


def outside_conversation_k(top_k: int, share: float) -> int:
    """Results taken from other conversations: none at share 0 (strict scoping); else the share of k
    rounded up, so any share > 0 the caller opted into yields at least one, and never all of k."""
    if share <= 0 or top_k <= 1:
        return 0
    return min(top_k - 1, math.ceil(top_k * share))


def mode_retrieval(context: Context, settings: Settings) -> tuple[int, tuple[float, float] | None]:
    """(k per query, fusion weights) of a run's answer mode (seed 001: modes change retrieval):
    precise = hybrid weighted RAG_PRECISE_DENSE_WEIGHT / RAG_PRECISE_BM25_WEIGHT (0.8 / 0.2); advanced =
    top_k / RAG_ADVANCED_QUERIES per query (rounded up; its several queries come from rewrite, merged by
    chunk id best score first); simple and auto = top_k with the standard weights."""
    if context.mode == "precise":
        return context.top_k, (settings.precise_dense_weight, settings.precise_bm25_weight)
    if context.mode == "advanced":
        return max(1, math.ceil(context.top_k / settings.advanced_queries)), None
    return context.top_k, None


def scoped_search(
    searcher: PassageSearcher,
    text: str,
    dense_text: str,
    *,
    context: Context,
    tenant: str,
    filters: dict[str, Any] | None,
    conversation_id: str,
    depth: int = 1,
) -> list[SearchHit]:
    """Search with conversation scoping: only the conversation's documents, or with a share > 0,
    `outside_conversation_k` of k from other conversations and the rest inside. `depth` multiplies the
    mode's k (an expanding retry, nodes.retry_strategy), up to RAG_CANDIDATE_K."""
    collections = [context.collection] if context.collection else None
    vector = searcher.embed_query(dense_text) if context.search_mode != "bm25" else None
    top_k, weights = mode_retrieval(context, searcher.settings)
    top_k = search_k(top_k, depth, searcher.settings.candidate_k)

    def search(k: int, scope: dict[str, Any] | None) -> list[SearchHit]:
        return searcher.search(
            text,
            k=k,
            filters=scope,
            mode=context.search_mode,
            tenant=tenant,
            collections=collections,
            query_vector=vector,
            weights=weights,
            directory=context.directory or None,
        ).hits

    if not conversation_id:
        return search(top_k, filters)
    outside_k = outside_conversation_k(top_k, context.cross_conversation_share)
    inside = search(top_k - outside_k or 1, _and(filters, {"conversation_id": conversation_id}))
    outside: list[SearchHit] = []
    if outside_k:
        outside = search(outside_k, _and(filters, {"conversation_id": {"$ne": conversation_id}}))
    return inside + outside


def expand_summaries(
    searcher: PassageSearcher, hits: list[SearchHit], text: str, *, context: Context, tenant: str
) -> list[SearchHit]:
    """Add the detail chunks of documents whose summary chunk was retrieved."""
    extra: list[SearchHit] = []
    for hit in hits:
        if hit.metadata.get("level") != SUMMARY_LEVEL:
            continue
        details = searcher.search(
            text,
            k=DETAILS_PER_SUMMARY,
            mode=context.search_mode,
            tenant=tenant,
            filters={"$and": [{"doc_id": hit.doc_id}, {"level": DETAIL_LEVEL}]},
        ).hits
        extra.extend(details)
    return hits + extra


@timed("retrieve")
def retrieve(task: RetrieveTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Run one query; a store that is down yields no documents and an error note (the run goes on to an
    honest "not found" answer instead of failing). Filters were validated when the turn started."""
    context = run_context(runtime)
    query = task["query"]
    if not context.rag_enabled:  # RAG_ENABLED=false (the baseline graph comes here): no store is opened
        return {"documents": []}
    searcher = get_resources().searcher()
    started = time.perf_counter()
    try:
        hits = scoped_search(
            searcher,
            query["text"],
            query["dense_text"] or query["text"],
            context=context,
            tenant=task["tenant"],
            filters=task["filters"] or None,
            conversation_id=task["conversation_id"],
            depth=task.get("depth", 1),
        )
        if task["wants_details"]:
            hits = expand_summaries(searcher, hits, query["text"], context=context, tenant=task["tenant"])
    except StoreUnavailableError as error:
        # The output state is public (API, LangGraph server): our message; the store's text is logged.
        logger.error("retrieval failed: %s", error)
        return {"documents": [], "error": STORE_DOWN_MESSAGE}
    elapsed = (time.perf_counter() - started) * 1000
    documents = [to_retrieved(hit, query["text"]) for hit in hits]
    return {"documents": documents, "timings_ms": {"retrieval": elapsed}}
