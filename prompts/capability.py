"""The model self-test behind `RAG_LLM_STRENGTH=auto` (models/capability.py).

What a "strong" model is trusted with, in miniature: a distractor passage shares the question's name, so
word-overlap judging fails, and the invented names mean no model knows the answer without reading.
"""

from __future__ import annotations

SELF_TEST_SYSTEM = "You check passages for a search engine and reply with JSON only."

SELF_TEST_PROMPT = """Question: In which year did the Vellmar Bridge open?

Passage 1: Tomatoes grow best in warm, well-drained soil.
Passage 2: The Vellmar Bridge over the river Oste opened to traffic in 1931.
Passage 3: The Vellmar Library lends books to readers in 12 villages.

For each passage, say whether it answers the question. Then give the year the question asks for."""
