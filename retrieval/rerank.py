"""LLM rerank of fused search results: /api/v1/search's `rerank`, and every search of a graph run with
RAG_RERANK. The RERANK_CANDIDATES fused candidates go to the model in one prompt (prompts/rerank.py), which
scores each 0-10; they are reordered by score, ties and unscored ones keeping their fused order.

Lenient and never failing: what can be read of a near-miss reply is used; when fewer than half get a score,
all scores are equal, or the call fails, the fused order is returned with the reason. Off by default: see
docs/api-seed.md for what it costs and gains.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from core.types import SearchHit
from models.structured import with_max_tokens
from prompts.rerank import RERANK_PASSAGE, RERANK_PROMPT, RERANK_SYSTEM

logger = logging.getLogger(__name__)

#: Fused candidates a rerank sends to the model in its one prompt (one short prompt on the embedded model).
RERANK_CANDIDATES = 20
#: Characters of each candidate a rerank prompt shows the model (its opening is what the model judges).
RERANK_PASSAGE_CHARS = 500
#: Highest score of the scale the prompt asks for (scores above are clamped to it).
MAX_SCORE = 10.0
#: Share of the candidates that must get a score for the reply to be used.
MIN_SCORED_SHARE = 0.5
#: Completion tokens per candidate a reply may take (`[12] 7` plus a newline), plus some slack.
TOKENS_PER_CANDIDATE = 8
REPLY_SLACK_TOKENS = 32
#: `[3] 7`, `3: 7.5`, `Passage 3 - 7`, `#3 = 7`, `3) 7/10`: a passage number then its score on one line.
_LINE = re.compile(
    r"^\s*(?:passage|doc(?:ument)?|#)?\s*\[?\s*(\d{1,3})\s*\]?\s*[:=)\-.]*\s*(?:score\s*[:=]?\s*)?"
    r"(-?\d+(?:\.\d+)?)",
    re.IGNORECASE,
)


@dataclass
class RerankResult:
    """The reordered hits, whether the model's order was used (else `reason` says why not), the scores it
    gave (by position in the fused list, 1-based), the model calls made (0 or 1) and their duration."""

    hits: list[SearchHit]
    reranked: bool
    reason: str = ""
    scores: dict[int, float] = field(default_factory=dict)
    elapsed_ms: float = 0.0
    calls: int = 0
    hit_scores: list[float | None] = field(default_factory=list)
    """The model's score of each of `hits`, in their order (None: not scored); empty when not reranked."""


def rerank_prompt(query: str, hits: Sequence[SearchHit], passage_chars: int) -> str:
    """The one prompt that asks for a score per candidate."""
    blocks = []
    for number, hit in enumerate(hits, 1):
        title = str(hit.metadata.get("title") or "").strip()
        text = " ".join(hit.text.split())[:passage_chars]
        blocks.append(RERANK_PASSAGE.format(number=number, title=f"{title}: " if title else "", text=text))
    return RERANK_PROMPT.format(query=query, passages="\n".join(blocks), count=len(hits))


def parse_scores(reply: str, count: int) -> dict[int, float]:
    """Scores by passage number (1..count) from a reply, as leniently as possible: `[n] s` lines and their
    near-misses, a JSON object {"n": s} or a JSON list of scores in passage order. Out-of-range numbers are
    ignored, scores clamped to 0..10, the first score of a passage kept."""
    scores: dict[int, float] = {}
    parsed = _json_scores(reply, count)
    if parsed:
        return parsed
    for line in reply.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        number, score = int(match.group(1)), float(match.group(2))
        if 1 <= number <= count and number not in scores:
            scores[number] = min(MAX_SCORE, max(0.0, score))
    return scores


def _json_scores(reply: str, count: int) -> dict[int, float]:
    start = min((index for index in (reply.find("{"), reply.find("[")) if index >= 0), default=-1)
    if start < 0:
        return {}
    try:
        value = json.loads(reply[start : max(reply.rfind("}"), reply.rfind("]")) + 1])
    except ValueError:
        return {}
    pairs: list[tuple[object, object]] = []
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list) and all(isinstance(item, int | float) for item in value):
        pairs = [(index, item) for index, item in enumerate(value, 1)]
    scores: dict[int, float] = {}
    for key, score in pairs:
        if not isinstance(score, int | float | str):  # a list or an object: no score
            continue
        try:
            number, number_score = int(str(key).strip("[] ")), float(score)
        except ValueError:
            continue
        if 1 <= number <= count:
            scores.setdefault(number, min(MAX_SCORE, max(0.0, number_score)))
    return scores


def rerank(
    model: BaseChatModel,
    query: str,
    hits: Sequence[SearchHit],
    *,
    passage_chars: int,
    callbacks: list[Any] | None = None,
) -> RerankResult:
    """`hits` (fused order) reordered by the model's scores, in one call; the fused order on a failed call
    or an unusable reply (see the module doc). The hits' own scores are left as fusion gave them.
    `callbacks` (LangChain handlers) watch the call: the API's model gate."""
    fused = list(hits)
    if len(fused) < 2:
        return RerankResult(fused, False, "fewer than two candidates")
    messages = [SystemMessage(RERANK_SYSTEM), HumanMessage(rerank_prompt(query, fused, passage_chars))]
    started = time.perf_counter()
    try:
        capped = with_max_tokens(model, TOKENS_PER_CANDIDATE * len(fused) + REPLY_SLACK_TOKENS)
        reply = capped.invoke(messages, config={"callbacks": callbacks} if callbacks else None)
        text = reply.content if isinstance(reply.content, str) else str(reply.content)
    except Exception as error:  # noqa: BLE001 - a rerank must never fail the search
        logger.warning("rerank call failed (%s: %s); keeping the fused order", type(error).__name__, error)
        elapsed = (time.perf_counter() - started) * 1000
        return RerankResult(fused, False, f"the model call failed ({type(error).__name__})", {}, elapsed, 1)
    elapsed = (time.perf_counter() - started) * 1000
    scores = parse_scores(text, len(fused))
    if len(scores) < MIN_SCORED_SHARE * len(fused):
        reason = f"the model scored {len(scores)} of {len(fused)} candidates"
        return RerankResult(fused, False, reason, scores, elapsed, 1)
    if len(set(scores.values())) < 2:  # one score for every passage: an order the reply does not give
        reason = f"the model gave every scored candidate the same score ({next(iter(scores.values())):g})"
        return RerankResult(fused, False, reason, scores, elapsed, 1)
    order = sorted(range(1, len(fused) + 1), key=lambda number: (-scores.get(number, -1.0), number))
    hit_scores = [scores.get(number) for number in order]
    return RerankResult([fused[number - 1] for number in order], True, "", scores, elapsed, 1, hit_scores)


def rescored(result: RerankResult) -> list[SearchHit]:
    """The hits in the rerank's order, each scored by the model (0-10 / 10; 0 when unscored) with the fused
    score in metadata `fused_score` (later steps order by score); unchanged when the model's order was not
    used."""
    if not result.reranked:
        return list(result.hits)
    return [
        replace(hit, score=(score or 0.0) / MAX_SCORE, metadata={**hit.metadata, "fused_score": hit.score})
        for hit, score in zip(result.hits, result.hit_scores, strict=True)
    ]
