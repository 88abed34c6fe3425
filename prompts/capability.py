"""The model self-test behind `RAG_LLM_STRENGTH=auto` (models/capability.py).

Why this task: it is what a "strong" model is trusted with (the LLM relevance grader and the structured
analysis that may skip retrieval), in miniature and with one known answer. Passage 3 shares the question's
name and carries a number, so a model that judges relevance by word overlap, or answers "true" for
everything, fails; the year must be copied from the one passage that answers. The names are invented, so
no model knows the answer without reading.
"""

from __future__ import annotations

SELF_TEST_SYSTEM = "You check passages for a search engine and reply with JSON only."

SELF_TEST_PROMPT = """Question: In which year did the Vellmar Bridge open?

Passage 1: Tomatoes grow best in warm, well-drained soil.
Passage 2: The Vellmar Bridge over the river Oste opened to traffic in 1931.
Passage 3: The Vellmar Library lends books to readers in 12 villages.

For each passage, say whether it answers the question. Then give the year the question asks for."""
