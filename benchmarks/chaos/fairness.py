"""`python -m benchmarks chaos --suite fairness`: one tenant floods the API while another asks, and the
other's answers must stay within FAIRNESS_TARGET_RATIO of its time alone.

The measurement is `python -m benchmarks fairness` of the checkout under attack, run as a child process
(the benchmark serves a CPU-free stand-in model on loopback and starts that checkout's `rag serve`), with
the model gate the embedded model gets on auto (two places) and a smaller flood than the benchmark's
report, so the suite stays short. A checkout without the benchmark fails the probe at set-up, which is
what it measures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.chaos.probe import Probe
from benchmarks.chaos.runner import ChaosRunner

SUITE = "fairness"
PROBE_NAME = "a flooding tenant leaves the other its pace"
#: The model gate measured: the embedded model's on auto (service/api/gate.py EMBEDDED_MODEL_PLACES).
CONFIGURATION = "two_model_places"
#: bravo's questions per phase and alpha's concurrent clients (the benchmark's report uses 8 and 20).
QUESTIONS = 6
CLIENTS = 12
#: bravo's median flooded / alone, at most.
FAIRNESS_TARGET_RATIO = 1.5
#: The whole child run (two phases, a server start, the flood), at most.
FAIRNESS_TIMEOUT_S = 600.0


def fairness_verdict(report: dict[str, Any] | None, output: str) -> Probe:
    """The probe of one benchmark report: bravo's ratio within the target, and every answer of both
    tenants."""
    rows = [row for row in (report or {}).get("results", []) if "ratio_p50" in row]
    if not rows:
        return Probe(SUITE, PROBE_NAME, False, f"no measurement: {output[-300:]}")
    row = rows[0]
    ratio = float(row["ratio_p50"])
    answered = bool(row["bravo_all_answered"]) and bool(row["alpha_all_answered"])
    passed = ratio <= FAIRNESS_TARGET_RATIO and answered
    detail = (
        f"bravo's p50 flooded / alone {ratio:.2f} (target <= {FAIRNESS_TARGET_RATIO}); "
        f"alpha answered {row['alpha_answered']} of {row['alpha_asked']}"
    )
    return Probe(
        SUITE,
        PROBE_NAME,
        passed,
        "" if passed else detail,
        {
            "fairness_ratio": ratio,
            "starved": float(ratio > FAIRNESS_TARGET_RATIO),
            "unanswered": float(not answered),
        },
    )


def fairness_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """Run the fairness benchmark of the checkout under attack and judge its report."""
    out = runner.work_dir / "fairness.json"
    result = runner.run(
        [
            "-m",
            "benchmarks",
            "fairness",
            "--checkout",
            str(runner.code_root),
            "--configuration",
            CONFIGURATION,
            "--questions",
            str(QUESTIONS),
            "--clients",
            str(CLIENTS),
            "--json-out",
            str(out),
        ],
        data_dir,
        timeout=FAIRNESS_TIMEOUT_S,
    )
    report = json.loads(out.read_text()) if out.is_file() else None
    runner.record(fairness_verdict(report, result.output))
