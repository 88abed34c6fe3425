"""Which chunker cuts a text (RAG_CHUNKER: the paragraph one, or the semantic one, which needs an embedding
function), and the part of an index's identity that the choice makes.
"""

from __future__ import annotations

import json

from config.settings import Settings
from retrieval.chunking import ChunkingConfig, chunk_text
from retrieval.semantic_chunking import (
    SEMANTIC_BUFFER,
    SEMANTIC_PERCENTILE,
    Embed,
    SemanticPolicy,
    semantic_chunk_text,
)


def semantic_policy(settings: Settings) -> SemanticPolicy:
    """The semantic chunker's cut rule from RAG_SEMANTIC_BREAKPOINT and RAG_SEMANTIC_MIN_SIMILARITY."""
    return SemanticPolicy(
        breakpoint=settings.semantic_breakpoint,
        percentile=SEMANTIC_PERCENTILE,
        min_similarity=settings.semantic_min_similarity,
        buffer=SEMANTIC_BUFFER,
    )


def chunks_of(text: str, settings: Settings, config: ChunkingConfig, embed: Embed) -> list[str]:
    """`text` cut by the chunker RAG_CHUNKER names (`embed` is called by the semantic chunker only)."""
    if settings.chunker == "semantic":
        return semantic_chunk_text(text, config, embed, semantic_policy(settings))
    return chunk_text(text, config)


def chunker_signature(settings: Settings) -> str:
    """What the chunker settings add to an index's identity: '' for the defaults (older indexes keep
    theirs), else a suffix naming them, so indexes of different chunkers never mix."""
    parts = []
    if settings.separators:
        parts.append(f"/separators={json.dumps(list(settings.separators))}")
    if settings.chunker == "semantic":
        policy = semantic_policy(settings)
        rule = (
            f"percentile={policy.percentile}"
            if policy.breakpoint == "percentile"
            else f"min_similarity={policy.min_similarity}"
        )
        parts.append(f"/semantic:{rule}:buffer={policy.buffer}")
    return "".join(parts)
