"""Query understanding without a model, one module per concern (import from the concern's module).

Why heuristics: the embedded model cannot classify or rewrite questions reliably, and the LLM paths need a
default when a stronger model returns garbage; everything here is pure, deterministic and cheap.
"""
