"""compress_evidence: keep the sentences of the graded passages that can answer, within a token budget.

Between grading and generation, from the passages generate would use (retrieval.evidence says why and how).
With RAG_EVIDENCE_TOKEN_BUDGET=0 it does nothing and generate reads whole chunks.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.runtime import Runtime

from nodes.instrumentation import timed
from nodes.resources import get_resources
from nodes.turn import answer_documents, current_question
from retrieval.evidence import EmbedTexts, select_evidence
from state.context import Context, run_context
from state.graph_state import State

logger = logging.getLogger(__name__)


def sentence_embedder() -> EmbedTexts | None:
    """The search's embedding model without its persistent cache, or None (lexical scores alone)."""
    if not get_resources().uses_store():
        return None
    try:
        embeddings = get_resources().kb().embeddings
    except Exception as error:  # noqa: BLE001 - compression degrades to lexical scores, never fails
        logger.warning("compress_evidence: no embedding model (%s); lexical scores only", error)
        return None
    inner: Embeddings = embeddings.inner
    return inner.embed_documents


@timed("compress_evidence")
def compress_evidence(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    """Set `evidence` (empty when compression is off or there is nothing to compress)."""
    context = run_context(runtime)
    if context.evidence_token_budget <= 0:
        return {"evidence": []}
    documents = answer_documents(state, context)
    if not documents:
        return {"evidence": []}
    report = select_evidence(
        current_question(state),
        documents,
        embed=sentence_embedder(),
        budget_tokens=context.evidence_token_budget,
    )
    info = {
        "evidence_tokens_before": report.tokens_before,
        "evidence_tokens_after": report.tokens_after,
        "evidence_sentences": report.sentences_kept,
        "bridge_entities": report.bridge_entities[:8],
    }
    return {"evidence": report.documents, "prompt_info": info}  # generate adds its own accounting
