"""The rerank prompt (retrieval/rerank.py): one call scores every fused candidate of a search at once.

Why one batched prompt rather than one call per passage: a search's candidates (RERANK_CANDIDATES) would
otherwise cost that many model calls; one prompt costs one prefill over all of them and a reply of a few
tokens per passage. The reply format is a line per passage, which small models follow more reliably than
JSON; the parser accepts JSON and other near-misses too.
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
