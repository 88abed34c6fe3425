"""The answer's own confidence: the token log-probabilities of the short answer the model wrote.

Only the short answer's tokens count (the explanation copies a source sentence, confident whatever the
answer). It decides nothing alone: it feeds the answer's judgement (answering.signals: logprob_mean,
logprob_min; docs/answer-quality.md "Calibrated not found").
"""

from __future__ import annotations

from collections.abc import Sequence

#: The labels before a short answer in the reply ("Answer: X"), English and Chinese.
ANSWER_LABELS = ("Answer:", "答案：", "答案:")


def _answer_range(text: str, short: str) -> tuple[int, int] | None:
    """Character range of the short answer in the reply (after its label if any), or None."""
    start = 0
    for label in ANSWER_LABELS:
        found = text.find(label)
        if found >= 0:
            start = found + len(label)
            break
    position = text.find(short, start) if short else -1
    if position < 0 and short:
        position = text.find(short)
    if position < 0:
        return None
    return position, position + len(short)


def values_in(token_logprobs: Sequence[tuple[str, float]], wanted: tuple[int, int]) -> list[float]:
    """Log-probabilities of the non-blank tokens that overlap the character range `wanted`."""
    values: list[float] = []
    offset = 0
    for token, logprob in token_logprobs:
        end = offset + len(token)
        if end > wanted[0] and offset < wanted[1] and token.strip():
            values.append(logprob)
        offset = end
    return values


def answer_logprobs(token_logprobs: Sequence[tuple[str, float]] | None, short: str) -> list[float]:
    """Log-probabilities of the tokens of the short answer in the reply, else of its first line."""
    if not token_logprobs:
        return []
    text = "".join(token for token, _ in token_logprobs)
    wanted = _answer_range(text, short.strip()) if short.strip() else None
    if wanted is None:
        line_end = text.find("\n", len(text) - len(text.lstrip()))
        wanted = (0, line_end if line_end > 0 else len(text))
    return values_in(token_logprobs, wanted)
