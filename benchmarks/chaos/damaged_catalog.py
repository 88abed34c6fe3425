"""The hostile suite's damaged catalog: a copy of the data folder whose catalog file is garbage, then `rag
search`, `rag ask` and `rag ingest` on it. Each must fail in one line (search naming the catalog), without a
stack trace, and the original data folder is never touched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from benchmarks.chaos.corpora import ALPHA
from benchmarks.chaos.probe import Probe, failed_checks
from benchmarks.chaos.runner import ChaosRunner


def damaged_copy(runner: ChaosRunner, data_dir: Path, name: str) -> Path:
    """A copy of the data folder whose catalog file is garbage (the original data is not touched)."""
    damaged = runner.work_dir / "damaged" / name / "rag"
    shutil.rmtree(damaged.parent, ignore_errors=True)
    shutil.copytree(data_dir, damaged)
    for extra in ("catalog.sqlite-wal", "catalog.sqlite-shm"):
        (damaged / extra).unlink(missing_ok=True)
    (damaged / "catalog.sqlite").write_bytes(b"this is not a database" + os.urandom(4096))
    return damaged


def damaged_catalog_command_probe(runner: ChaosRunner, data_dir: Path, command: str) -> None:
    """`rag ask`, or `rag ingest` of files already indexed (the incremental path reads the catalog first), on
    a damaged catalog: a non-zero exit with one line, no stack trace."""
    damaged = damaged_copy(runner, data_dir, command)
    if command == "ask":
        result = runner.rag(damaged, "ask", "What is the largest planet?", "--tenant", ALPHA)
    else:
        result = runner.rag(damaged, "ingest", str(runner.work_dir / "corpus" / ALPHA), "--tenant", ALPHA)
    zero = result.returncode == 0
    multiline = not result.hung and result.lines != 1
    problems = failed_checks(
        ("stack trace", result.traceback),
        ("hang", result.hung),
        ("exit 0", zero),
        (f"{result.lines} lines of output, expected one", multiline),
    )
    runner.record(
        Probe(
            "hostile",
            f"corrupt catalog: rag {command}",
            not problems,
            "; ".join(problems),
            {
                "traces": float(result.traceback),
                "hangs": float(result.hung),
                "wrong_exit_codes": float(zero),
                "multiline_errors": float(multiline),
            },
        )
    )


def corrupt_catalog_probe(runner: ChaosRunner, data_dir: Path) -> None:
    """A damaged catalog file: one line naming the file, exit 1; the original data is not touched."""
    damaged = damaged_copy(runner, data_dir, "search")
    result = runner.rag(damaged, "search", "planet")
    named = "catalog" in result.stderr
    problems = failed_checks(
        ("stack trace", result.traceback),
        ("hang", result.hung),
        (f"exit {result.returncode}, expected 1", result.returncode != 1 and not result.hung),
        ("error does not name the catalog", not named),
    )
    runner.record(
        Probe(
            "hostile",
            "corrupt catalog file",
            not problems,
            "; ".join(problems),
            {
                "traces": float(result.traceback),
                "hangs": float(result.hung),
                "wrong_exit_codes": float(result.returncode != 1 and not result.hung),
            },
        )
    )
