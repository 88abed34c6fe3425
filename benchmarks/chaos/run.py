"""`python -m benchmarks chaos`: run the suites against a fresh data folder and report what they found.

Why a benchmark and not only tests: the tests pin each fix; this command measures the whole product as
shipped (the real CLI and REST API in subprocesses, the real embedding model and the embedded LLM, a fresh
data folder) and prints figures that can be compared across versions (benchmarks/chaos/report.py).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.chaos.api_suite import api_suite
from benchmarks.chaos.bounds import bounds_suite
from benchmarks.chaos.corpora import ALPHA, ALPHA_DOCS, write_files
from benchmarks.chaos.fairness import fairness_suite
from benchmarks.chaos.hostile import hostile_suite
from benchmarks.chaos.ingest_race import ingest_race_suite
from benchmarks.chaos.injection import injection_suite
from benchmarks.chaos.probe import Probe
from benchmarks.chaos.report import report_figures
from benchmarks.chaos.runner import REPO_ROOT, ChaosRunner
from benchmarks.chaos.seeds import seeds_suite
from benchmarks.chaos.sharing import sharing_suite
from benchmarks.chaos.storage import storage_suite
from benchmarks.chaos.tenants import tenant_suite
from benchmarks.chaos.turns import concurrency_suite

#: The suites by the name `python -m benchmarks chaos --suite` takes, in the order a full run runs them.
SUITES: dict[str, Callable[[ChaosRunner, Path], None]] = {
    "tenants": tenant_suite,
    "turns": concurrency_suite,
    "injection": injection_suite,
    "hostile": hostile_suite,
    "ingest": ingest_race_suite,
    "api": api_suite,
    "storage": storage_suite,
    "bounds": bounds_suite,
    "sharing": sharing_suite,
    "seeds": seeds_suite,
    "fairness": fairness_suite,
}
#: Suites that set up their own data (the others need alpha's documents indexed first).
OWN_DATA_SUITES = frozenset({"tenants", "ingest", "sharing", "seeds", "fairness"})


def run_chaos(
    *,
    code_root: Path = REPO_ROOT,
    suites: Sequence[str] = tuple(SUITES),
    work_dir: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> dict[str, Any]:
    """Run the suites against a fresh data folder; return figures, probes and the pass/fail count."""
    from evals.environment import code_commit, machine_description

    unknown = [name for name in suites if name not in SUITES]
    if unknown:
        raise ValueError(f"unknown chaos suite(s) {unknown}; choose among {', '.join(SUITES)}")
    owned = work_dir is None
    root = Path(tempfile.mkdtemp(prefix="rag-chaos-")) if work_dir is None else work_dir
    runner = ChaosRunner(work_dir=root, code_root=code_root.resolve(), progress=progress)
    data_dir = root / "rag"
    started = time.perf_counter()
    try:
        for name in suites:
            try:
                if name not in OWN_DATA_SUITES and not (data_dir / "catalog.sqlite").exists():
                    corpus = write_files(root / "corpus" / ALPHA, ALPHA_DOCS)
                    runner.ingest(data_dir, corpus, ALPHA, "alpha's documents")
                SUITES[name](runner, data_dir)
            except RuntimeError as error:
                runner.record(Probe(name, "set-up", False, str(error)[:300]))
    finally:
        if owned:
            shutil.rmtree(root, ignore_errors=True)
    passed = sum(probe.passed for probe in runner.probes)
    return {
        "machine": machine_description(),
        "code_root": str(code_root.resolve()),
        "code_commit": code_commit(code_root),
        "suites": list(suites),
        "seconds": round(time.perf_counter() - started, 1),
        **report_figures(runner.probes),
        "passed": passed,
        "failed": len(runner.probes) - passed,
        "probes": [asdict(probe) for probe in runner.probes],
    }
