"""The rerank prompt (retrieval/rerank.py): one call scores every fused candidate of a search at once.

One batched prompt, not a call per passage; a line per passage, which small models follow more reliably
than JSON.
"""

from __future__ import annotations

RERANK_SYSTEM = (
    "You rank search results. For each numbered passage, judge how well it answers or supports the query. "
    "Reply only with scores, one line per passage."
)

RERANK_PROMPT = """Query: {query}

Passages:
{passages}

Score every passage from 0 (unrelated to the query) to 10 (directly answers it).
Reply with exactly one line per passage, in the form `[n] score`, for all {count} passages, and nothing else.
Example:
[1] 7
[2] 0"""

#: One candidate in the prompt: its number, title and (truncated) text.
RERANK_PASSAGE = "[{number}] {title}{text}"
