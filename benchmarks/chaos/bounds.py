"""`python -m benchmarks chaos --suite bounds`: inputs too big for the engine's bounds, sent as an attacker
would, through the real server (benchmarks/chaos/api_server.py) and the real CLI.

- Wide filters: an `$or` of 1,000 / 10,000 / 100,000 conditions and a deep and wide `$and` / `$or` tree,
  through /api/v1/search, /api/v1/rag/generate, a batch item and `rag search --filter`: each refused with 422
  (the CLI: an exit code other than 0, one line, no stack trace) naming the bound, and the server alive
  afterwards (GET /health 200).
- Metadata keys: raw text with 10,000 metadata keys is refused (422) and nothing of it stored; a .jsonl record
  with 12,000 fields is indexed without the fields over the bound, and its answer says so; after a restart of
  the server over the same data, that record is still found and both tenants can search and ingest.
- The lower 500s: a 23-digit memory id, an integer over 64 bits in `conversation_metadata`, an upload whose
  file name is longer than a file system allows: each a 4xx, never a 500, and no stack trace in the server's
  log."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.chaos.api_server import API_KEYS, DOCUMENTS, GENERATE, KEY_HEADER, ApiServer, api_server
from benchmarks.chaos.bounds_verdicts import (
    AFTER_RESTART_CANARY,
    ARGUMENT_MAX_BYTES,
    BATCH,
    HUGE_INTEGER,
    LONG_FILE_NAME_CHARS,
    LONG_MEMORY_ID,
    MEMORIES,
    RECORD_CANARY,
    SEARCH,
    SUITE,
    TEXT,
    TEXT_CANARY,
    batch_item,
    cli_refusal_verdict,
    compact_json,
    exchange_verdict,
    filter_refusal_verdict,
    hits_with,
    hostile_filters,
    not_applicable,
    record_with_fields,
    restart_verdict,
    stored_keys_verdict,
    text_with_keys,
    wide_record_verdict,
)
from benchmarks.chaos.corpora import ALPHA, ALPHA_DOCS, BRAVO, BRAVO_DOCS, write_files
from benchmarks.chaos.http_client import HttpResult, http_request, multipart
from benchmarks.chaos.limits import API_TURN_TIMEOUT_S, JSON_CAP_BYTES, REFUSAL_TIMEOUT_S
from benchmarks.chaos.runner import TRACEBACK, ChaosRunner

# --- the suite ----------------------------------------------------------------------------------------------


@dataclass
class LiveServer:
    """The suite's server, started again when an attack killed it, so each later probe measures its own
    attack rather than the earlier crash (the crash itself is that probe's verdict)."""

    runner: ChaosRunner
    data_dir: Path
    stack: ExitStack = field(default_factory=ExitStack)
    current: ApiServer | None = None
    restarts: int = 0

    def server(self) -> ApiServer:
        """The running server: the current one while it answers, else a fresh one over the same data."""
        if self.current is not None and alive(self.current):
            return self.current
        self.restarts += self.current is not None
        self.stack.close()
        self.stack = ExitStack()
        self.current = self.stack.enter_context(api_server(self.runner, self.data_dir))
        return self.current

    def close(self) -> None:
        """Stop the server (its log stays)."""
        self.stack.close()


def alive(server: ApiServer) -> bool:
    """Whether the server still runs and answers GET /health with 200."""
    return (
        server.process.poll() is None
        and http_request(server.port, "GET", "/health", timeout=10).status == 200
    )


def logged_traces(server: ApiServer) -> int:
    """Stack traces in the server's log so far (the log is appended to across restarts)."""
    return server.log_text().count(TRACEBACK)


def post_json(server: ApiServer, path: str, tenant: str, body: bytes, timeout: float) -> HttpResult:
    """POST a JSON body as given (compact) with `tenant`'s key."""
    return server.request(
        "POST", path, tenant=tenant, headers={"Content-Type": "application/json"}, body=body, timeout=timeout
    )


def upload(
    server: ApiServer, tenant: str, files: dict[str, bytes], timeout: float = API_TURN_TIMEOUT_S
) -> HttpResult:
    """POST files to /api/v1/documents with `tenant`'s key."""
    body, content_type = multipart(files)
    return http_request(
        server.port,
        "POST",
        DOCUMENTS,
        headers={KEY_HEADER: API_KEYS[tenant], "Content-Type": content_type},
        body=body,
        timeout=timeout,
    )


def search(server: ApiServer, tenant: str, query: str, mode: str = "bm25") -> HttpResult:
    """POST /api/v1/search as `tenant`."""
    return server.request(
        "POST",
        SEARCH,
        tenant=tenant,
        payload={"query": query, "mode": mode, "top_k": 5},
        timeout=REFUSAL_TIMEOUT_S,
    )


def filter_probes(runner: ChaosRunner, live: LiveServer, data_dir: Path) -> None:
    """Each filter over the bound through search, generate, a batch item and `rag search --filter`."""
    for label, value in hostile_filters().items():
        routes = {
            SEARCH: {"query": "Jupiter", "filters": value},
            GENERATE: {"query": "Which planet is the largest?", "filters": value},
            BATCH: {"requests": [{"query": "Which planet is the largest?", "filters": value}]},
        }
        for path, payload in routes.items():
            server = live.server()
            before = logged_traces(server)
            body = compact_json(payload)
            if len(body) >= JSON_CAP_BYTES:
                raise RuntimeError(f"chaos set-up: the {label} body is over the server's JSON cap")
            result = post_json(server, path, ALPHA, body, REFUSAL_TIMEOUT_S)
            judged = batch_item(result) if path == BATCH else result
            where = "a batch item" if path == BATCH else path
            runner.record(
                filter_refusal_verdict(
                    f"{label} via {where}",
                    judged,
                    alive=alive(server),
                    traces_added=logged_traces(server) - before,
                )
            )
        argument = json.dumps(value, separators=(",", ":"))
        name = f"{label} via rag search --filter"
        if len(argument.encode()) >= ARGUMENT_MAX_BYTES:
            runner.record(
                not_applicable(
                    SUITE,
                    name,
                    f"the filter is {len(argument):,} bytes, over one argument's {ARGUMENT_MAX_BYTES:,}",
                )
            )
            continue
        runner.record(
            cli_refusal_verdict(
                name, runner.rag(data_dir, "search", "Jupiter", "--tenant", ALPHA, "--filter", argument)
            )
        )


def metadata_probes(runner: ChaosRunner, live: LiveServer) -> None:
    """Raw text with too many metadata keys (refused, nothing stored); a .jsonl record with too many fields
    for bravo (indexed without the extra ones)."""
    server = live.server()
    before = logged_traces(server)
    result = post_json(server, TEXT, ALPHA, compact_json(text_with_keys()), API_TURN_TIMEOUT_S)
    stored = bool(hits_with(search(server, ALPHA, TEXT_CANARY), TEXT_CANARY))
    runner.record(
        stored_keys_verdict(result, stored, alive=alive(server), traces_added=logged_traces(server) - before)
    )

    server = live.server()
    before = logged_traces(server)
    result = upload(server, BRAVO, {"wide-record.jsonl": record_with_fields()})
    hits = hits_with(search(server, BRAVO, RECORD_CANARY), RECORD_CANARY)
    hit_keys = len(hits[0].get("metadata") or {}) if hits else None
    runner.record(
        wide_record_verdict(
            result, hit_keys, alive=alive(server), traces_added=logged_traces(server) - before
        )
    )


def lower_500_probes(runner: ChaosRunner, live: LiveServer) -> None:
    """Inputs that overflowed into 500s: each must be a 4xx with no stack trace logged."""
    client_errors = range(400, 500)
    attacks: Sequence[tuple[str, Callable[[ApiServer], HttpResult]]] = (
        (
            f"delete memory id of {len(LONG_MEMORY_ID)} digits",
            lambda server: server.request("DELETE", f"{MEMORIES}?id={LONG_MEMORY_ID}", tenant=ALPHA),
        ),
        (
            "conversation_metadata holding 2**64+1",
            lambda server: server.request(
                "POST",
                GENERATE,
                tenant=ALPHA,
                payload={
                    "query": "Which planet is red?",
                    "conversation_metadata": {"character_id": HUGE_INTEGER},
                },
                timeout=API_TURN_TIMEOUT_S,
            ),
        ),
        (
            f"upload named with {LONG_FILE_NAME_CHARS} characters",
            lambda server: upload(
                server, ALPHA, {"n" * (LONG_FILE_NAME_CHARS - 3) + ".md": b"# Long\n\nA long name.\n"}
            ),
        ),
    )
    for name, attack in attacks:
        server = live.server()
        before = logged_traces(server)
        result = attack(server)
        runner.record(
            exchange_verdict(
                SUITE,
                f"{name}: a 4xx, never a 500",
                result,
                client_errors,
                alive=alive(server),
                traces_added=logged_traces(server) - before,
            )
        )


def restart_probe(runner: ChaosRunner, data_dir: Path) -> None:
    """Stop the server, start it again over the same data: bravo's record must still be found, and both
    tenants search and ingest."""
    try:
        with api_server(runner, data_dir) as server:
            bravo_search = search(server, BRAVO, RECORD_CANARY)
            alpha_search = search(server, ALPHA, "Jupiter planet")
            body = f"# After\n\nThe {AFTER_RESTART_CANARY} note was added after the restart.\n".encode()
            alpha_upload = upload(server, ALPHA, {"after-restart.md": body})
    except RuntimeError as error:
        missing = HttpResult(None, {}, str(error)[:300].encode(), 0.0, 0, "server did not start")
        runner.record(restart_verdict(missing, missing, missing, started=False))
        return
    runner.record(restart_verdict(bravo_search, alpha_search, alpha_upload, started=True))


def bounds_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """Wide filters and the lower 500s through the real server and CLI; then, over data of their own, too many
    metadata keys and a restart over that data."""
    folder = write_files(runner.work_dir / "corpus" / BRAVO, BRAVO_DOCS)
    runner.ingest(data_dir, folder, BRAVO, "bravo's documents")
    live = LiveServer(runner, data_dir)
    try:
        filter_probes(runner, live, data_dir)
        lower_500_probes(runner, live)
    finally:
        live.close()
    # The filters may have damaged the store: the metadata probes and the restart get data of their own.
    own = fresh_data(runner, "bounds-metadata")
    live = LiveServer(runner, own)
    try:
        metadata_probes(runner, live)
    finally:
        live.close()
    restart_probe(runner, own)


def fresh_data(runner: ChaosRunner, name: str) -> Path:
    """A data folder of its own under the run's folder, with alpha's and bravo's documents indexed."""
    root = runner.work_dir / name
    data_dir = root / "rag"
    for tenant, documents in ((ALPHA, ALPHA_DOCS), (BRAVO, BRAVO_DOCS)):
        runner.ingest(
            data_dir, write_files(root / "corpus" / tenant, documents), tenant, f"{tenant}'s documents"
        )
    return data_dir
