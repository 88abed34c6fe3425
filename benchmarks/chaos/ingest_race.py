"""`python -m benchmarks chaos --suite ingest`: two `rag ingest` processes of the same new file at once, in a
data folder of their own. Both must end cleanly (or with the documented busy refusal), and the catalog and the
vectors must hold the file exactly once (`rag doctor --json` checks the vectors against the catalog)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.chaos.corpora import ALPHA, write_files
from benchmarks.chaos.probe import Probe, failed_checks
from benchmarks.chaos.runner import ChaosRunner, ProcessResult, last_json

#: A document of many chunks (its embedding takes seconds, the window in which both ingests find it new):
#: two ingests of it at once must leave exactly one copy.
RACE_DOC = "# Orchard log\n\n" + "\n\n".join(
    f"## Row {row}\n\n"
    + " ".join(f"Tree {row}-{tree} of the Hollin orchard bore {row * tree} pears." for tree in range(1, 25))
    for row in range(1, 61)
)


def catalog_counts(data_dir: Path) -> tuple[int, int] | None:
    """(documents, chunks) in a data folder's catalog; None when it cannot be read."""
    try:
        with sqlite3.connect(f"file:{data_dir / 'catalog.sqlite'}?mode=ro", uri=True) as connection:
            (documents,) = connection.execute("SELECT COUNT(*) FROM documents").fetchone()
            (chunks,) = connection.execute("SELECT COUNT(*) FROM chunks").fetchone()
    except sqlite3.Error:
        return None
    return int(documents), int(chunks)


def ingest_race_verdict(
    results: Sequence[ProcessResult], counts: tuple[int, int] | None, vectors: dict[str, Any] | None
) -> Probe:
    """Two ingests of one file at once: both end cleanly (0; or 1, the documented busy refusal after
    INGEST_LOCK_TIMEOUT_S, in one line), no trace, and the catalog holds the file once: as many chunks as
    the ingest that indexed it reported. `vectors` is `rag doctor --json`'s vectors check (None: not run),
    whose chunk count must agree, with no strays or missing ones."""
    summaries = [last_json(result.stdout) for result in results]
    indexed = [s for s in summaries if isinstance(s, dict) and s.get("indexed")]
    expected = max((int(s.get("chunks", 0)) for s in indexed), default=0)
    documents, chunks = counts if counts is not None else (0, 0)
    bad_exit = [
        result.returncode
        for result in results
        if not result.hung and result.returncode != 0 and not (result.returncode == 1 and result.lines == 1)
    ]
    # The file's vectors: beyond the catalog's chunks (strays) embedded twice, short of them lost.
    vector_counts = (vectors or {}).get("counts") or {}
    vector_chunks = int(vector_counts.get("chunks", chunks))
    extra_vectors = max(vector_chunks - chunks, 0) + int(vector_counts.get("strays", 0))
    missing_vectors = max(chunks - vector_chunks, 0) + int(vector_counts.get("missing", 0))
    vector_problem = vectors is not None and (
        vectors.get("status") != "ok" or bool(extra_vectors) or bool(missing_vectors)
    )
    figures = {
        "traces": float(sum(result.traceback for result in results)),
        "hangs": float(sum(result.hung for result in results)),
        "wrong_exit_codes": float(len(bad_exit)),
        "duplicated": float(max(chunks - expected, 0) + max(documents - 1, 0) + extra_vectors)
        if indexed
        else 0.0,
        "lost": float(not indexed or chunks < expected or bool(missing_vectors)),
    }
    problems = failed_checks(
        ("stack trace", figures["traces"]),
        ("hang", figures["hangs"]),
        (f"exits {bad_exit}", bad_exit),
        ("no ingest indexed the file", not indexed),
        (
            f"{documents} documents / {chunks} chunks stored, one ingest makes 1 / {expected}",
            indexed and (documents, chunks) != (1, expected),
        ),
        (f"vectors disagree with the catalog: {vector_counts or vectors}", vector_problem),
    )
    codes = [result.returncode for result in results]
    stored = (
        f"{documents} document, {chunks} chunks stored (one ingest: {expected}); exits {codes}; "
        f"embedded by {len(indexed)} of {len(results)} processes"
    )
    return Probe(
        "ingest", "two ingests of one file at once", not problems, "; ".join([*problems, stored]), figures
    )


def ingest_race_suite(runner: ChaosRunner, _data_dir: Path) -> None:
    """Two `rag ingest` processes of the same new file at once, in a data folder of their own."""
    race_dir = runner.work_dir / "ingest-race" / "rag"
    target = write_files(runner.work_dir / "corpus" / "race", {"orchard.md": RACE_DOC}) / "orchard.md"

    def one_ingest(_index: int) -> ProcessResult:
        return runner.rag(race_dir, "ingest", str(target), "--tenant", ALPHA, "--json", timeout=600)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one_ingest, range(2)))
    vectors = None
    if runner.supports(race_dir, ["doctor"], "--json"):
        report = last_json(runner.rag(race_dir, "doctor", "--json").stdout)
        checks = report.get("checks", []) if isinstance(report, dict) else []
        vectors = next(
            (check for check in checks if check.get("store") == "vectors"), {"status": "unreadable"}
        )
    runner.record(ingest_race_verdict(results, catalog_counts(race_dir), vectors))
