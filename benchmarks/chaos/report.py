"""The chaos report's figures: each harm summed over all probes (every target is 0), the storage figures with
their targets, and the peak memory of one child over the hostile set. `results/chaos_after.json` holds a
report of this shape (docs/benchmarks.md cites it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.chaos.limits import BYTES_PER_TURN_AT_100_TARGET, BYTES_PER_TURN_TARGET
from benchmarks.chaos.probe import Probe

#: Figures summed over probes, in report order.
FIGURES = (
    "leaks",
    "lost",
    "duplicated",
    "unanswered",
    "mixed",
    "refused",
    "obeyed",
    "suppressed",
    "traces",
    "hangs",
    "memory_blowups",
    "wrong_exit_codes",
    "multiline_errors",
    "wrong_statuses",
    "oversize_accepted",
    "unauthenticated_reads",
    "crashes",
    "miscounted",
    "starved",
)
#: Storage figures the report copies from the storage probes (None when the suite did not run).
STORAGE_FIGURES = (
    "bytes_per_turn",
    "checkpoints_per_turn",
    "bytes_per_turn_at_100",
    "checkpoints_at_100",
    "bytes_added_turn_20",
    "bytes_added_turn_100",
)


def report_figures(probes: Sequence[Probe]) -> dict[str, Any]:
    """The report's figures: each harm summed over the probes, the storage figures with their targets, and
    the peak memory of one child over the hostile set."""
    totals = {name: sum(probe.figures.get(name, 0.0) for probe in probes) for name in FIGURES}
    storage: dict[str, Any] = dict.fromkeys(STORAGE_FIGURES)
    for probe in probes:
        if probe.suite == "storage":
            storage.update({key: value for key, value in probe.figures.items() if key in STORAGE_FIGURES})
    hostile_rss = [probe.figures["max_rss_bytes"] for probe in probes if "max_rss_bytes" in probe.figures]
    return {
        "figures": totals,
        **storage,
        "bytes_per_turn_target": BYTES_PER_TURN_TARGET,
        "bytes_per_turn_at_100_target": BYTES_PER_TURN_AT_100_TARGET,
        "hostile_peak_rss_bytes": max(hostile_rss) if hostile_rss else None,
    }
