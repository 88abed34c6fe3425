"""A probe's verdict: one attack, whether it passed, why not, and the harm figures it counts (the report sums
them over all probes, so every suite speaks the same figures)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Probe:
    """One attack and its verdict."""

    suite: str
    name: str
    passed: bool
    detail: str = ""
    figures: dict[str, float] = field(default_factory=dict)


def failed_checks(*checks: tuple[str, object]) -> list[str]:
    """The labels of the (label, found) checks that found something (a truthy `found`): a verdict's reasons
    to fail, in the order checked."""
    return [label for label, found in checks if found]


def thread_unchanged_probe(suite: str, name: str, before: list[list[str]], after: list[list[str]]) -> Probe:
    """Another tenant's attacks left a thread as it was: the same stored messages before and after (and some
    to begin with). A changed thread counts as a leak: the attacker reached it."""
    intact = before == after and bool(before)
    return Probe(
        suite,
        name,
        intact,
        "" if intact else f"{len(before)} messages before, {len(after)} after",
        {"leaks": float(not intact)},
    )
