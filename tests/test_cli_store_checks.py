"""Every `rag` command that reads the store goes through `rag search`'s input and store checks (issue 20 §3).

Before: `rag ask` with an invalid UTF-8 question died in the tokenizer with a stack trace (exit 1); `rag ask`
on a damaged catalog printed "I cannot answer" and exited 0 (with the semantic cache's stack trace when the
header was damaged); `rag ingest` of unchanged files on a catalog with damaged chunk pages said "skipped" and
exited 0.

The damaged-catalog and invalid-input cases run the installed command in a child process (what a user sees,
logging included); they fail before any model loads, so each takes a couple of seconds. The cases that need
indexed chunks run in process over the fake embeddings.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from config.settings import Settings
from core.types import Chunk
from nodes.resources import use_resources
from persistence.catalog import Catalog, CatalogDamagedError
from persistence.errors import StoreUnavailableError
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from service.cli import app
from service.cli.common import store_errors_reported_here
from tests.conftest import REPO_ROOT, write_corpus
from tests.fakes import TaskChatModel, fake_resources

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


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["ask", b"caf\xff\xfe?"], "error: question is not valid UTF-8 text: byte 0xff at character 4"),
        (["ask", "heron?", "--thread", b"t\xff"], "error: --thread is not valid UTF-8 text: byte 0xff at"),
        (["ask", "heron?", "--conversation-id", b"\xfe"], "error: --conversation-id is not valid UTF-8 text"),
        (["chat", "--thread", b"t\xff"], "error: --thread is not valid UTF-8 text: byte 0xff at character 2"),
    ],
    ids=["question", "thread", "conversation-id", "chat-thread"],
)
def test_invalid_utf8_argument_is_one_line_and_exit_2(
    arguments: list[str | bytes], expected: str, tmp_path: Path
) -> None:
    code, _stdout, stderr = run_rag(arguments, tmp_path / "rag")
    assert code == 2, stderr
    assert one_line(stderr).startswith(expected)


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


#: Every command on the damaged header (the issue's case), the other kinds of damage on a few.
CASES = [("damaged header", command) for command in sorted(COMMANDS)] + [
    ("garbage", "ask"),
    ("garbage", "chat"),
    ("truncated", "ask"),
    ("truncated", "ingest"),
]


@pytest.mark.parametrize(("damage", "command"), CASES)
def test_damaged_catalog_is_one_line_and_exit_1_for_every_command(
    damage: str, command: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "rag"
    catalog = data_dir / "catalog.sqlite"
    write_catalog(catalog)
    catalog.write_bytes(DAMAGE[damage](catalog.read_bytes()))
    damaged = catalog.read_bytes()
    docs = write_corpus(tmp_path / "docs", CORPUS)
    arguments, stdin = COMMANDS[command]
    arguments = [str(docs["heron.md"].parent) if argument == "DOCS" else argument for argument in arguments]

    code, stdout, stderr = run_rag(list(arguments), data_dir, stdin)

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
