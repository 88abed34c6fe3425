"""Prompt of the conversation summarizer (retrieval/conversation_summary.py), used with strong models only:
the embedded 135M model gets the extractive summary instead, which is more faithful than its prose.

The summary is a retrieval unit: it names what a later question would search for, and adds nothing.
"""

SUMMARY_SYSTEM = (
    "You summarize a conversation between a user and an assistant for a search index. Keep the facts, names, "
    "numbers and decisions that were stated; add nothing that was not said."
)

SUMMARY_PROMPT = """Conversation (turns {first} to {last}):
{transcript}

Summarize this conversation in at most {max_words} words, as plain sentences in the language of the
conversation. Mention every topic the user asked about. Reply with the summary only."""
