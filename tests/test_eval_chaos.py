"""The chaos benchmark's verdicts: what counts as a lost, duplicated, unanswered or mixed turn, a leak, a
hang. The probes themselves drive the real CLI (minutes with the real models, so they run as the benchmark,
not here); these tests pin the judging logic, and one cheap hostile probe runs end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from evals.chaos import (
    ChaosRunner,
    checkpoint_bytes,
    hostile_files,
    last_json,
    leaked,
    turn_verdict,
)


def test_every_turn_stored_once_and_answered_is_clean() -> None:
    messages = [
        ["human", "Is the kiwi a planet?"],
        ["ai", "No."],
        ["human", "Is the mango a planet?"],
        ["ai", "No."],
    ]
    outcomes = {
        "kiwi": {"ok": True, "standalone": "Is the kiwi a planet?"},
        "mango": {"ok": True, "standalone": ""},
    }
    figures, notes = turn_verdict(messages, outcomes)
    assert figures == {"lost": 0, "duplicated": 0, "unanswered": 0, "mixed": 0, "refused": 0}
    assert notes == []


def test_lost_duplicated_unanswered_and_mixed_turns_are_counted() -> None:
    messages = [
        ["human", "Is the kiwi a planet?"],
        ["human", "Is the kiwi a planet?"],
        ["ai", "No."],
        ["human", "Is the papaya a planet?"],
    ]
    outcomes = {
        "kiwi": {"ok": True, "standalone": "Is the kiwi a planet?"},
        "mango": {"ok": True, "standalone": "Is the mango a planet?"},
        "papaya": {"ok": True, "standalone": "Is the papaya or the mango a planet?"},
    }
    figures, _ = turn_verdict(messages, outcomes)
    assert figures["lost"] == 1  # mango answered to its caller, absent from the thread
    assert figures["duplicated"] == 1  # kiwi stored twice
    assert figures["unanswered"] == 2  # the first kiwi and papaya have no AI message right after them
    assert figures["mixed"] == 1  # papaya carries mango, which is not in its history: another turn's


def test_a_question_may_use_the_turns_stored_before_it_but_not_later_ones() -> None:
    messages = [
        ["human", "Is the kiwi a planet?"],
        ["ai", "No."],
        ["human", "Is the papaya a planet?"],
        ["ai", "No."],
    ]
    own_history = {
        "kiwi": {"ok": True, "standalone": "Is the kiwi a planet?"},
        "papaya": {"ok": True, "standalone": "Is the papaya a planet? (kiwi)"},
    }
    assert turn_verdict(messages, own_history)[0]["mixed"] == 0
    from_a_later_turn = {
        "kiwi": {"ok": True, "standalone": "Is the kiwi a planet? (papaya)"},
        "papaya": {"ok": True, "standalone": "Is the papaya a planet?"},
    }
    assert turn_verdict(messages, from_a_later_turn)[0]["mixed"] == 1


def test_a_refused_turn_is_not_lost_but_must_not_be_stored() -> None:
    outcomes = {"kiwi": {"ok": False, "error": "ThreadBusyError"}}
    figures, _ = turn_verdict([], outcomes)
    assert figures["refused"] == 1 and figures["lost"] == 0
    figures, _ = turn_verdict([["human", "Is the kiwi a planet?"], ["ai", "No."]], outcomes)
    assert figures["duplicated"] == 1


def test_leak_detection_is_case_insensitive_and_names_the_canary() -> None:
    assert leaked("mined in the VESK valley") == ["Vesk"]
    assert leaked("Jupiter is large") == []


def test_last_json_reads_the_last_json_line() -> None:
    assert last_json('noise\n{"a": 1}\n{"b": 2}\n') == {"b": 2}


def test_last_json_reads_an_indented_document_not_its_last_string_line() -> None:
    document = {"answer": "No.", "warnings": [{"sentences": ["The kiwi is a fruit."]}]}
    printed = "log line\n" + json.dumps(document, indent=2) + "\n"
    assert '"The kiwi is a fruit."' in [line.strip() for line in printed.splitlines()]  # valid JSON alone
    assert last_json(printed) == document
    assert last_json("no json here") is None


def test_checkpoint_bytes_sums_one_threads_blobs(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE checkpoints (thread_id TEXT, checkpoint BLOB, metadata BLOB)")
        connection.execute("CREATE TABLE writes (thread_id TEXT, value BLOB)")
        connection.executemany(
            "INSERT INTO checkpoints VALUES (?, ?, ?)", [("t", b"x" * 100, b"y" * 10), ("u", b"z" * 999, b"")]
        )
        connection.execute("INSERT INTO writes VALUES ('t', ?)", (b"w" * 5,))
    assert checkpoint_bytes(path, "t") == (1, 115)


def test_a_child_that_never_ends_is_killed_and_reported_as_hung(tmp_path: Path) -> None:
    runner = ChaosRunner(work_dir=tmp_path)
    result = runner.run(["-c", "import time; time.sleep(60)"], tmp_path / "rag", timeout=1)
    assert result.hung and result.returncode is None and result.seconds < 30


def test_hostile_files_are_what_they_claim(tmp_path: Path) -> None:
    files = hostile_files(tmp_path)
    assert files["zero"].resolve() == Path("/dev/zero")
    assert files["fifo"].is_fifo()
    assert files["bomb"].stat().st_size < 2_000_000  # tiny on disk, ~300 MB of XML inside
