"""Prompt constants, one module per concern (query understanding, answering, grading)."""
