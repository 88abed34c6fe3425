"""Prompts of `python -m benchmarks models`: reading comprehension with the gold passages in the prompt.

Every model gets the same plain request without retrieval or the graph; the long prompt asks for an
explanation so that the timing includes real generation.
"""

from __future__ import annotations

READING_SYSTEM_EN = (
    "You answer questions using only the given passages. Reply with the answer alone: a short phrase copied "
    "from the passages (a name, a date, a number, a place) or yes/no. No sentence, no explanation."
)
READING_SYSTEM_ZH = (
    "你只根据给定的段落回答问题。只输出答案本身：从段落中摘抄的简短片段（人名、日期、数字、地点等）。"
    "不要写句子，不要解释。"
)

READING_PROMPT_EN = "Passages:\n{passages}\n\nQuestion: {question}\nAnswer:"
READING_PROMPT_ZH = "段落：\n{passages}\n\n问题：{question}\n答案："

#: One passage of the prompt: its number and title, then its text.
PASSAGE_LINE = "[{number}] {title}: {text}"

#: One worked example per language, asked as an earlier turn: small models copy the form of an answer far
#: better than they follow a description of it. Invented places, so no model knows them beforehand.
EXAMPLE_QUESTION_EN = READING_PROMPT_EN.format(
    passages="[1] Lake Vorna: Lake Vorna is a reservoir in the north of the Teslin region, filled in 1962.\n"
    "[2] Mirel Dam: The Mirel Dam, completed in 1958, holds back the river that feeds Lake Vorna.",
    question="Which came first, the Mirel Dam or Lake Vorna?",
)
EXAMPLE_ANSWER_EN = "Mirel Dam"
EXAMPLE_QUESTION_ZH = READING_PROMPT_ZH.format(
    passages="[1] 青石桥：青石桥位于南溪镇，建于1887年，全长42米，是当地最古老的石桥。",
    question="青石桥建于哪一年？",
)
EXAMPLE_ANSWER_ZH = "1887年"

#: The ~1500-token timing prompt: many passages, and an answer with its explanation.
LONG_SYSTEM = (
    "You answer questions from the given passages. Give the answer, then explain it in a few sentences."
)
