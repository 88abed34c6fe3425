"""The chaos benchmark's verdicts: what counts as a lost, duplicated, unanswered or mixed turn, a leak, a
hang. The probes themselves drive the real CLI (minutes with the real models, so they run as the benchmark,
not here); these tests pin the judging logic, and one cheap hostile probe runs end to end."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchmarks.chaos.api_disconnect import DISCONNECT_METRIC, disconnect_count, disconnect_verdict
from benchmarks.chaos.api_probes import cap_verdict, http_verdict
from benchmarks.chaos.bounds_verdicts import (
    RECORD_CANARY,
    RECORD_FIELDS,
    WIDE_FILTER_MEMBERS,
    batch_item,
    cli_refusal_verdict,
    compact_json,
    deep_filter,
    exchange_verdict,
    filter_refusal_verdict,
    hostile_filters,
    not_applicable,
    restart_verdict,
    stored_keys_verdict,
    wide_or,
    wide_record_verdict,
)
from benchmarks.chaos.corpora import leaked
from benchmarks.chaos.hostile import HostileCase, hostile_files, hostile_verdict
from benchmarks.chaos.http_client import HttpResult, http_request, multipart, parse_response
from benchmarks.chaos.ingest_race import ingest_race_verdict
from benchmarks.chaos.injection import SUPPRESSIONS, answer_gist, suppression_documents, suppression_verdict
from benchmarks.chaos.limits import BYTES_PER_TURN_AT_100_TARGET, JSON_CAP_BYTES, LONG_CONVERSATION_TURNS
from benchmarks.chaos.probe import Probe
from benchmarks.chaos.report import report_figures
from benchmarks.chaos.run import OWN_DATA_SUITES, SUITES
from benchmarks.chaos.runner import ChaosRunner, ProcessResult, last_json
from benchmarks.chaos.seeds import SEED_ROUTES, bad_bodies, keyed_routes
from benchmarks.chaos.seeds_memory import (
    control_verdict,
    foreign_delete_verdict,
    intact_verdict,
    memory_snapshot,
)
from benchmarks.chaos.seeds_streams import left_stream_verdict
from benchmarks.chaos.seeds_verdicts import (
    GENERATE_STREAM,
    MEMORIES,
    QUERY_STREAM,
    answer_excerpt,
    auth_verdict,
    cap_refusal_verdict,
    log_verdict,
    nothing_stored_verdict,
    seeds_verdict,
    validation_verdict,
)
from benchmarks.chaos.sharing_verdicts import (
    batch_failures_verdict,
    concurrent_uploads_verdict,
    counted_requests_verdict,
    generated_document,
    keyless_health_verdict,
    listening_ports,
    metric_sum,
    model_server_verdict,
    path_leak_verdict,
    server_paths,
    sha256_hex,
    side_channel_verdict,
    tenant_health_verdict,
    version_document,
)
from benchmarks.chaos.storage import (
    checkpoint_bytes,
    long_conversation_snippet,
    storage_figures,
    storage_verdicts,
)
from benchmarks.chaos.threads import scoped_id, unanswered_questions
from benchmarks.chaos.turns import turn_verdict
from benchmarks.commands import app as benchmarks_app
from persistence.threads import scoped_thread_id


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


def test_the_probes_read_threads_under_the_runners_scoped_id() -> None:
    assert scoped_id("alpha", "t1") == scoped_thread_id("alpha", "t1")


def _checkpoint_file(path: Path, rows: list[tuple[str, bytes]]) -> Path:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE checkpoints (thread_id TEXT, checkpoint BLOB, metadata BLOB)")
        connection.execute("CREATE TABLE writes (thread_id TEXT, value BLOB)")
        connection.executemany("INSERT INTO checkpoints VALUES (?, ?, '')", rows)
    return path


def test_checkpoint_bytes_read_the_scoped_thread_then_the_raw_id_of_older_checkouts(tmp_path: Path) -> None:
    both = _checkpoint_file(tmp_path / "both.sqlite", [("alpha/t", b"x" * 10), ("t", b"y" * 99)])
    assert checkpoint_bytes(both, "t", "alpha") == (1, 10)  # the tenant's thread, not the raw id's
    legacy = _checkpoint_file(tmp_path / "legacy.sqlite", [("t", b"y" * 99)])
    assert checkpoint_bytes(legacy, "t", "alpha") == (1, 99)
    assert checkpoint_bytes(legacy, "u", "alpha") == (0, 0)


def test_a_question_without_an_answer_right_after_it_is_unanswered() -> None:
    assert unanswered_questions([["human", "a"], ["ai", "b"], ["human", "c"], ["ai", "d"]]) == 0
    assert unanswered_questions([["human", "a"], ["human", "c"], ["ai", "d"], ["human", "e"]]) == 2


def test_a_declined_answer_is_suppressed_only_where_the_clean_twin_answered() -> None:
    answered = {"not_found": False, "answer": "It grinds 900 sacks a day [1]."}
    flagged = {"not_found": True, "answer": "I could not find that in the documents."}
    copied = {"not_found": False, "short_answer": "not found", "answer": "Not found."}
    assert suppression_verdict(answered, answered) == (True, "", 0.0)
    assert suppression_verdict(flagged, answered)[::2] == (False, 1.0)
    assert suppression_verdict(copied, answered)[::2] == (False, 1.0)  # obeyed in words, not flagged
    assert suppression_verdict(None, answered)[::2] == (False, 1.0)  # the planted run gave no answer
    passed, detail, suppressed = suppression_verdict(flagged, flagged)
    assert passed and suppressed == 0.0 and "inconclusive" in detail


def test_an_answer_gist_shows_the_short_answer_and_a_decline() -> None:
    assert answer_gist({"short_answer": "900 sacks", "answer": "It grinds 900 sacks [1]."}) == "'900 sacks'"
    assert answer_gist({"not_found": True, "answer": "Not in the documents."}).startswith("not found: ")
    assert answer_gist(None) == "no answer"


def test_the_clean_twin_is_the_planted_corpus_without_its_lines() -> None:
    planted, twin = suppression_documents(True), suppression_documents(False)
    assert planted.keys() == twin.keys()
    for name, line, _template, _question in SUPPRESSIONS:
        assert line in planted[name] and line not in twin[name]
        assert planted[name].replace(line, "") == twin[name]


def test_storage_figures_show_per_turn_bytes_and_whether_growth_is_flat() -> None:
    flat = {
        "10": [10, 60_000],
        "19": [10, 110_000],
        "20": [10, 115_000],
        "99": [10, 500_000],
        "100": [10, 505_000],
    }
    figures = storage_figures(flat)
    assert figures["bytes_per_turn"] == 6_000 and figures["checkpoints_per_turn"] == 1.0
    assert figures["bytes_per_turn_at_100"] == 5_050
    assert (figures["bytes_added_turn_20"], figures["bytes_added_turn_100"]) == (5_000, 5_000)
    assert all(probe.passed for probe in storage_verdicts(figures, []))
    # Keeping every checkpoint: each turn adds the whole conversation again.
    growing = {"10": [10, 60_000], "19": [19, 200_000], "20": [20, 220_000], "99": [99, 1_900_000]}
    growing["100"] = [100, 2_000_000]
    figures = storage_figures(growing)
    assert figures["bytes_per_turn_at_100"] == 20_000 <= BYTES_PER_TURN_AT_100_TARGET
    short, long = storage_verdicts(figures, [])
    assert short.passed and not long.passed and "not flat" in long.detail
    assert not any(
        probe.passed for probe in storage_verdicts(storage_figures(flat), ["turn 3: ThreadBusyError"])
    )


def test_the_long_conversation_snippet_is_python_for_the_tenants_thread() -> None:
    code = long_conversation_snippet("storage-thread", "alpha")
    compile(code, "<snippet>", "exec")
    assert "['alpha/storage-thread', 'storage-thread']" in code
    assert f"range(1, {LONG_CONVERSATION_TURNS} + 1)" in code


def test_report_figures_sum_harms_and_keep_storage_and_the_hostile_peak() -> None:
    probes = [
        Probe("hostile", "a", True, figures={"traces": 1.0, "max_rss_bytes": 300.0}),
        Probe("hostile", "b", True, figures={"suppressed": 1.0, "max_rss_bytes": 900.0}),
        Probe("api", "c", False, figures={"oversize_accepted": 1.0, "unauthenticated_reads": 2.0}),
        Probe("storage", "d", True, figures={"bytes_per_turn_at_100": 7_000.0, "bytes_added_turn_100": 5.0}),
    ]
    report = report_figures(probes)
    assert report["hostile_peak_rss_bytes"] == 900.0
    assert report["figures"]["traces"] == 1 and report["figures"]["suppressed"] == 1
    assert report["figures"]["oversize_accepted"] == 1 and report["figures"]["unauthenticated_reads"] == 2
    assert "max_rss_bytes" not in report["figures"]
    assert report["bytes_per_turn_at_100"] == 7_000.0 and report["bytes_per_turn"] is None
    assert report["bytes_per_turn_at_100_target"] == BYTES_PER_TURN_AT_100_TARGET
    assert report_figures([])["hostile_peak_rss_bytes"] is None


def _process(stdout: str = "", stderr: str = "", code: int | None = 2, rss: int = 0) -> ProcessResult:
    return ProcessResult(code, stdout, stderr, 1.0, code is None, rss)


def test_a_hostile_case_needs_its_one_line_error_and_its_good_files_indexed() -> None:
    ask = HostileCase("ask", ("ask", b"\xff"), frozenset({2}), one_line=True)
    assert hostile_verdict(ask, _process(stderr="error: question is not valid UTF-8 text\n")).passed
    noisy = hostile_verdict(ask, _process(stderr="Usage: rag ask\nerror: bad\n"))
    assert not noisy.passed and noisy.figures["multiline_errors"] == 1
    ingest = HostileCase("folder", ("ingest", "x", "--json"), frozenset({0, 1}), must_index=1)
    failed_alone = json.dumps({"indexed": 1, "failed": 2}, indent=2)
    verdict = hostile_verdict(ingest, _process(stdout=failed_alone, code=1, rss=5_000))
    assert verdict.passed and verdict.figures["max_rss_bytes"] == 5_000
    all_lost = hostile_verdict(ingest, _process(stdout=json.dumps({"indexed": 0, "failed": 3}), code=1))
    assert not all_lost.passed and all_lost.figures["lost"] == 1
    hung = hostile_verdict(ingest, _process(code=None))
    assert hung.figures["hangs"] == 1 and hung.figures["wrong_exit_codes"] == 0


def _summary(indexed: int, chunks: int) -> str:
    return json.dumps({"indexed": indexed, "skipped": 1 - indexed, "chunks": chunks})


def test_two_ingests_of_one_file_must_store_it_once() -> None:
    results = [_process(stdout=_summary(1, 9), code=0), _process(stdout="waiting\n" + _summary(0, 0), code=0)]
    vectors = {"status": "ok", "counts": {"chunks": 9, "strays": 0, "missing": 0}}
    assert ingest_race_verdict(results, (1, 9), vectors).passed
    both = [_process(stdout=_summary(1, 9), code=0), _process(stdout=_summary(1, 9), code=0)]
    doubled = ingest_race_verdict(both, (1, 18), {**vectors, "counts": {"chunks": 18}})
    assert not doubled.passed and doubled.figures["duplicated"] == 9
    crashed = [
        _process(stdout=_summary(1, 9), code=0),
        _process(stderr='Traceback (most recent call last):\n  File "x"\nIntegrityError: UNIQUE\n', code=1),
    ]
    verdict = ingest_race_verdict(crashed, (1, 9), vectors)
    assert not verdict.passed and verdict.figures["traces"] == 1 and verdict.figures["wrong_exit_codes"] == 1
    busy = [_process(stdout=_summary(1, 9), code=0), _process(stderr="error: ingest busy\n", code=1)]
    assert ingest_race_verdict(busy, (1, 9), vectors).passed  # the documented refusal, in one line
    strays = ingest_race_verdict(results, (1, 9), {**vectors, "counts": {"chunks": 9, "strays": 9}})
    assert not strays.passed and strays.figures["duplicated"] == 9


def test_parse_response_reads_length_and_chunked_bodies() -> None:
    head = b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 5\r\n\r\n"
    assert parse_response(head + b"hello") == (413, {"content-length": "5"}, b"hello", True)
    assert parse_response(head + b"he")[3] is False
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert parse_response(chunked)[2:] == (b"abcde", True)
    assert parse_response(b"HTTP/1.1 200")[0] is None


def test_disconnects_are_summed_over_routes_from_metrics_text() -> None:
    text = (
        f"# HELP {DISCONNECT_METRIC} ...\n"
        f'{DISCONNECT_METRIC}{{route="generate_stream"}} 1.0\n'
        f'{DISCONNECT_METRIC}{{route="generate"}} 2.0\n'
        "rag_client_disconnects_created 1.7e9\n"
    )
    assert disconnect_count(text) == 3.0
    assert disconnect_count("rag_answers_total 4.0\n") == 0.0


def test_multipart_carries_each_file_under_files() -> None:
    body, content_type = multipart({"a.md": b"# A"}, {"collection": "c"})
    boundary = content_type.split("boundary=")[1]
    assert body.startswith(f"--{boundary}\r\n".encode()) and body.endswith(f"--{boundary}--\r\n".encode())
    assert b'name="files"; filename="a.md"' in body and b"# A" in body and b'name="collection"' in body


def _http(status: int | None, text: str = "", error: str = "") -> HttpResult:
    return HttpResult(status, {}, text.encode(), 0.1, 0, error)


def test_http_verdicts_count_leaks_statuses_and_harms() -> None:
    assert http_verdict("p", _http(401), {401}).passed
    leak = http_verdict("p", _http(200, "Zorblatine is mined in the Vesk valley"), {200})
    assert not leak.passed and leak.figures["leaks"] == 1
    accepted = http_verdict("p", _http(422, "query too long"), {413}, harms={"oversize_accepted": True})
    assert accepted.figures["oversize_accepted"] == 1 and accepted.figures["wrong_statuses"] == 1
    hung = http_verdict("p", _http(None, error="timeout"), {200})
    assert hung.figures["hangs"] == 1 and hung.figures["wrong_statuses"] == 0


def test_a_body_over_its_cap_is_accepted_unless_refused_with_413_naming_the_setting() -> None:
    refused = _http(413, '{"message": "more than 1000000 bytes (RAG_API_MAX_JSON_BYTES)"}')
    assert cap_verdict("p", refused, 3_000_000, "RAG_API_MAX_JSON_BYTES").passed
    unnamed = cap_verdict("p", _http(413, "too large"), 3_000_000, "RAG_API_MAX_JSON_BYTES")
    assert not unnamed.passed and unnamed.figures["oversize_accepted"] == 0
    parsed = cap_verdict("p", _http(422, "padding: extra inputs"), 3_000_000, "RAG_API_MAX_JSON_BYTES")
    assert parsed.figures["oversize_accepted"] == 1
    busy = HttpResult(None, {}, b"", 60.0, 6_000_000, "timeout")  # took it all, still indexing it
    verdict = cap_verdict("p", busy, 6_000_000, "RAG_API_MAX_UPLOAD_BYTES")
    assert verdict.figures["oversize_accepted"] == 1 and verdict.figures["hangs"] == 0


def test_a_turn_left_mid_stream_must_be_stored_whole_or_not_at_all() -> None:
    stream = b"HTTP/1.1 200 OK\r\n\r\nevent: token\r\ndata: {}\r\n"
    follow_up = _http(200, "{}")
    rolled_back = [["human", "Is Jupiter big?"], ["ai", "Yes."]]
    verdict = disconnect_verdict(200, stream, rolled_back, follow_up, "Is Jupiter big?", "Red planet?")
    assert verdict.passed and "rolled back" in verdict.detail
    completed = [["human", "Red planet?"], ["ai", "Mars."], *rolled_back]
    assert disconnect_verdict(200, stream, completed, follow_up, "Is Jupiter big?", "Red planet?").passed
    half = [["human", "Red planet?"], *rolled_back]
    verdict = disconnect_verdict(200, stream, half, follow_up, "Is Jupiter big?", "Red planet?")
    assert not verdict.passed and verdict.figures["unanswered"] == 1
    stuck = disconnect_verdict(200, stream, [], _http(409, "thread busy"), "Is Jupiter big?", "Red planet?")
    assert not stuck.passed and stuck.figures["wrong_statuses"] == 1


@contextmanager
def _one_shot_server(read_body_first: bool) -> Iterator[int]:
    """A server for one request that answers 401 from the headers, or only after reading the whole body."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(
                next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))[15:]
            )
            while read_body_first and len(body) < length:
                body += connection.recv(65536)
            connection.sendall(
                b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno"
            )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        thread.join(10)
        listener.close()


@pytest.mark.parametrize("read_body_first", [False, True])
def test_the_client_tells_a_refusal_from_the_headers_from_one_after_the_body(read_body_first: bool) -> None:
    body = b"x" * 3_000_000
    with _one_shot_server(read_body_first) as port:
        result = http_request(port, "POST", "/", body=body, wait_before_body=1.0, timeout=20)
    assert result.status == 401 and result.body == b"no"
    assert result.sent == (len(body) if read_body_first else 0)


def test_an_unknown_chaos_suite_is_one_line_exit_2() -> None:
    result = CliRunner().invoke(benchmarks_app, ["chaos", "--suite", "telepathy"])
    assert result.exit_code == 2
    assert "unknown chaos suite(s) telepathy" in result.output and "api" in result.output


def test_the_api_probes_work_in_a_process_with_many_open_files() -> None:
    """select() refuses descriptors past 1023: the probes failed inside the full test suite's process."""
    import os
    import socket

    from benchmarks.chaos import http_client

    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    left, right = socket.socketpair()
    try:
        assert left.fileno() > 1023
        assert http_client._readable(left, 0.0) is False
        right.sendall(b"x")
        assert http_client._readable(left, 1.0) is True
    finally:
        left.close()
        right.close()
        for descriptor in held:
            os.close(descriptor)


# --- the bounds suite's verdicts ---------------------------------------------------------------------------


def test_a_wide_filter_passes_only_as_a_422_naming_the_bound_with_the_server_alive() -> None:
    refusal = _http(
        422, '{"message": "filter: at most 100 conditions (RAG_FILTER_MAX_CONDITIONS), got 1000"}'
    )
    assert filter_refusal_verdict("f", refusal, alive=True).passed
    unnamed = filter_refusal_verdict("f", _http(422, "filter: bad"), alive=True)
    assert not unnamed.passed and "does not name" in unnamed.detail
    accepted = filter_refusal_verdict("f", _http(200, '{"results": []}'), alive=True)
    assert not accepted.passed and accepted.figures["oversize_accepted"] == 1
    crashed = filter_refusal_verdict("f", _http(500, "Internal Server Error"), alive=False, traces_added=2)
    assert crashed.figures == {
        "leaks": 0.0,
        "traces": 2.0,
        "hangs": 0.0,
        "wrong_statuses": 1.0,
        "crashes": 1.0,
        "oversize_accepted": 0.0,
    }
    dead_after_refusal = filter_refusal_verdict("f", refusal, alive=False)
    assert not dead_after_refusal.passed and dead_after_refusal.figures["crashes"] == 1


def test_the_hostile_filters_fit_the_json_cap_and_the_deep_one_has_narrow_lists() -> None:
    filters = hostile_filters()
    assert len(filters) == len(WIDE_FILTER_MEMBERS) + 1
    for members in WIDE_FILTER_MEMBERS:
        assert len(wide_or(members)["$or"]) == members
    batch = {"requests": [{"query": "Which planet is the largest?", "filters": wide_or(100_000)}]}
    assert len(compact_json(batch)) < JSON_CAP_BYTES

    def leaves_and_widest(node: dict) -> tuple[int, int]:
        ((key, value),) = node.items()
        if not key.startswith("$"):
            return 1, 0
        counted = [leaves_and_widest(child) for child in value]
        return sum(c for c, _ in counted), max([len(value), *(w for _, w in counted)])

    assert leaves_and_widest(deep_filter(6, 4)) == (4096, 4)


def test_a_batch_is_judged_by_its_one_item() -> None:
    body = {"results": [{"index": 0, "ok": False, "status": 422, "message": "at most 100 conditions"}]}
    item = batch_item(_http(200, json.dumps(body)))
    assert item.status == 422 and "100 conditions" in item.text
    answered = batch_item(_http(200, json.dumps({"results": [{"index": 0, "ok": True, "answer": "x"}]})))
    assert answered.status == 200
    whole = _http(422, "requests: too many")
    assert batch_item(whole) is whole


def test_the_cli_must_refuse_a_wide_filter_in_one_line_naming_the_bound() -> None:
    def run(code: int | None, err: str, hung: bool = False) -> ProcessResult:
        return ProcessResult(code, "", err, 1.0, hung)

    assert cli_refusal_verdict(
        "c", run(2, "error: filter: at most 100 conditions (RAG_FILTER_MAX_CONDITIONS)\n")
    ).passed
    accepted = cli_refusal_verdict("c", run(0, "no results\n"))
    assert not accepted.passed and accepted.figures["wrong_exit_codes"] == 1
    traced = cli_refusal_verdict("c", run(1, "Traceback (most recent call last):\n  ...\nRecursionError\n"))
    assert traced.figures["traces"] == 1 and traced.figures["multiline_errors"] == 1
    assert not cli_refusal_verdict("c", run(2, "error: bad filter\n")).passed
    crashed = cli_refusal_verdict("c", run(-11, ""))
    assert not crashed.passed and crashed.figures["crashes"] == 1 and "signal 11" in crashed.detail


def test_metadata_verdicts_want_a_refusal_or_the_extra_fields_left_out() -> None:
    assert stored_keys_verdict(
        _http(422, "metadata: at most 64 keys"), False, alive=True, traces_added=0
    ).passed
    stored = stored_keys_verdict(_http(200, '{"chunks": 1}'), True, alive=True, traces_added=0)
    assert not stored.passed and stored.figures["oversize_accepted"] == 1
    good = _http(200, '{"indexed": 1, "warnings": ["wide-record.jsonl: 11936 fields left out"]}')
    assert wide_record_verdict(good, 64, alive=True, traces_added=0).passed
    silent = wide_record_verdict(_http(200, '{"indexed": 1}'), 64, alive=True, traces_added=0)
    assert not silent.passed and "does not say" in silent.detail
    kept_all = wide_record_verdict(good, RECORD_FIELDS + 2, alive=True, traces_added=0)
    assert kept_all.figures["oversize_accepted"] == 1
    assert not wide_record_verdict(good, None, alive=True, traces_added=0).passed


def test_after_a_restart_both_tenants_must_search_and_bravos_record_be_found() -> None:
    found = _http(200, json.dumps({"results": [{"content": f"The {RECORD_CANARY} record"}]}))
    alpha = _http(200, json.dumps({"results": [{"content": "Jupiter is the largest planet"}]}))
    uploaded = _http(200, '{"indexed": 1}')
    assert restart_verdict(found, alpha, uploaded, started=True).passed
    lost = restart_verdict(_http(200, '{"results": []}'), alpha, uploaded, started=True)
    assert not lost.passed and lost.figures["lost"] == 1
    broken = restart_verdict(found, _http(503, "StoreUnavailableError"), uploaded, started=True)
    assert not broken.passed and broken.figures["wrong_statuses"] == 1
    down = _http(None, "exited with 1", error="server did not start")
    assert restart_verdict(down, down, down, started=False).figures["crashes"] == 1


def test_a_lower_500_passes_only_as_a_4xx_without_a_logged_trace() -> None:
    client_errors = range(400, 500)
    assert exchange_verdict("bounds", "x", _http(422, "id: too large"), client_errors).passed
    assert not exchange_verdict("bounds", "x", _http(500, "Internal Server Error"), client_errors).passed
    logged = exchange_verdict("bounds", "x", _http(404, "nothing"), client_errors, traces_added=1)
    assert not logged.passed and logged.figures["traces"] == 1


# --- the sharing suite's verdicts --------------------------------------------------------------------------


def _upload_answer(chunks: int, seconds: float, extra: str = "") -> HttpResult:
    return HttpResult(200, {}, f'{{"indexed": 1, "chunks": {chunks}{extra}}}'.encode(), seconds, 0)


def test_a_copy_indexed_much_faster_than_fresh_text_is_a_side_channel() -> None:
    original = _upload_answer(800, 40.0)
    fair = side_channel_verdict(original, _upload_answer(800, 38.0), _upload_answer(800, 40.0))
    assert fair.passed and fair.figures["side_channel_ratio"] == pytest.approx(40 / 38, abs=0.01)
    leak = side_channel_verdict(original, _upload_answer(800, 2.0), _upload_answer(800, 40.0))
    assert not leak.passed and leak.figures["leaks"] == 1
    assert leak.figures["copy_chunks_per_s"] == 400.0 and leak.figures["fresh_chunks_per_s"] == 20.0
    failed = side_channel_verdict(original, _http(500, "boom"), _upload_answer(800, 40.0))
    assert not failed.passed and "bravo's copy: status 500" in failed.detail


def test_generated_documents_are_deterministic_and_share_no_paragraph() -> None:
    first, again, other = generated_document(1, 20), generated_document(1, 20), generated_document(2, 20)
    assert first == again and first != other
    paragraphs = first.decode().split("\n\n")
    assert len(paragraphs) == 21 and not set(paragraphs[1:]) & set(other.decode().split("\n\n"))


def test_metric_sums_match_labels_and_not_longer_names() -> None:
    text = (
        'rag_requests_total{method="GET",route="/x",status="200"} 3.0\n'
        'rag_requests_total{method="POST",route="/y",status="500"} 1.0\n'
        'rag_requests_created{method="GET"} 1.7e9\n'
        'rag_answers_total{outcome="failure"} 2.0\n'
        'rag_answers_total{outcome="success"} 5.0\n'
    )
    assert metric_sum(text, "rag_requests_total") == 4.0
    assert metric_sum(text, "rag_requests_total", status="500") == 1.0
    assert metric_sum(text, "rag_answers_total", outcome="failure") == 2.0
    assert metric_sum(text, "rag_missing_total") == 0.0


def test_every_answered_request_must_be_counted_once() -> None:
    before = 'rag_requests_total{status="200"} 3.0\n'
    after = before + 'rag_requests_total{status="500"} 1.0\nrag_requests_total{status="404"} 1.0\n'
    sent = [_http(500, "Internal Server Error"), _http(404, "nothing")]
    assert counted_requests_verdict("m", before, after, sent).passed
    missed = counted_requests_verdict("m", before, 'rag_requests_total{status="200"} 4.0\n', sent)
    assert not missed.passed and missed.figures["miscounted"] == 1


def test_an_invalid_batch_item_must_not_count_as_a_failed_answer() -> None:
    batch = _http(
        200, json.dumps({"results": [{"index": 0, "ok": True}, {"index": 1, "ok": False, "status": 422}]})
    )
    before = 'rag_answers_total{outcome="failure"} 1.0\n'
    assert batch_failures_verdict(before, before, batch, invalid_index=1).passed
    counted = batch_failures_verdict(
        before, 'rag_answers_total{outcome="failure"} 2.0\n', batch, invalid_index=1
    )
    assert not counted.passed and counted.figures["miscounted"] == 1
    valid_failed = _http(200, json.dumps({"results": [{"index": 0, "ok": False}, {"index": 1, "ok": False}]}))
    assert batch_failures_verdict(
        before, 'rag_answers_total{outcome="failure"} 2.0\n', valid_failed, 1
    ).passed


def test_concurrent_uploads_must_report_their_own_bytes_and_leave_the_last_indexed() -> None:
    sent = [version_document(index) for index in range(3)]
    assert len({sha256_hex(data) for data in sent}) == 3

    def answer(index: int, reported: bytes) -> HttpResult:
        return _http(200, json.dumps({"indexed": 1, "files": [{"sha256": sha256_hex(reported)}]}))

    honest = [(answer(index, data), float(index)) for index, data in enumerate(sent)]
    assert concurrent_uploads_verdict(sent, honest, {2}).passed
    stale = concurrent_uploads_verdict(sent, honest, {0})
    assert not stale.passed and stale.figures["mixed"] == 1
    two_versions = concurrent_uploads_verdict(sent, honest, {1, 2})
    assert not two_versions.passed
    swapped = [(answer(index, sent[(index + 1) % 3]), float(index)) for index in range(3)]
    mixed = concurrent_uploads_verdict(sent, swapped, {2})
    assert not mixed.passed and mixed.figures["mixed"] == 3
    busy = [*honest[:2], (_http(429, "busy"), 9.0)]
    assert concurrent_uploads_verdict(sent, busy, {1}).passed
    tie = [(answer(0, sent[0]), 5.0), (answer(1, sent[1]), 5.2), (answer(2, sent[2]), 1.0)]
    assert concurrent_uploads_verdict(sent, tie, {0}).passed


def test_health_without_a_key_is_up_or_down_only() -> None:
    assert keyless_health_verdict(_http(200, '{"status": "ok"}')).passed
    counts = keyless_health_verdict(
        _http(200, '{"status": "ok", "checks": {"catalog": {"detail": {"chunks": 9}}}}')
    )
    assert not counts.passed and counts.figures["leaks"] == 1
    called = keyless_health_verdict(_http(200, '{"status": "ok", "checks": {"model": {"probed": true}}}'))
    assert not called.passed and called.figures["unauthenticated_reads"] == 1
    assert not keyless_health_verdict(_http(401, '{"status": "unauthorized"}')).passed


def test_health_with_a_key_shows_only_that_tenants_chunks() -> None:
    own = _http(200, '{"status": "ok", "checks": {"catalog": {"status": "ok", "detail": {"chunks": 3}}}}')
    assert tenant_health_verdict(own, 3, 10).passed
    total = tenant_health_verdict(_http(200, '{"checks": {"catalog": {"detail": {"chunks": 10}}}}'), 3, 10)
    assert not total.passed and total.figures["leaks"] == 1
    rows = tenant_health_verdict(
        _http(200, '{"catalog": {"chunks": 3}, "keyword_index": {"rows": 10}}'), 3, 10
    )
    assert not rows.passed
    assert not tenant_health_verdict(_http(200, '{"status": "ok"}'), 3, 10).passed


def test_an_answer_showing_the_data_folder_leaks_a_server_path(tmp_path: Path) -> None:
    paths = server_paths(tmp_path / "rag")
    upload_dir = f"{tmp_path}/rag/uploads/alpha/default/a.md"
    assert path_leak_verdict("l", _http(200, '{"source": "a.md"}'), paths, {200}).passed
    shown = path_leak_verdict("l", _http(200, json.dumps({"source": upload_dir})), paths, {200})
    assert not shown.passed and shown.figures["leaks"] == 1
    escaped = json.dumps({"source": upload_dir}).replace("/", "\\/")
    assert not path_leak_verdict("l", _http(200, escaped), paths, {200}).passed


def test_the_model_server_must_refuse_a_call_without_a_key() -> None:
    assert model_server_verdict(_http(401, '{"error": "Invalid API Key"}'), 4321, "its log line").passed
    answered = model_server_verdict(_http(200, '{"choices": []}'), 4321, "its log line")
    assert not answered.passed and answered.figures["unauthenticated_reads"] == 1
    assert not_applicable("sharing", "m", "no port").figures == {"not_applicable": 1.0}


def test_the_listening_ports_of_a_process_group_are_read_from_proc() -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc on this system")
    import os

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port in listening_ports(os.getpgid(0))


def test_the_new_suites_are_registered() -> None:
    assert {"bounds", "sharing"} <= set(SUITES)


# --- the seeds suite ----------------------------------------------------------------------------------------


def test_the_seeds_suite_is_registered_and_sets_up_its_own_data() -> None:
    assert "seeds" in SUITES and "seeds" in OWN_DATA_SUITES


def test_a_seeds_exchange_fails_on_another_tenants_memory_words_in_any_event() -> None:
    clean = 'data: {"type": "token", "content": "I do not know."}\r\n\r\ndata: [DONE]\r\n\r\n'
    assert seeds_verdict("q", _http(200, clean), {200}, canaries=("Ostrevane",)).passed
    stream = clean.replace("I do not know.", "The code of the ostrevane archive")
    leak = seeds_verdict("q", _http(200, stream), {200}, canaries=("Ostrevane",))
    assert not leak.passed and leak.figures["leaks"] == 1 and "Ostrevane" in leak.detail
    tampered = seeds_verdict("d", _http(200, '{"deleted": 1}'), {200}, harms={"leaks": True})
    assert not tampered.passed and tampered.figures["leaks"] == 1
    wrong = seeds_verdict("g", _http(200, "{}"), {404})
    assert not wrong.passed and wrong.figures["wrong_statuses"] == 1


def test_a_bad_body_passes_only_as_a_422_naming_its_field() -> None:
    named = (
        '{"error": "ValidationError", "message": "top_k: Input should be a valid integer", "field": "top_k"}'
    )
    assert validation_verdict("v", _http(422, named), "top_k").passed
    other = validation_verdict("v", _http(422, named), "query")
    assert not other.passed and "names 'top_k'" in other.detail
    in_message = '{"error": "ValidationError", "message": "requests: give at least one question"}'
    assert validation_verdict("v", _http(422, in_message), "requests").passed
    assert validation_verdict("v", _http(422, '{"message": "JSON decode error"}'), None).passed
    crashed = validation_verdict("v", _http(500, '{"error": "InternalError"}'), "query")
    assert not crashed.passed and crashed.figures["crashes"] == 1 and crashed.figures["wrong_statuses"] == 1


def test_keyless_calls_pass_only_as_401_and_an_answer_is_an_unauthenticated_read() -> None:
    assert auth_verdict("a", _http(401, '{"error": "Unauthorized"}')).passed
    served = auth_verdict("a", _http(200, '{"memories": []}'))
    assert not served.passed and served.figures["unauthenticated_reads"] == 1
    refused_late = auth_verdict("a", _http(422, "{}"))
    assert not refused_late.passed and refused_late.figures["unauthenticated_reads"] == 0


def test_an_oversized_seed_body_must_be_refused_413_naming_the_cap_and_nothing_stored() -> None:
    named = _http(413, '{"message": "more than 1000000 bytes (RAG_API_MAX_JSON_BYTES)"}')
    assert cap_refusal_verdict("c", named, 3_000_000).passed
    assert not cap_refusal_verdict("c", _http(413, "too large"), 3_000_000).passed
    read = cap_refusal_verdict("c", _http(422, "padding: extra inputs"), 3_000_000)
    assert not read.passed and read.figures["oversize_accepted"] == 1
    listing = _http(200, '{"memories": []}')
    assert nothing_stored_verdict("n", [], listing).passed
    stored = nothing_stored_verdict("n", [["human", "Capwhistlevorn?"]], listing)
    assert not stored.passed and stored.figures["oversize_accepted"] == 1
    kept = nothing_stored_verdict("n", [], _http(200, '{"memories": [{"content": "capwhistlevorn cc"}]}'))
    assert not kept.passed
    assert not nothing_stored_verdict("n", [], _http(None, error="timeout")).passed


def test_bravos_memories_are_intact_only_when_every_one_is_unchanged() -> None:
    listing = _http(
        200,
        json.dumps(
            {
                "memories": [
                    {"id": "bbbbbbbbbbbbbbbb", "conversation_id": "n", "content": "two"},
                    {"id": "aaaaaaaaaaaaaaaa", "conversation_id": "", "content": "one"},
                ]
            }
        ),
    )
    before = memory_snapshot(listing)
    assert before == [("aaaaaaaaaaaaaaaa", "", "one"), ("bbbbbbbbbbbbbbbb", "n", "two")]
    assert intact_verdict(before, list(before)).passed
    lost = intact_verdict(before, before[:1])
    assert not lost.passed and lost.figures["leaks"] == 1
    changed = intact_verdict(before, [before[0], ("bbbbbbbbbbbbbbbb", "n", "Alpha was here.")])
    assert not changed.passed
    assert not intact_verdict([], []).passed  # nothing planted proves nothing


def test_a_delete_by_another_tenants_ids_must_delete_nothing() -> None:
    assert foreign_delete_verdict("d", _http(200, '{"deleted": 0}'), ("Ostrevane",)).passed
    deleted = foreign_delete_verdict("d", _http(200, '{"deleted": 2}'), ("Ostrevane",))
    assert not deleted.passed and deleted.figures["leaks"] == 1
    assert not foreign_delete_verdict("d", _http(200, '{"ok": true}'), ("Ostrevane",)).passed


def test_a_control_passes_only_when_the_owner_finds_every_word_it_looks_for() -> None:
    answer = '{"answer": "The code is KV-4417 [1].", "sources": [{"content": "courier Mirelthorn"}]}'
    assert control_verdict("c", _http(200, answer), ("KV-4417", "Mirelthorn")).passed
    half = control_verdict("c", _http(200, '{"answer": "KV-4417"}'), ("KV-4417", "Mirelthorn"))
    assert not half.passed and "Mirelthorn" in half.detail
    assert not control_verdict("c", _http(503, "KV-4417 Mirelthorn"), ("KV-4417", "Mirelthorn")).passed


def test_a_seed_stream_left_mid_answer_needs_a_healthy_server_and_consistent_turns() -> None:

    stream = b'HTTP/1.1 200 OK\r\n\r\ndata: {"type": "token", "content": "Mars"}\r\n\r\n'
    follow_up = _http(200, "{}")
    rolled_back = [["human", "Is Jupiter big?"], ["ai", "Yes."]]

    def verdict(messages: list[list[str]], route: str = QUERY_STREAM, **options: object) -> Probe:
        return left_stream_verdict(
            route,
            200,
            options.pop("data", stream),  # type: ignore[arg-type]
            messages,
            options.pop("follow_up", follow_up),  # type: ignore[arg-type]
            "Is Jupiter big?",
            "Red planet?",
            healthy=bool(options.pop("healthy", True)),
        )

    assert verdict(rolled_back).passed and "rolled back" in verdict(rolled_back).detail
    assert verdict([["human", "Red planet?"], ["ai", "Mars."], *rolled_back]).passed
    half = verdict([["human", "Red planet?"], *rolled_back])
    assert not half.passed and half.figures["unanswered"] == 1
    sick = verdict(rolled_back, healthy=False)
    assert not sick.passed and sick.figures["crashes"] == 1
    assert not verdict(rolled_back, route=GENERATE_STREAM).passed  # a /generate/stream piece is a "chunk"
    chunk = stream.replace(b'"token"', b'"chunk"')
    assert verdict(rolled_back, route=GENERATE_STREAM, data=chunk).passed
    lost = verdict([], follow_up=_http(200, "{}"))
    assert not lost.passed and lost.figures["lost"] == 1
    twice = verdict([*rolled_back, *rolled_back])
    assert not twice.passed and twice.figures["duplicated"] == 1


def test_every_keyed_seed_and_memory_route_is_attacked_and_every_bad_body_names_a_field() -> None:

    routes = keyed_routes("0123456789abcdef")
    paths = {path.split("?")[0] for _method, path, _body in routes}
    assert set(SEED_ROUTES) <= paths
    assert {MEMORIES, f"{MEMORIES}/search", f"{MEMORIES}/0123456789abcdef"} <= paths
    assert {"GET", "POST", "DELETE"} <= {method for method, _path, _body in routes}
    cases = bad_bodies()
    assert set(SEED_ROUTES) | {MEMORIES} <= {path for _what, path, _body, _field in cases}
    for _what, _path, body, field in cases:
        if field is not None:
            assert json.loads(body) is not None  # a well-formed body: the field decides the refusal


def test_a_log_with_a_stack_trace_fails_and_names_its_error() -> None:
    assert log_verdict("INFO started\nINFO 200 /query\n").passed
    log = "INFO x\nTraceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'id'\n"
    failed = log_verdict(log)
    assert not failed.passed and failed.figures["traces"] == 1 and "KeyError" in failed.detail


def test_the_answer_excerpt_reads_a_body_a_batch_item_and_a_streams_last_answer() -> None:
    assert answer_excerpt(_http(200, '{"answer": "Jupiter is the largest [1].", "sources": []}')) == (
        "answered 'Jupiter is the largest [1].'"
    )
    batch = '{"results": [{"index": 0, "answer": "I could not find it."}]}'
    assert answer_excerpt(_http(200, batch)) == "answered 'I could not find it.'"
    stream = (
        'data: {"type": "chunk", "content": "Ma"}\r\n\r\ndata: {"type": "done", "answer": "Mars \\"red\\""}'
    )
    assert answer_excerpt(_http(200, stream)) == """answered 'Mars "red"'"""
    assert answer_excerpt(_http(401, '{"error": "Unauthorized"}')) == ""


# --- fairness -----------------------------------------------------------------------------------------------


def fairness_report(ratio: float, *, alpha_all: bool = True) -> dict[str, Any]:
    return {
        "results": [
            {
                "configuration": "two_model_places",
                "ratio_p50": ratio,
                "bravo_all_answered": True,
                "alpha_all_answered": alpha_all,
                "alpha_answered": 10 if alpha_all else 9,
                "alpha_asked": 10,
            }
        ]
    }


def test_fairness_passes_within_the_target_and_fails_past_it() -> None:
    from benchmarks.chaos.fairness import FAIRNESS_TARGET_RATIO, fairness_verdict

    assert fairness_verdict(fairness_report(FAIRNESS_TARGET_RATIO), "").passed
    starved = fairness_verdict(fairness_report(FAIRNESS_TARGET_RATIO + 0.01), "")
    assert not starved.passed and starved.figures["starved"] == 1.0 and "1.51" in starved.detail
    assert not fairness_verdict(fairness_report(1.0, alpha_all=False), "").passed


def test_fairness_without_a_report_fails_naming_the_output() -> None:
    from benchmarks.chaos.fairness import fairness_verdict

    verdict = fairness_verdict(None, "No module named benchmarks.fairness")
    assert not verdict.passed and "benchmarks.fairness" in verdict.detail
