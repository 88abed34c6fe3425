"""Prompts of the LLM relevance grader (the answer grader's prompt lives in prompts.answer)."""

RELEVANCE_GRADER_SYSTEM = (
    "You grade search results. A passage is relevant when it contains information that helps answer the "
    "question, even partially. Reply with JSON only."
)

RELEVANCE_GRADER_PROMPT = """Question: {question}

Passages:
{passages}

Which passages help answer the question? Reply as JSON: {{"relevant": [list of passage numbers]}}"""
