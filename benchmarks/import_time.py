"""What importing the graph costs against importing the libraries it is built on.

`import graphs.rag` runs before every `rag ask`, the server and every notebook. The yardstick is importing
langgraph and langchain_core alone (what any LangGraph application pays); the target is at most 1.5 times
that. Each run is a fresh interpreter (nothing cached in the process, the .pyc files warm from a first
unmeasured run), the two imports alternate (base, graph, base, graph, ...) so that a drift in the machine's
speed moves both, and the figures are medians. CPU seconds (user + system of the child) are the headline:
they move less with the machine's load than wall seconds, which are reported beside them.

    python -m benchmarks.import_time [--runs N] [--json results/import_time.json]

tests/test_import_cost.py checks the structure behind the number (which libraries the graph leaves for the
paths that use them); this script measures it, on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.environment import machine_description

REPO_ROOT = Path(__file__).resolve().parent.parent
#: What any LangGraph application imports: the yardstick.
BASE_IMPORT = "import langgraph.graph, langchain_core.messages"
#: What `rag ask`, the server and notebooks import.
GRAPH_IMPORT = "import graphs.rag"
#: Measured pairs by default: the median of 7 is steady on a quiet 2-core machine.
DEFAULT_RUNS = 7
#: Unmeasured runs of each import first (the .pyc files and the page cache warm).
WARMUP_RUNS = 1
#: One import slower than this is a broken environment, not a measurement.
RUN_TIMEOUT_S = 120.0
#: Target for graph / base.
TARGET_RATIO = 1.5


def time_import(statement: str) -> tuple[float, float]:
    """(cpu seconds, wall seconds) of a fresh interpreter that runs `statement` and exits."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    command = [sys.executable, "-c", statement]
    subprocess.run(command, cwd=REPO_ROOT, check=True, timeout=RUN_TIMEOUT_S, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def measure(runs: int) -> dict[str, Any]:
    """Time both imports `runs` times each, interleaved; medians and the graph / base ratio."""
    for _ in range(WARMUP_RUNS):
        time_import(BASE_IMPORT)
        time_import(GRAPH_IMPORT)
    load_before = os.getloadavg()[0]
    base: list[tuple[float, float]] = []
    graph: list[tuple[float, float]] = []
    for _ in range(runs):
        base.append(time_import(BASE_IMPORT))
        graph.append(time_import(GRAPH_IMPORT))
    base_cpu = statistics.median(cpu for cpu, _ in base)
    graph_cpu = statistics.median(cpu for cpu, _ in graph)
    pair_ratio = statistics.median(g[0] / b[0] for b, g in zip(base, graph, strict=True))
    base_wall = statistics.median(wall for _, wall in base)
    graph_wall = statistics.median(wall for _, wall in graph)
    return {
        "machine": machine_description(),
        "runs": runs,
        "base": BASE_IMPORT,
        "graph": GRAPH_IMPORT,
        "base_s": round(base_cpu, 3),
        "graph_s": round(graph_cpu, 3),
        "ratio": round(graph_cpu / base_cpu, 2),
        "pair_ratio_median": round(pair_ratio, 2),
        "base_wall_s": round(base_wall, 3),
        "graph_wall_s": round(graph_wall, 3),
        "wall_ratio": round(graph_wall / base_wall, 2),
        "target_ratio": TARGET_RATIO,
        "seconds": "cpu (user + system) of the child, median; *_wall_s: wall clock, median",
        "load_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "cores": os.cpu_count(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m benchmarks.import_time [--runs N] [--json OUT]`: prints the report, writes it to OUT."""
    description = __doc__.splitlines()[0] if __doc__ else None
    parser = argparse.ArgumentParser(prog="python -m benchmarks.import_time", description=description)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="measured runs of each import")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    report = measure(args.runs)
    text = json.dumps(report, ensure_ascii=False, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
