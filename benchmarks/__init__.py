"""The benchmark campaigns: model and prompt ablations, scale corpora, dataset-specific runs and plots.

Not installed with the product (pyproject's package list leaves it out): these reproduce the committed
result files from a checkout (`python -m benchmarks --help`; benchmarks/README.md). They may import the
product's packages; no product package imports them (tests/test_layering.py).
"""
