"""retrieve: one hybrid search per query (fanned out with `Send`), scoped and turned into RetrievedDocs.

Scoping: the tenant (always), the collection and directory, the caller's filters, then the conversation
(strict unless `cross_conversation_share` > 0), plus the conversation's nearest block summaries from the
long-term store. With RAG_RERANK the generation model reorders RERANK_CANDIDATES fused hits and k go on.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langgraph.runtime import Runtime

from core.types import SearchHit
from nodes.instrumentation import accounting, merge_updates, timed
from nodes.resources import get_resources
from nodes.retry_strategy import search_k
from persistence.errors import STORE_DOWN_MESSAGE
from persistence.vector_store import StoreUnavailableError
from retrieval.public_source import public_source
from retrieval.rerank import RERANK_CANDIDATES, RERANK_PASSAGE_CHARS, RerankResult, rerank, rescored
from retrieval.search_depth import ADVANCED_QUERIES, CANDIDATE_K, PRECISE_WEIGHTS
from state.context import Context, run_context
from state.graph_state import RetrieveTask
from state.schemas import RetrievedDoc

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from retrieval.search import PassageSearcher

logger = logging.getLogger(__name__)

#: Detail events fetched per recalled summary when the question wants details.
DETAILS_PER_SUMMARY = 3
#: Block summaries of the turn's conversation recalled with its passages: two keep the prompt small.
SUMMARY_RECALL_K = 2
#: Hit metadata a RetrievedDoc keeps.
HIT_METADATA = ("collection", "section", "chapter", "doc_type", "level", "conversation_id", "chunk_index")
#: Reorders one search's hits for its query and keeps the best k: (query, hits, k) -> hits.
Reorder = Callable[[str, list[SearchHit], int], list[SearchHit]]


def to_retrieved(hit: SearchHit, query: str) -> RetrievedDoc:
    """A search hit as the graph carries it, its source and doc id in public form (never a server path:
    answers, citations, stream events and checkpoints show them to callers)."""
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
        metadata={key: hit.metadata.get(key) for key in HIT_METADATA}
        | {"dense_score": hit.dense_score, "bm25_score": hit.bm25_score}
        | ({"fused_score": hit.metadata["fused_score"]} if "fused_score" in hit.metadata else {}),
    )


def _and(*filters: dict[str, Any] | None) -> dict[str, Any] | None:
    present = [item for item in filters if item]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


def outside_conversation_k(top_k: int, share: float) -> int:
    """Results taken from other conversations: none at share 0, else the share of k rounded up (< k)."""
    if share <= 0 or top_k <= 1:
        return 0
    return min(top_k - 1, math.ceil(top_k * share))


def mode_retrieval(context: Context) -> tuple[int, tuple[float, float] | None]:
    """(k per query, fusion weights) of the run's answer mode."""
    if context.mode == "precise":
        return context.top_k, PRECISE_WEIGHTS
    if context.mode == "advanced":
        return max(1, math.ceil(context.top_k / ADVANCED_QUERIES)), None
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
    reorder: Reorder | None = None,
) -> list[SearchHit]:
    """Search with conversation scoping and `depth`; `reorder` keeps the best k of each search."""
    collections = [context.collection] if context.collection else None
    vector = searcher.embed_query(dense_text) if context.search_mode != "bm25" else None
    top_k, weights = mode_retrieval(context)
    top_k = search_k(top_k, depth, CANDIDATE_K)

    def search(k: int, scope: dict[str, Any] | None) -> list[SearchHit]:
        fetch = max(k, RERANK_CANDIDATES) if reorder else k
        hits = searcher.search(
            text,
            k=fetch,
            filters=scope,
            mode=context.search_mode,
            tenant=tenant,
            collections=collections,
            query_vector=vector,
            weights=weights,
            directory=context.directory or None,
        ).hits
        return reorder(text, hits, k) if reorder else hits

    if not conversation_id:
        return search(top_k, filters)
    outside_k = outside_conversation_k(top_k, context.cross_conversation_share)
    inside = search(top_k - outside_k or 1, _and(filters, {"conversation_id": conversation_id}))
    outside: list[SearchHit] = []
    if outside_k:
        outside = search(outside_k, _and(filters, {"conversation_id": {"$ne": conversation_id}}))
    return inside + outside


def expand_summaries(
    hits: list[SearchHit],
    text: str,
    *,
    tenant: str,
    conversation_id: str,
    wants_details: bool,
    store: BaseStore | None = None,
) -> list[SearchHit]:
    """Add the conversation's nearest block summaries (and their detail events when it wants details)."""
    resources = get_resources()
    if not conversation_id or not resources.uses_store():  # the mock retriever keeps no summaries
        return hits
    from retrieval.summary_search import conversation_summaries

    found = conversation_summaries(
        resources.kb(),
        text,
        tenant=tenant,
        conversation_id=conversation_id,
        k=SUMMARY_RECALL_K,
        details_per_summary=DETAILS_PER_SUMMARY if wants_details else 0,
        store=store,
    )
    return hits + found


def model_reorder(context: Context, outcomes: list[RerankResult]) -> Reorder:
    """The rerank as a Reorder (the generation model scores the hits); outcomes go to `outcomes`."""
    resources = get_resources()
    model, passage_chars = resources.model("generate", context), RERANK_PASSAGE_CHARS

    def reorder(query: str, hits: list[SearchHit], k: int) -> list[SearchHit]:
        outcome = rerank(model, query, hits, passage_chars=passage_chars)
        if outcome.calls and not outcome.reranked:
            logger.info("rerank kept the fused order: %s", outcome.reason)
        outcomes.append(outcome)
        return rescored(outcome)[:k]

    return reorder


@timed("retrieve")
def retrieve(task: RetrieveTask, runtime: Runtime[Context]) -> dict[str, Any]:
    """Run one query; a store that is down yields no documents and an error note (an honest "not found")."""
    context = run_context(runtime)
    query = task["query"]
    if not context.retrieval:  # RAG_RETRIEVAL=false (the baseline graph comes here): no store is opened
        return {"documents": []}
    searcher = get_resources().searcher()
    outcomes: list[RerankResult] = []
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
            reorder=model_reorder(context, outcomes) if context.rerank else None,
        )
        hits = expand_summaries(
            hits,
            query["text"],
            tenant=task["tenant"],
            conversation_id=task["conversation_id"],
            wants_details=task["wants_details"],
            store=getattr(runtime, "store", None),
        )
    except StoreUnavailableError as error:
        # The output state is public (API, LangGraph server): our message; the store's text is logged.
        logger.error("retrieval failed: %s", error)
        return {"documents": [], "error": STORE_DOWN_MESSAGE}
    elapsed = (time.perf_counter() - started) * 1000
    documents = [to_retrieved(hit, query["text"]) for hit in hits]
    update: dict[str, Any] = {"documents": documents, "timings_ms": {"retrieval": elapsed}}
    if not outcomes:
        return update
    rerank_ms = sum(outcome.elapsed_ms for outcome in outcomes)
    calls = sum(outcome.calls for outcome in outcomes)
    return merge_updates(update, accounting(calls, {}, rerank_ms), {"timings_ms": {"rerank": rerank_ms}})
