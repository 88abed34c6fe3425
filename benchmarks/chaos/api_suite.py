"""`python -m benchmarks chaos --suite api`: the REST API attacked over real sockets, as a hostile client
would: keys, body caps, tenants and disconnects through the real server (benchmarks/chaos/api_server.py),
then the server's log must hold no stack trace."""

from __future__ import annotations

from pathlib import Path

from benchmarks.chaos.api_disconnect import disconnect_probes
from benchmarks.chaos.api_probes import auth_probes, body_cap_probes, tenant_probes
from benchmarks.chaos.api_server import api_server
from benchmarks.chaos.corpora import BRAVO, BRAVO_DOCS, write_files
from benchmarks.chaos.probe import Probe
from benchmarks.chaos.runner import TRACEBACK, ChaosRunner


def api_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """Keys, body caps, tenants and disconnects through the real server; then its log holds no stack trace."""
    folder = write_files(runner.work_dir / "corpus" / BRAVO, BRAVO_DOCS)
    runner.ingest(data_dir, folder, BRAVO, "bravo's documents")
    with api_server(runner, data_dir) as server:
        auth_probes(runner, server)
        body_cap_probes(runner, server)
        tenant_probes(runner, server, data_dir)
        disconnect_probes(runner, server, data_dir)
    log = server.log_text()
    traces = log.count(TRACEBACK)
    runner.record(
        Probe(
            "api",
            "server log holds no stack trace",
            traces == 0,
            f"{traces} stack traces, the first ending {first_trace_error(log)!r}" if traces else "",
            {"traces": float(traces)},
        )
    )


def first_trace_error(log: str) -> str:
    """The exception line ending the first stack trace of a log (the report outlives the log's folder)."""
    lines = log[log.find(TRACEBACK) :].splitlines()[1:]
    for line in lines:
        if line and not line.startswith(" "):
            return line[:200]
    return ""
