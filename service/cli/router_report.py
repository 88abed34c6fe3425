"""How `rag eval router` prints its report: the test half, then the dev half marked as tuning data."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from service.cli.common import console


def _accuracy(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def print_router_report(report: dict[str, Any]) -> None:
    """Per analyzer and per source, test half first; the dev half in its own rows marked as tuning data."""
    split = report.get("split") or {}
    table = Table(
        title=f"router: test half {report['n']} of {split.get('test_n', 0) + split.get('dev_n', 0)} labelled "
        f"questions ({', '.join(report['sources'])})"
    )
    for column in ("half", "analyzer", "source", "n", "accuracy", "single->multi", "multi->single"):
        table.add_column(column)
    halves = [("test", report, report["llm_n"])]
    if report.get("dev"):
        halves.append(("dev (tuning)", report["dev"], 0))
    for half, figures, llm_n in halves:
        matrix = figures["confusion"]["heuristic"]
        table.add_row(
            half,
            "heuristic",
            "all",
            str(figures["n"]),
            _accuracy(figures["heuristic_accuracy"]),
            str(matrix["single"]["multi"]),
            str(matrix["multi"]["single"]),
        )
        for source, values in figures["heuristic"]["per_source"].items():
            table.add_row(half, "heuristic", source, str(values["n"]), _accuracy(values["accuracy"]), "", "")
        if llm_n:
            matrix = figures["confusion"]["llm"]
            table.add_row(
                half,
                "llm",
                "subset",
                str(llm_n),
                _accuracy(figures["llm_accuracy"]),
                str(matrix["single"]["multi"]),
                str(matrix["multi"]["single"]),
            )
    console.print(table)
    console.print(
        f"default analyzer {report['default_analyzer']}: test accuracy {_accuracy(report['accuracy'])}"
        + (
            f"; heuristic on the LLM subset {_accuracy(report['heuristic_accuracy_on_llm_subset'])}, LLM "
            f"fallbacks {report['llm_fallback_rate']:.2f}, {report['llm_seconds_per_question']} s/question"
            if report["llm_n"]
            else ""
        ),
        highlight=False,
    )
