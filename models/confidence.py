"""The answer's own confidence: the token log-probabilities of the short answer the model wrote.

Why this signal: with compact evidence, the mean log-probability of a small reader's reply separates right
answers from wrong or unanswerable ones far better than the reader's own "none" (measured on 60 SQuAD 2.0
development questions over the gold paragraph: AUROC 0.81 for Qwen2.5-Coder-0.5B, 0.86 for 1.5B, while they
reply "none" to 10-20% of unanswerable questions). Only the short answer's tokens count: the explanation that
follows copies a source sentence, which is confident whatever the answer.

Measured since (docs/answer-quality.md "Calibrated not found"): on 400 SQuAD 2.0 questions, each read over
its gold paragraph alone, AUROC is 0.62 (0.5B) and 0.74 (1.5B) on the test half, not 0.81 / 0.86, and no
threshold meets the decline targets alone; so it decides nothing by itself: `answer_logprobs` feeds the
answer's judgement, which weighs it with other signals (answering.signals: logprob_mean, logprob_min).
"""

from __future__ import annotations

from collections.abc import Sequence

#: The labels before a short answer in the reply ("Answer: X"), English and Chinese.
ANSWER_LABELS = ("Answer:", "答案：", "答案:")


def _answer_range(text: str, short: str) -> tuple[int, int] | None:
    """Character range of the short answer in the reply: after its label when there is one, else the
    first occurrence; None when the reply does not contain it."""
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
    """Log-probabilities of the tokens that overlap the short answer in the reply ([] without
    log-probabilities). Without a short answer in the reply, those of its first line (an honest "not found",
    or an answer that opens with a sentence)."""
    if not token_logprobs:
        return []
    text = "".join(token for token, _ in token_logprobs)
    wanted = _answer_range(text, short.strip()) if short.strip() else None
    if wanted is None:
        line_end = text.find("\n", len(text) - len(text.lstrip()))
        wanted = (0, line_end if line_end > 0 else len(text))
    return values_in(token_logprobs, wanted)
