"""Every `rag` command that reads the store goes through `rag search`'s input and store checks,
and two ingests of one file at once index it exactly once.

Before: `rag ask` with an invalid UTF-8 question died in the tokenizer with a stack trace (exit 1); `rag ask`
on a damaged catalog printed "I cannot answer" and exited 0 (with the semantic cache's stack trace when the
header was damaged); `rag ingest` of unchanged files on a catalog with damaged chunk pages said "skipped" and
exited 0; a second `rag ingest` of a file being ingested crashed on the catalog's unique source.

The damaged-catalog and invalid-input cases run the installed command in a child process (what a user sees,
logging included); they fail before any model loads, so each takes a couple of seconds. The cases that need
indexed chunks run in process over the fake embeddings.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.settings import Settings, load_settings
from core.types import Chunk
from nodes.resources import Resources, use_resources
from persistence.catalog import Catalog, CatalogDamagedError
from persistence.errors import StoreUnavailableError
from retrieval import ingest_lock as ingest_lock_module
from retrieval.ingest import ingest_paths
from retrieval.ingest_lock import IngestBusyError, ingest_lock
from retrieval.knowledge_base import KnowledgeBase
from service.cli import app
from service.cli.common import store_errors_reported_here
from tests.conftest import REPO_ROOT, write_corpus
from tests.fakes import HashEmbeddings, TaskChatModel, fake_resources

RAG = REPO_ROOT / ".venv" / "bin" / "rag"
#: Seconds a child `rag` may take before the test counts it as a hang (it stops before loading a model).
CHILD_LIMIT_S = 120
CORPUS = {
    "heron.md": "# Heron\n\n"
    + "\n\n".join(f"Paragraph {n}: the patient heron waits by the reeds for fish." for n in range(40)),
    "reeds.md": "# Reeds\n\nThe reeds grow along the slow river where the heron hunts.",
}


def run_rag(arguments: list[str | bytes], data_dir: Path, stdin: bytes = b"") -> tuple[int, str, str]:
    """Run the installed `rag` with its data in `data_dir`: exit code, stdout, stderr."""
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_CACHE_ENABLED": "false"}
    result = subprocess.run(
        [str(RAG), *arguments], input=stdin, capture_output=True, env=env, timeout=CHILD_LIMIT_S, check=False
    )
    return (
        result.returncode,
        result.stdout.decode("utf-8", "replace"),
        result.stderr.decode("utf-8", "replace"),
    )


def one_line(stderr: str) -> str:
    """The only non-blank line of stderr (fails on a traceback or a second line)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


# --- invalid UTF-8 input -------------------------------------------------------------------------------


INVALID_UTF8_ARGUMENTS: dict[str, tuple[list[str | bytes], str]] = {
    "question": (
        ["ask", b"caf\xff\xfe?"],
        "error: question is not valid UTF-8 text: byte 0xff at character 4",
    ),
    "thread": (
        ["ask", "heron?", "--thread", b"t\xff"],
        "error: --thread is not valid UTF-8 text: byte 0xff at",
    ),
    "conversation-id": (
        ["ask", "heron?", "--conversation-id", b"\xfe"],
        "error: --conversation-id is not valid UTF-8 text",
    ),
    "chat-thread": (
        ["chat", "--thread", b"t\xff"],
        "error: --thread is not valid UTF-8 text: byte 0xff at character 2",
    ),
}


def test_invalid_utf8_argument_of_the_installed_command_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """The question's case through a real process (its argv decoded by Python, logging as a user sees it);
    the other arguments go through the same check in process below."""
    arguments, expected = INVALID_UTF8_ARGUMENTS["question"]
    code, _stdout, stderr = run_rag(arguments, tmp_path / "rag")
    assert code == 2, stderr
    assert one_line(stderr).startswith(expected)


@pytest.mark.parametrize("case", sorted(INVALID_UTF8_ARGUMENTS))
def test_invalid_utf8_argument_is_one_line_and_exit_2(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process, with each argument as Python's argv decoding hands it over (surrogate escapes)."""
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "rag"))
    arguments, expected = INVALID_UTF8_ARGUMENTS[case]
    decoded = [os.fsdecode(argument) if isinstance(argument, bytes) else argument for argument in arguments]
    result = CliRunner().invoke(app, decoded)
    assert result.exit_code == 2, result.output + result.stderr
    assert one_line(result.stderr).startswith(expected)


def test_chat_refuses_an_invalid_utf8_turn_and_goes_on(tmp_path: Path) -> None:
    """Undecodable bytes on stdin: that turn is refused in one line (as `rag ask` refuses the question), the
    chat goes on and ends normally."""
    code, _stdout, stderr = run_rag(["chat"], tmp_path / "rag", stdin=b"caf\xff\xfe?\n\n")
    assert code == 0, stderr
    assert one_line(stderr) == "error: question is not valid UTF-8 text: byte 0xff at character 4"


# --- a damaged catalog ---------------------------------------------------------------------------------


def write_catalog(path: Path, chunks: int = 300) -> None:
    """A catalog with one document of `chunks` chunks (several pages), its WAL folded into the file."""
    catalog = Catalog(path)
    scope = {"tenant": "default", "collection": "default"}
    rows = [
        Chunk(f"c{n}", f"Paragraph {n} about the heron. " * 8, {**scope, "content_hash": f"h{n}"})
        for n in range(chunks)
    ]
    catalog.replace_document(
        tenant="default", collection="default", source="/docs/heron.md", file_hash="x", doc_type="md",
        title="Heron", chunks=rows,
    )  # fmt: skip
    with catalog.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    catalog.close()


def garbage(data: bytes) -> bytes:
    return b"this is not a database" + bytes(range(256)) * 16


def damaged_header(data: bytes) -> bytes:
    return data[:16] + b"\xa5" * 84 + data[100:]  # "SQLite format 3" kept, page size and counters not


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "garbage": garbage,
    "damaged header": damaged_header,
    "truncated": truncated,
}
COMMANDS: dict[str, tuple[list[str], bytes]] = {
    "ask": (["ask", "Where does the heron wait?"], b""),
    "chat": (["chat"], b"Where does the heron wait?\n\n"),
    "search": (["search", "heron"], b""),
    "ingest": (["ingest", "DOCS"], b""),
}


#: Every command on the damaged header (the common case) through the installed command, in a child process;
#: the other kinds of damage on a few commands in process (the same check: `checked_store`).
CHILD_CASES = [("damaged header", command) for command in sorted(COMMANDS)]
IN_PROCESS_CASES = [("garbage", "ask"), ("garbage", "chat"), ("truncated", "ask"), ("truncated", "ingest")]


def damaged_folder(tmp_path: Path, damage: str, command: str) -> tuple[Path, bytes, list[str], bytes]:
    """A data folder whose catalog has `damage`: (catalog path, its damaged bytes, the command's arguments,
    its stdin)."""
    catalog = tmp_path / "rag" / "catalog.sqlite"
    write_catalog(catalog)
    catalog.write_bytes(DAMAGE[damage](catalog.read_bytes()))
    docs = write_corpus(tmp_path / "docs", CORPUS)
    arguments, stdin = COMMANDS[command]
    arguments = [str(docs["heron.md"].parent) if argument == "DOCS" else argument for argument in arguments]
    return catalog, catalog.read_bytes(), arguments, stdin


@pytest.mark.parametrize(("damage", "command"), CHILD_CASES)
def test_damaged_catalog_is_one_line_and_exit_1_for_every_command(
    damage: str, command: str, tmp_path: Path
) -> None:
    catalog, damaged, arguments, stdin = damaged_folder(tmp_path, damage, command)

    code, stdout, stderr = run_rag(list(arguments), catalog.parent, stdin)

    check_damaged_catalog_line(catalog, damaged, code, stdout, stderr)


@pytest.mark.parametrize(("damage", "command"), IN_PROCESS_CASES)
def test_every_kind_of_catalog_damage_is_one_line_and_exit_1(
    damage: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, damaged, arguments, stdin = damaged_folder(tmp_path, damage, command)
    monkeypatch.setenv("RAG_DATA_DIR", str(catalog.parent))
    # This folder's resources, not the process's (made from the first test's folder); no model loads: the
    # store check comes first.
    with use_resources(Resources(load_settings())):
        result = CliRunner().invoke(app, arguments, input=stdin)

    check_damaged_catalog_line(catalog, damaged, result.exit_code, result.stdout, result.stderr)


def check_damaged_catalog_line(catalog: Path, damaged: bytes, code: int, stdout: str, stderr: str) -> None:
    """Exit 1 with the catalog's one line naming the fix, no "cannot answer" or "skipped", the file intact."""
    assert code == 1, stdout + stderr
    line = one_line(stderr)
    assert line.startswith(f"error: the catalog {catalog} is damaged"), line
    assert "rag ingest" in line
    assert "cannot answer" not in stdout and "skipped" not in stdout
    assert catalog.read_bytes() == damaged  # nothing was overwritten


def damage_chunk_pages(path: Path) -> None:
    """Overwrite the b-tree header of every page of the chunks table (the documents table stays sound, so
    a file still looks unchanged)."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = [row[0] for row in connection.execute("SELECT pageno FROM dbstat WHERE name = 'chunks'")]
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
    connection.close()
    data = bytearray(path.read_bytes())
    for page in pages:
        start = (page - 1) * page_size + (100 if page == 1 else 0)
        data[start : start + 100] = b"\xa5" * 100
    path.write_bytes(bytes(data))


@pytest.fixture
def damaged_chunks(
    settings: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Path], Callable[[], KnowledgeBase]]:
    """The corpus indexed with the fake embeddings, then the catalog's chunk pages damaged; the CLI opens
    knowledge bases with the same fake model (so the files are unchanged for it). Returns the files and a
    factory of fresh knowledge bases (none opened before the damage, so no page is cached)."""
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, s=None: make_kb(s or settings)))
    files = write_corpus(tmp_path / "docs", CORPUS)
    first = make_kb(settings)
    summary = ingest_paths(first, list(files.values()))
    assert summary.count("indexed") == 2
    first.close()
    damage_chunk_pages(settings.catalog_path)
    return files, lambda: make_kb(settings)


def test_ingest_of_unchanged_files_on_damaged_chunk_pages_does_not_report_success(
    damaged_chunks: tuple[dict[str, Path], Callable[[], KnowledgeBase]],
) -> None:
    files, _ = damaged_chunks
    result = CliRunner().invoke(app, ["ingest", str(files["heron.md"]), str(files["reeds.md"])])
    assert result.exit_code == 1, result.output + result.stderr
    line = one_line(result.stderr)
    assert line.startswith("error: the catalog ") and "is damaged" in line
    assert "skipped" not in result.stdout


def test_python_ingest_of_unchanged_files_on_damaged_chunk_pages_raises(
    damaged_chunks: tuple[dict[str, Path], Callable[[], KnowledgeBase]],
) -> None:
    files, open_kb = damaged_chunks
    with pytest.raises(CatalogDamagedError, match="is damaged"):
        ingest_paths(open_kb(), list(files.values()))


def test_chunk_rows_lost_outside_the_engine_are_damage_not_skipped(kb: KnowledgeBase, tmp_path: Path) -> None:
    """A row deleted behind the engine's back (its keyword-index row left over): `skipped` would hide it and
    indexing again would collide with the leftover, so it is the damaged-catalog error naming the file."""
    files = write_corpus(tmp_path / "docs", CORPUS)
    ingest_paths(kb, [files["heron.md"]])
    with kb.catalog.engine.begin() as connection:
        connection.exec_driver_sql("DELETE FROM chunks WHERE id = (SELECT min(id) FROM chunks)")
    with pytest.raises(
        CatalogDamagedError, match=f"{files['heron.md']} should have \\d+ chunks, \\d+ are there"
    ):
        ingest_paths(kb, [files["heron.md"]])


@pytest.mark.parametrize(
    ("command", "stdin"), [(["ask", "Where does the heron wait?"], None), (["chat"], "Where is it?\n\n")]
)
def test_ask_and_chat_on_damaged_chunk_pages_exit_1_instead_of_answering(
    damaged_chunks: tuple[dict[str, Path], Callable[[], KnowledgeBase]], command: list[str], stdin: str | None
) -> None:
    _, open_kb = damaged_chunks
    kb = open_kb()
    model = TaskChatModel(replies={"generate": "The heron waits by the reeds [1]."})
    with use_resources(fake_resources(kb, model, settings=kb.settings)):
        result = CliRunner().invoke(app, command, input=stdin)
    assert result.exit_code == 1, result.output + result.stderr
    line = one_line(result.stderr)
    assert line.startswith("error: the catalog ") and "is damaged" in line
    assert "cannot answer" not in result.stdout


def test_the_nodes_log_line_of_a_store_error_the_command_reports_is_left_out() -> None:
    """`rag ask` prints the store's line itself: the retrieve node's log of the same error would be a second
    line; other log records still pass."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        log = logging.getLogger("nodes.retrieve")
        with store_errors_reported_here():
            log.error("retrieval failed: %s", StoreUnavailableError("the catalog is damaged"))
            log.error("something else: %s", "kept")
        log.error("retrieval failed: %s", StoreUnavailableError("outside"))
    finally:
        root.removeHandler(handler)
    assert seen == ["something else: kept", "retrieval failed: outside"]


# --- two ingests of one file at once -------------------------------------------------------------------


class SlowEmbeddings(HashEmbeddings):
    """The fake embeddings, slowed down so that two ingests started together overlap for certain."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        time.sleep(0.5)
        return super().embed_documents(texts)


@pytest.fixture
def shared_folder(settings: Settings, make_kb: Callable[..., KnowledgeBase]) -> Callable[[], KnowledgeBase]:
    """Knowledge bases of one data folder, each with its own catalog engine and slow fake embeddings."""
    return lambda: make_kb(settings, SlowEmbeddings())


def test_two_ingests_of_one_file_at_once_index_it_exactly_once(
    shared_folder: Callable[[], KnowledgeBase], tmp_path: Path
) -> None:
    """Two threads with knowledge bases of their own ingest the same file together: neither raises, one
    indexes it and the other (having waited) skips it; the catalog and Chroma hold one copy."""
    files = write_corpus(tmp_path / "docs", CORPUS)
    bases = [shared_folder(), shared_folder()]
    start = threading.Barrier(2)
    outcomes: list[object] = [None, None]

    def ingest(slot: int) -> None:
        start.wait()
        try:
            outcomes[slot] = ingest_paths(bases[slot], [files["heron.md"]])
        except Exception as error:  # noqa: BLE001 - the test reports whatever escaped
            outcomes[slot] = error

    workers = [threading.Thread(target=ingest, args=(slot,)) for slot in (0, 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    statuses = sorted(outcome.results[0].status for outcome in outcomes)  # type: ignore[union-attr]
    assert statuses == ["indexed", "skipped"], outcomes

    single = shared_folder()
    chunks = single.catalog.count_chunks("default", "default")
    assert len(single.catalog.documents()) == 1
    assert chunks == outcomes[0].results[0].chunks == outcomes[1].results[0].chunks  # type: ignore[union-attr]
    assert single.vectors.count("default", "default") == chunks


def hold_ingest_lock(settings: Settings, seconds: float) -> tuple[threading.Thread, threading.Event]:
    """Another "ingest" holding the default collection for `seconds`, in a thread of its own."""
    taken = threading.Event()

    def hold() -> None:
        with ingest_lock(settings):
            taken.set()
            time.sleep(seconds)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(10)
    return holder, taken


def test_cli_ingest_waits_for_another_ingest_with_one_line(
    settings: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, s=None: make_kb(s or settings)))
    files = write_corpus(tmp_path / "docs", CORPUS)
    holder, _ = hold_ingest_lock(settings, 1.0)
    result = CliRunner().invoke(app, ["ingest", str(files["reeds.md"])])
    holder.join()
    assert result.exit_code == 0, result.output + result.stderr
    assert one_line(result.stderr).startswith(
        "warning: waiting for another ingest into collection 'default' of tenant 'default' to finish"
    )
    assert "indexed 1" in result.stdout


def test_with_no_wait_allowed_a_busy_collection_is_skipped_in_one_line(
    settings: Settings, make_kb: Callable[..., KnowledgeBase], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    monkeypatch.setattr(ingest_lock_module, "INGEST_LOCK_TIMEOUT_S", 0)
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, s=None: make_kb(s or settings)))
    files = write_corpus(tmp_path / "docs", CORPUS)
    holder, _ = hold_ingest_lock(settings, 1.0)
    result = CliRunner().invoke(app, ["ingest", str(files["reeds.md"])])
    with pytest.raises(IngestBusyError, match="another ingest into collection 'default'"):
        ingest_paths(make_kb(settings), [files["reeds.md"]])
    holder.join()
    assert result.exit_code == 1, result.output + result.stderr
    assert one_line(result.stderr).startswith(
        "error: another ingest into collection 'default' of tenant 'default' is running; skipped"
    )
    assert make_kb(settings).catalog.documents() == []


def test_sqlite_replace_document_of_one_source_by_two_writers_keeps_one(tmp_path: Path) -> None:
    """The catalog alone (what index_event and the API's text route reach without the ingest lock): two
    writers of the same source at once used to both read "no row" and the second insert hit the unique
    source; now the second waits for the first's write lock and replaces its row."""
    path = tmp_path / "catalog.sqlite"
    Catalog(path).close()
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        catalog = Catalog(path)
        chunk = Chunk(f"c{n}", "The heron waits.", {"tenant": "t", "collection": "c", "content_hash": "h"})
        start.wait()
        try:
            catalog.replace_document(
                tenant="t", collection="c", source="event:1", file_hash="x", doc_type="event", title="",
                chunks=[chunk],
            )  # fmt: skip
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            catalog.close()

    writers = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=60)
    assert errors == []
    catalog = Catalog(path)
    assert len(catalog.documents()) == 1 and catalog.count_chunks() == 1
    catalog.close()
