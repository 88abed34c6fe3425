"""Query understanding without a model, one module per concern.

- lexicons: the word lists and patterns (English and Chinese) the other modules read;
- text: language, words, names, titles, content words of a question;
- signals: comparison and bridge cues; classification: query type, complexity, retrieval needed;
- follow_ups: self-contained follow-up questions; decomposition: sub-questions; variants: search variants;
- feedback: search terms taken from retrieved documents (missing terms, bridge names).

Why heuristics: the embedded model cannot classify or rewrite questions reliably, and every node needs a
documented default when a stronger model returns garbage. Everything here is pure, deterministic and cheap,
so it is both the weak-model path and the fallback of the LLM paths. Import from the concern's module.
"""
