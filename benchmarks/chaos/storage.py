"""`python -m benchmarks chaos --suite storage`: a hundred sequential turns on one thread, and the checkpoint
bytes the thread holds after turns 10 and 100 (per turn, against BYTES_PER_TURN_TARGET and
BYTES_PER_TURN_AT_100_TARGET), and whether a late turn costs more than an early one (storage must stay flat
however long the conversation)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from benchmarks.chaos.corpora import ALPHA
from benchmarks.chaos.limits import (
    BYTES_PER_TURN_AT_100_TARGET,
    BYTES_PER_TURN_TARGET,
    FLAT_GROWTH_RATIO,
    LONG_CONVERSATION_TIMEOUT_S,
    LONG_CONVERSATION_TURNS,
    STORAGE_SNAPSHOTS,
    STORAGE_TURNS,
)
from benchmarks.chaos.probe import Probe
from benchmarks.chaos.runner import ChaosRunner, last_json
from benchmarks.chaos.threads import stored_ids
from benchmarks.chaos.turns import TURN_WORDS

#: A thread's checkpoint rows and bytes in the SQLite checkpoint file: checkpoint blobs, and pending writes.
CHECKPOINT_BYTES_SQL = {
    "checkpoints": "SELECT COUNT(*), COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) "
    "FROM checkpoints WHERE thread_id = ?",
    "writes": "SELECT COUNT(*), COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ?",
}


def checkpoint_bytes(path: Path, thread: str, tenant: str | None = None) -> tuple[int, int]:
    """(checkpoints, bytes) a thread holds in the SQLite checkpoint file: checkpoint blobs plus writes. With
    `tenant`, the tenant's thread: its scoped id, else the raw id when nothing is stored under the scoped one
    (a checkout older than scoped ids)."""
    with sqlite3.connect(str(path)) as connection:
        for thread_id in stored_ids(thread, tenant):
            count, size = connection.execute(CHECKPOINT_BYTES_SQL["checkpoints"], (thread_id,)).fetchone()
            if count:
                _, write_size = connection.execute(CHECKPOINT_BYTES_SQL["writes"], (thread_id,)).fetchone()
                return int(count), int(size) + int(write_size)
    return 0, 0


#: The long conversation: sequential turns on one thread through graphs.runner.Session in one process (a
#: process per turn would spend most of the time loading models), reading the thread's checkpoint bytes
#: straight from the SQLite file after the turns STORAGE_SNAPSHOTS names. Its questions come round every
#: ten turns, so most turns after the tenth are answered from the semantic cache: they store a question and
#: its answer like any turn, which is what the storage figures measure.
LONG_CONVERSATION_SNIPPET = """
import json, sqlite3, time
from config.settings import get_settings
from graphs.runner import Session
from state.context import Context
settings = get_settings()
session = Session(settings)
path = str(settings.data_dir / "checkpoints.sqlite")
sql, thread_ids, words, snapshots = SQL, THREAD_IDS, WORDS, SNAPSHOTS
def held():
    with sqlite3.connect(path) as connection:
        for thread_id in thread_ids:
            count, size = connection.execute(sql["checkpoints"], (thread_id,)).fetchone()
            if count:
                _, writes = connection.execute(sql["writes"], (thread_id,)).fetchone()
                return [count, size + writes]
    return [0, 0]
report = {"held": {}, "failures": [], "seconds": {}}
started = time.perf_counter()
for turn in range(1, TURNS + 1):
    word = words[turn % len(words)]
    try:
        session.ask(f"Is {word} a planet?", thread_id=THREAD, context=Context(tenant=TENANT))
    except Exception as error:
        report["failures"].append(f"turn {turn}: {type(error).__name__}: {str(error)[:200]}")
    if turn in snapshots:
        report["held"][str(turn)] = held()
        report["seconds"][str(turn)] = round(time.perf_counter() - started, 1)
print(json.dumps(report))
"""


def long_conversation_snippet(thread: str, tenant: str, turns: int = LONG_CONVERSATION_TURNS) -> str:
    """LONG_CONVERSATION_SNIPPET for `turns` turns of `tenant` on `thread`."""
    values = {
        "SQL": repr(CHECKPOINT_BYTES_SQL),
        "THREAD_IDS": repr(stored_ids(thread, tenant)),
        "WORDS": repr(list(TURN_WORDS)),
        "SNAPSHOTS": repr(sorted({n for n in STORAGE_SNAPSHOTS if n <= turns})),
        "TURNS": str(turns),
        "THREAD": repr(thread),
        "TENANT": repr(tenant),
    }
    # One pass, so no value is searched for names again.
    names = re.compile(r"\b(" + "|".join(values) + r")\b")
    return names.sub(lambda match: values[match.group(1)], LONG_CONVERSATION_SNIPPET)


def storage_figures(held: dict[str, list[int]]) -> dict[str, float]:
    """The storage figures of the long conversation's snapshots (turn -> [checkpoints, bytes] held after it):
    bytes and checkpoints per turn after STORAGE_TURNS turns, bytes per turn after LONG_CONVERSATION_TURNS,
    and the bytes turns 20 and 100 each added (flat storage: the later adds no more than the earlier)."""

    def at(turn: int) -> tuple[int, int]:
        count, size = held.get(str(turn)) or (0, 0)
        return int(count), int(size)

    first, last = STORAGE_TURNS, LONG_CONVERSATION_TURNS
    return {
        "bytes_per_turn": at(first)[1] / first,
        "checkpoints_per_turn": at(first)[0] / first,
        "bytes_per_turn_at_100": at(last)[1] / last,
        "checkpoints_at_100": float(at(last)[0]),
        "bytes_added_turn_20": float(at(20)[1] - at(19)[1]),
        "bytes_added_turn_100": float(at(last)[1] - at(last - 1)[1]),
    }


def storage_verdicts(figures: dict[str, float], failures: Sequence[str]) -> list[Probe]:
    """The two storage probes: the short figure against BYTES_PER_TURN_TARGET, and the long conversation
    against the turn-100 target and flatness. A failed turn fails both (its bytes are missing from the
    figures)."""
    failed = f"; {len(failures)} turns failed ({failures[0]})" if failures else ""
    short_ok = figures["bytes_per_turn"] <= BYTES_PER_TURN_TARGET and figures["bytes_per_turn"] > 0
    flat = figures["bytes_added_turn_100"] <= FLAT_GROWTH_RATIO * max(figures["bytes_added_turn_20"], 1.0)
    long_ok = 0 < figures["bytes_per_turn_at_100"] <= BYTES_PER_TURN_AT_100_TARGET and flat
    return [
        Probe(
            "storage",
            f"{STORAGE_TURNS} turns on one thread",
            short_ok and not failures,
            f"{figures['bytes_per_turn'] / 1000:.1f} KB and "
            f"{figures['checkpoints_per_turn']:.1f} checkpoints per turn "
            f"(target <= {BYTES_PER_TURN_TARGET / 1000:g} KB)" + failed,
            {key: figures[key] for key in ("bytes_per_turn", "checkpoints_per_turn")},
        ),
        Probe(
            "storage",
            f"{LONG_CONVERSATION_TURNS} turns on one thread",
            long_ok and not failures,
            f"{figures['bytes_per_turn_at_100'] / 1000:.1f} KB per turn at turn {LONG_CONVERSATION_TURNS} "
            f"(target <= {BYTES_PER_TURN_AT_100_TARGET / 1000:g} KB); turn 100 added "
            f"{figures['bytes_added_turn_100'] / 1000:.1f} KB, "
            f"turn 20 {figures['bytes_added_turn_20'] / 1000:.1f} KB"
            + ("" if flat else f" (not flat: more than {FLAT_GROWTH_RATIO:g}x)")
            + failed,
            {
                key: figures[key]
                for key in (
                    "bytes_per_turn_at_100",
                    "checkpoints_at_100",
                    "bytes_added_turn_20",
                    "bytes_added_turn_100",
                )
            },
        ),
    ]


def storage_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """A hundred sequential turns on one thread: checkpoint bytes per turn after 10 and after 100 turns, and
    whether a turn costs more the longer the conversation (it must not)."""
    result = runner.python_snippet(
        data_dir, long_conversation_snippet("storage-thread", ALPHA), timeout=LONG_CONVERSATION_TIMEOUT_S
    )
    report = last_json(result.stdout)
    if not isinstance(report, dict):
        raise RuntimeError(
            "chaos set-up: the long conversation printed no report"
            + (" (hung)" if result.hung else f": {result.output[-400:]}")
        )
    seconds = report.get("seconds") or {}
    for probe, turns in zip(
        storage_verdicts(storage_figures(report.get("held") or {}), report.get("failures") or []),
        (STORAGE_TURNS, LONG_CONVERSATION_TURNS),
        strict=True,
    ):
        probe.figures["traces"] = float(result.traceback)
        probe.figures["seconds"] = float(seconds.get(str(turns), 0.0))  # since the first turn began
        runner.record(probe)
