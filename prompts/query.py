"""Prompts of query understanding: contextualize, analyze, multi-query, HyDE, decomposition, expansion,
reformulation.

Short and explicit, one instruction placed last, so small models follow them too.
"""

CONTEXTUALIZE_SYSTEM = (
    "You rewrite the user's last message as a standalone question. Replace pronouns and references with "
    "the names they refer to from the conversation. Do not answer the question."
)

CONTEXTUALIZE_PROMPT = """Conversation:
{history}

Last message: {question}

Write the last message as one standalone question that can be understood without the conversation.
Keep its language. Reply with the question only."""

ANALYZE_SYSTEM = "You classify questions for a search engine. Reply with JSON only."

ANALYZE_PROMPT = """Question: {question}

Classify the question.
- query_type: SIMPLE_FACT (one fact), COMPLEX_REASONING (why/how, explanation), MULTI_HOP (needs a fact
  about something the question only describes, e.g. "the director of film X was born where?"),
  COMPARISON (two or more things compared), AGGREGATION (list, count or summarize many items),
  OPEN_ENDED (opinion, advice, brainstorming)
- complexity: 1 (one lookup) to 10 (long multi-step reasoning)
- needs_retrieval: false only for greetings, thanks, chit-chat or pure arithmetic
- wants_details: true if the question asks how, or asks for details or steps"""

MULTI_QUERY_SYSTEM = "You write search queries. Reply with JSON only."

MULTI_QUERY_PROMPT = """Question: {question}

Write {n} different search queries that would find passages answering this question.
Use other words, synonyms and the key names. Keep the question's language.
Reply as JSON: {{"queries": ["...", "..."]}}"""

HYDE_SYSTEM = "You write short encyclopedia passages."

HYDE_PROMPT = """Question: {question}

Write a short passage (3 to 5 sentences) that answers the question, in the style of an encyclopedia.
If you are unsure of facts, still write a plausible passage with the right vocabulary.
Keep the question's language. Reply with the passage only."""

DECOMPOSE_SYSTEM = "You split complex questions into simple ones. Reply with JSON only."

DECOMPOSE_PROMPT = """Question: {question}

Split the question into 2 to {max_n} simple questions that can each be answered by one search.
For a comparison, ask one question per item. For a question about something only described
("the director of film X"), first ask who or what it is, then ask the rest.
Keep the question's language. Reply as JSON: {{"questions": ["...", "..."]}}"""

EXPAND_SYSTEM = "You expand search queries with keywords. Reply with JSON only."

EXPAND_PROMPT = """Question: {question}

Write {n} keyword queries for a search engine: the key names and terms of the question plus synonyms,
related terms and other spellings. Keep the question's language.
Reply as JSON: {{"queries": ["...", "..."]}}"""

REFORMULATE_SYSTEM = "You improve search queries that found too little. Do not answer the question."

REFORMULATE_PROMPT = """Question: {question}

Queries already tried:
{tried}

What the passages found so far did not contain: {missing}
Passages found so far are about: {found}
{suggestions}
Write one new search query, different from the ones tried, that is likely to find the missing information.
Reply with the query only."""
#: REFORMULATE_PROMPT's {suggestions} after an answer that needs improvement ("" otherwise).
REFORMULATE_SUGGESTIONS = """The answer written from these passages was reviewed; the reviewer suggested:
{suggestions}
"""

NEXT_HOP_PROMPT = """Question: {question}

This question needs two searches. The first search found passages about: {found}
Names found that the question does not mention: {bridge}

Write the next search query: it should look for the rest of the question about those names.
Reply with the query only."""
