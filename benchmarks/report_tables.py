"""Markdown tables of the campaign reports: the cell format of results/README.md, and the QA table the
README and docs/benchmarks.md paste (`readme_qa_table`; tests/test_readme_results.py compares them line for
line, so a table is regenerated rather than edited).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.qa_scoring import current_names

MISSING = "–"
#: From these magnitudes on, table cells show no decimals / one decimal (milliseconds, token counts).
LARGE_NUMBER = 100
MEDIUM_NUMBER = 10


def fmt(value: Any, digits: int = 3) -> str:
    """A table cell: numbers rounded (fewer decimals for large ones), None as a dash."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= LARGE_NUMBER:
            return f"{value:.0f}"
        if abs(value) >= MEDIUM_NUMBER:
            return f"{value:.1f}"
        return f"{value:.{digits}f}"
    return str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(cell) for cell in row) + " |" for row in rows]
    return lines


#: The columns of the README's QA tables: (header, report key, decimals; None = as is).
README_QA_COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("n", "n", None),
    ("EM", "em", 3),
    ("F1", "f1", 3),
    ("contains gold", "contains_gold", 3),
    ("short contains gold", "short_contains_gold", 3),
    ("support R@5", "support_recall@5", 3),
    ("citation precision", "citation_precision", 3),
    ("not found", "not_found_rate", 3),
    ("LLM calls/q", "llm_calls_per_question", 2),
    ("tokens/q", "tokens_per_question", 0),
    ("p50 s", "latency_p50_s", 1),
)
QA_FILE_PREFIX = "qa_"


PIPELINE_ORDER = {"naive": 0, "agentic": 1, "no-retrieval": 2}


def run_label(stem: str, report: Mapping[str, Any]) -> str:
    """The run a `qa_<label>_<pipeline>.json` report belongs to: its file name without prefix and pipeline."""
    return stem.removeprefix(QA_FILE_PREFIX).removesuffix(f"_{report.get('pipeline')}")


def qa_table(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """One row per (run label, QA report), at the fixed precision of README_QA_COLUMNS."""
    rows = [
        [
            label,
            str(report.get("pipeline")),
            *(_fixed(report.get(key), digits) for _h, key, digits in README_QA_COLUMNS),
        ]
        for label, report in runs
    ]
    return table(["dataset", "pipeline", *(header for header, _key, _digits in README_QA_COLUMNS)], rows)


def readme_qa_table(paths: Sequence[Path]) -> list[str]:
    """The README's QA table of these `results/qa_<label>_<pipeline>.json` files, one row each, labelled by
    the file name as tests/test_readme_results.py reads it back: pasting a table by hand is how README
    numbers drift from the runs."""
    runs = []
    for path in paths:
        report = current_names(json.loads(Path(path).read_text(encoding="utf-8")))
        runs.append((run_label(Path(path).stem, report), report))
    return qa_table(runs)


def _fixed(value: Any, digits: int | None) -> str:
    """A README cell at a fixed number of decimals (`fmt` picks them by magnitude; the README does not)."""
    if value is None:
        return MISSING
    return str(value) if digits is None else f"{value:.{digits}f}"


# python -m benchmarks.report_tables results/qa_pooled_*.json: the README's QA table of those files
if __name__ == "__main__":
    import sys

    print("\n".join(readme_qa_table([Path(name) for name in sys.argv[1:]])))
