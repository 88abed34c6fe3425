"""Hostile files and inputs: devices, pipes, symlink loops, zip bombs, bad queries and filters,
a damaged catalog; documents built to be slow to parse. Each must end in one clear line or a
per-file reason, never a hang, a blow-up or a trace.

Reads that could hang run under pytest-timeout, and the ones that could also eat memory (reading /dev/zero
to its end) run in a child process with a memory limit, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import resource
import struct
import subprocess
import sys
import time
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import docx
import pytest
from typer.testing import CliRunner

from config.settings import Settings
from persistence.catalog import Catalog, CatalogDamagedError
from retrieval.filters import FilterError, parse_filter
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from retrieval.loaders import LoaderError, LoadGuard, StopRequested, discovery, load_file
from retrieval.search import QueryError, Searcher
from service.cli import app
from tests.conftest import REPO_ROOT, write_corpus

#: Seconds any hostile read may take before the test counts it as a hang.
HANG_LIMIT_S = 60
#: Address space of a child process that reads a hostile file (enough for Python and the loaders).
CHILD_MEMORY_BYTES = 2 * 1024**3
RAG = REPO_ROOT / ".venv" / "bin" / "rag"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))


def load_in_child(path: Path, max_bytes: int = 1_000_000) -> str:
    """The LoaderError reason for `path`, from a child process with a time and memory limit."""
    code = (
        "import sys; from pathlib import Path; from retrieval.loaders import LoaderError, load_file\n"
        "try:\n"
        f"    load_file(Path(sys.argv[1]), {max_bytes})\n"
        "    print('LOADED')\n"
        "except LoaderError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
        preexec_fn=_limit_memory,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


@pytest.fixture
def hostile_folder(tmp_path: Path) -> Path:
    """A folder with a /dev/zero symlink, a named pipe, symlink loops (files, a folder) and one good file."""
    root = tmp_path / "docs"
    write_corpus(root, {"good.md": "# Good\n\nThe patient heron waits by the reeds for silver fish."})
    (root / "zero.txt").symlink_to("/dev/zero")
    os.mkfifo(root / "pipe.txt")
    loop = root / "loop"
    loop.mkdir()
    (loop / "self").symlink_to(loop, target_is_directory=True)
    (loop / "a.md").symlink_to(loop / "b.md")
    (loop / "b.md").symlink_to(loop / "a.md")
    return root


# --- devices, pipes, loops, size -------------------------------------------------------------------------


def test_dev_zero_behind_a_txt_symlink_is_refused_without_reading(tmp_path: Path) -> None:
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")
    assert load_in_child(link) == "not a regular file (a character device)"


def test_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe.txt"
    os.mkfifo(pipe)
    assert load_in_child(pipe) == "not a regular file (a named pipe)"


def test_size_cap_is_checked_while_reading_not_from_st_size(tmp_path: Path) -> None:
    """/proc files are regular files that report st_size 0 and still hold bytes: only a cap counted while
    reading refuses them."""
    link = tmp_path / "maps.txt"
    link.symlink_to(f"/proc/{os.getpid()}/maps")
    assert os.stat(link).st_size == 0
    with pytest.raises(LoaderError, match="file too large: more than 64 bytes"):
        load_file(link, max_bytes=64)


@pytest.mark.timeout(HANG_LIMIT_S)
def test_ingest_skips_devices_pipes_and_loops_with_a_reason_each(
    kb: KnowledgeBase, hostile_folder: Path
) -> None:
    summary = ingest_paths(kb, [hostile_folder])

    reasons = {
        Path(result.source).name: result.reason for result in summary.results if result.status == "failed"
    }
    assert reasons == {
        "zero": "not a regular file (a character device)",  # the link resolves to /dev/zero
        "pipe.txt": "not a regular file (a named pipe)",
        "a.md": "symlink loop: the path never reaches a file",
        "b.md": "symlink loop: the path never reaches a file",
    }
    assert [Path(r.source).name for r in summary.results if r.status == "indexed"] == ["good.md"]


@pytest.mark.timeout(HANG_LIMIT_S)
def test_a_symlink_loop_named_explicitly_fails_alone(kb: KnowledgeBase, hostile_folder: Path) -> None:
    summary = ingest_paths(kb, [hostile_folder / "loop" / "a.md", hostile_folder / "good.md"])
    assert [(Path(r.source).name, r.status) for r in summary.results] == [
        ("a.md", "failed"),
        ("good.md", "indexed"),
    ]


@pytest.mark.timeout(HANG_LIMIT_S)
def test_cli_ingest_of_hostile_files_reports_each_without_a_trace(
    settings: Settings, hostile_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (hostile_folder / "good.md").unlink()  # nothing to embed: no model is loaded
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))
    result = CliRunner().invoke(app, ["ingest", str(hostile_folder)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert "failed 4" in result.stdout
    assert "not a regular file (a named pipe)" in result.stderr
    assert "not a regular file (a character device)" in result.stderr
    assert result.stderr.count("symlink loop") == 2


@pytest.mark.timeout(HANG_LIMIT_S)
def test_garbage_pdf_fails_alone_and_ingest_exits_non_zero(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = write_corpus(
        tmp_path / "docs",
        {"garbage.pdf": bytes(range(256)) * 16, "good.md": "# Good\n\nThe heron waits by the reeds."},
    )
    monkeypatch.setenv("RAG_DATA_DIR", str(kb.settings.data_dir))
    monkeypatch.setattr(KnowledgeBase, "open", classmethod(lambda cls, _settings=None: kb))
    result = CliRunner().invoke(app, ["ingest", str(docs["good.md"].parent)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "indexed 1" in result.stdout and "failed 1" in result.stdout
    assert f"failed {docs['garbage.pdf']}: corrupt PDF" in result.stderr
    assert "error: 1 of 2 files failed to ingest" in result.stderr
    assert kb.catalog.count_chunks() == 1  # the good file is indexed all the same
    as_json = CliRunner().invoke(app, ["ingest", "--json", str(docs["garbage.pdf"])])
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["failures"][0]["reason"].startswith("corrupt PDF")


# --- zip bombs -------------------------------------------------------------------------------------------

DOCX_XML_HEAD = (
    '<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    "<w:body><w:p><w:r><w:t>"
)


def write_docx_bomb(path: Path, inflated_bytes: int, entries: int = 1) -> Path:
    """A .docx whose document.xml inflates to `inflated_bytes` (zeros compress ~1000x: a few KB on disk)."""
    block = b"0" * (1 << 20)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            member.write(DOCX_XML_HEAD.encode())
            written = 0
            while written < inflated_bytes:
                piece = block[: inflated_bytes - written]
                member.write(piece)
                written += len(piece)
            member.write(b"</w:t></w:r></w:p></w:body></w:document>")
        for index in range(entries - 1):
            archive.writestr(f"customXml/item{index}.xml", "<x/>")
    return path


@pytest.fixture
def docx_parser_calls(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Records every call of python-docx's parser (a bomb must be refused before it)."""
    import retrieval.loaders.docx as docx_loader  # imported on first use by the registry, so import it here

    calls: list[object] = []
    real = docx_loader.Document

    def recording(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(docx_loader, "Document", recording)
    return calls


def test_the_docx_parser_recorder_sees_a_real_parse(tmp_path: Path, docx_parser_calls: list[object]) -> None:
    """The recorder patches the name the DOCX loader looks up, or the "never parsed" checks prove nothing."""
    plain = docx.Document()
    plain.add_paragraph("An ordinary paragraph.")
    plain.save(tmp_path / "plain.docx")
    assert load_file(tmp_path / "plain.docx", max_bytes=50_000_000)
    assert len(docx_parser_calls) == 1


def test_docx_bomb_is_refused_before_parsing(tmp_path: Path, docx_parser_calls: list[object]) -> None:
    bomb = write_docx_bomb(tmp_path / "bomb.docx", inflated_bytes=60 * 1024**2)
    assert bomb.stat().st_size < 1024**2  # small on disk, as the reported one (873 KB)
    with pytest.raises(LoaderError, match=r"zip bomb refused: inflates to \d+ bytes > 50000000"):
        load_file(bomb, max_bytes=50_000_000)
    assert docx_parser_calls == []


def test_docx_compression_ratio_and_entry_count_are_capped(
    tmp_path: Path, docx_parser_calls: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discovery, "MAX_UNZIPPED_BYTES", 10**9)
    monkeypatch.setattr(discovery, "MAX_ZIP_RATIO", 200)
    dense = write_docx_bomb(tmp_path / "dense.docx", inflated_bytes=4 * 1024**2)
    with pytest.raises(LoaderError, match=r"word/document.xml inflates \d+x > 200x \(MAX_ZIP_RATIO\)"):
        load_file(dense, 50_000_000)
    monkeypatch.setattr(discovery, "MAX_ZIP_ENTRIES", 20)
    crowded = write_docx_bomb(tmp_path / "crowded.docx", inflated_bytes=10, entries=30)
    with pytest.raises(LoaderError, match=r"31 entries > 20 \(MAX_ZIP_ENTRIES\)"):
        load_file(crowded, 50_000_000)
    assert docx_parser_calls == []


def test_ingest_applies_the_unzipped_size_bound(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(discovery, "MAX_UNZIPPED_BYTES", 1_000_000)
    settings = make_settings()
    bomb = write_docx_bomb(tmp_path / "bomb.docx", 3_000_000)
    (result,) = ingest_paths(make_kb(settings), [bomb]).results
    assert result.status == "failed"
    assert result.reason is not None and "MAX_UNZIPPED_BYTES" in result.reason


def write_lying_docx(path: Path, inflated_bytes: int, declared_bytes: int = 1000) -> Path:
    """A real .docx whose document.xml inflates to `inflated_bytes` while its zip headers declare
    `declared_bytes` (with the CRC of the first declared bytes, so the short read looks valid)."""
    import docx

    skeleton = io.BytesIO()
    docx.Document().save(skeleton)
    packed = io.BytesIO()
    with (
        zipfile.ZipFile(skeleton) as source,
        zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_DEFLATED) as archive,
    ):
        for entry in source.infolist():
            if entry.filename != "word/document.xml":
                archive.writestr(entry.filename, source.read(entry.filename))
        with archive.open("word/document.xml", "w") as member:
            member.write(DOCX_XML_HEAD.encode())
            block = b"0" * (1 << 20)
            for start in range(0, inflated_bytes, len(block)):
                member.write(block[: inflated_bytes - start])
    data = bytearray(packed.getvalue())
    prefix = (DOCX_XML_HEAD.encode() + b"0" * declared_bytes)[:declared_bytes]
    # (signature, offset of the CRC, offset of the name length, offset of the name) in both headers
    for signature, crc_at, name_length_at, name_at in (
        (b"PK\x01\x02", 16, 28, 46),
        (b"PK\x03\x04", 14, 26, 30),
    ):
        start = 0
        while (found := data.find(signature, start)) >= 0:
            start = found + 4
            length = struct.unpack_from("<H", data, found + name_length_at)[0]
            if bytes(data[found + name_at : found + name_at + length]) == b"word/document.xml":
                struct.pack_into("<I", data, found + crc_at, zlib.crc32(prefix))
                struct.pack_into("<I", data, found + crc_at + 8, declared_bytes)  # uncompressed size
    path.write_bytes(bytes(data))
    return path


def test_docx_that_lies_about_its_size_is_inflated_within_bounds(tmp_path: Path) -> None:
    """The directory's sizes are the attacker's to write: 1,000 bytes declared, 200 MB in the stream.
    Parsing it must never inflate the stream (before: python-docx's read() took 630 MB for 300 MB)."""
    bomb = write_lying_docx(tmp_path / "liar.docx", inflated_bytes=200 * 1024**2)
    assert bomb.stat().st_size < 1024**2
    tracemalloc.start()
    try:
        with pytest.raises(LoaderError, match="corrupt DOCX"):  # the truncated XML is not a document
            load_file(bomb, max_bytes=50_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024**2, f"peak {peak / 1024**2:.0f} MiB"


def test_an_ordinary_docx_still_loads_within_the_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Field notes", level=1)
    document.add_paragraph("The heron waits by the reeds. " * 200)
    path = tmp_path / "notes.docx"
    document.save(str(path))
    monkeypatch.setattr(discovery, "MAX_UNZIPPED_BYTES", 5_000_000)
    monkeypatch.setattr(discovery, "MAX_ZIP_ENTRIES", 100)
    (loaded,) = load_file(path, 50_000_000)
    assert "heron" in loaded.text


# --- bad queries and filters through the CLI -------------------------------------------------------------

NESTED_FILTER = '{"$and": [' * 1000 + '{"page": 1}' + "]}" * 1000

BAD_SEARCHES: dict[str, tuple[list[str], str]] = {
    "invalid UTF-8 query": (["caf\udcff\udcfe query"], "query is not valid UTF-8 text: byte 0xff"),
    "filter nested 1000 levels": (["planet", "--filter", NESTED_FILTER], "nested deeper than"),
    "huge integer": (["planet", "--filter", '{"page": 1' + "0" * 400 + "}"], "out of range"),
    "integer beyond Python's limit": (["planet", "--filter", '{"page": ' + "9" * 5000 + "}"], "out of range"),
    "NaN": (["planet", "--filter", '{"created_ts": NaN}'], "NaN is not a number"),
    "Infinity": (["planet", "--filter", '{"created_ts": {"$gt": Infinity}}'], "Infinity is not a number"),
    "1e400": (["planet", "--filter", '{"created_ts": {"$lt": 1e400}}'], "1e400 is out of range"),
    "NaN on a custom key": (["planet", "--filter", '{"score": {"$in": [1.5, NaN]}}'], "NaN is not a number"),
}


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("case", sorted(BAD_SEARCHES))
def test_bad_search_input_is_one_line_and_exit_2(
    case: str, kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With documents indexed, so that every bad value would reach Chroma and SQLite if not refused."""
    ingest_paths(kb, [write_corpus(tmp_path / "docs", {"p.md": "# Planets\n\nJupiter is a planet."})["p.md"]])
    monkeypatch.setenv("RAG_DATA_DIR", str(kb.settings.data_dir))
    arguments, expected = BAD_SEARCHES[case]
    result = CliRunner().invoke(app, ["search", *arguments, "--mode", "bm25"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    line = one_error_line(result.stderr)
    assert line.startswith("error: ") and expected in line


@pytest.mark.parametrize("case", sorted(BAD_SEARCHES))
def test_bad_search_input_through_the_python_api(case: str, kb: KnowledgeBase, tmp_path: Path) -> None:
    """The same inputs given to Searcher.search: one ValueError subclass with the same reason, no crash
    from the JSON parser, SQLite or Chroma (hybrid mode, so both stores would see them)."""
    ingest_paths(kb, [write_corpus(tmp_path / "docs", {"p.md": "# Planets\n\nJupiter is a planet."})["p.md"]])
    arguments, expected = BAD_SEARCHES[case]
    query, filters = arguments[0], (arguments[2] if len(arguments) > 2 else None)
    with pytest.raises((QueryError, FilterError), match=re.escape(expected)):
        Searcher(kb).search(query, filters=filters, mode="hybrid")


def test_a_filter_as_a_python_dict_is_checked_like_json() -> None:
    """Python callers pass dicts: NaN, infinities and integers beyond 64 bits are refused there too."""
    for bad in (
        {"created_ts": math.nan},
        {"page": {"$lt": math.inf}},
        {"page": 2**70},
        {"page": {"$in": [-(2**64)]}},
    ):
        with pytest.raises(FilterError):
            parse_filter(bad)
    assert parse_filter({"page": {"$lte": 2**63 - 1}}) is not None


def test_invalid_utf8_argv_through_the_installed_command(tmp_path: Path) -> None:
    """The real entry point: argv bytes that are not UTF-8 reach Python as surrogates."""
    env = {**os.environ, "RAG_DATA_DIR": str(tmp_path / "rag")}
    result = subprocess.run(
        [str(RAG), "search", b"caf\xff\xfe query"],
        capture_output=True,
        env=env,
        timeout=HANG_LIMIT_S,
        check=False,
    )
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert one_error_line(stderr) == "error: query is not valid UTF-8 text: byte 0xff at character 4"


# --- a damaged catalog ---------------------------------------------------------------------------------


def test_garbage_catalog_is_one_line_naming_the_file_exit_1(tmp_path: Path) -> None:
    data_dir = tmp_path / "rag"
    data_dir.mkdir()
    catalog = data_dir / "catalog.sqlite"
    garbage = b"this is not a database" + bytes(range(256)) * 16
    catalog.write_bytes(garbage)
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir)}
    for command in (["search", "planet"], ["ingest", str(tmp_path)]):
        result = subprocess.run([str(RAG), *command], capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        line = one_error_line(result.stderr)
        assert str(catalog) in line and "damaged" in line and "rag ingest" in line
    assert catalog.read_bytes() == garbage  # nothing was overwritten


def test_catalog_damaged_inside_is_reported_by_any_query(kb: KnowledgeBase, tmp_path: Path) -> None:
    """A valid header with damaged pages: the error surfaces on a later query, and is the same clear one."""
    paragraphs = "\n\n".join(f"Paragraph {n} about the heron and the reeds." for n in range(400))
    ingest_paths(kb, [write_corpus(tmp_path / "docs", {"long.md": f"# Long\n\n{paragraphs}"})["long.md"]])
    kb.close()
    path = kb.settings.catalog_path
    with Catalog(path).engine.connect() as connection:  # fold the WAL back into the file
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    page = 4096
    for start in range(page, len(data), page):  # every page's b-tree header but the schema page's
        data[start : start + 200] = b"\xa5" * 200
    path.write_bytes(bytes(data))
    reopened = Catalog(path)  # the schema page is intact: opening works, the damage shows later
    queries: dict[str, Callable[[], object]] = {
        "count_chunks": reopened.count_chunks,
        "chunk_ids": lambda: reopened.chunk_ids("default", "default"),
        "documents": reopened.documents,
        "integrity_errors": reopened.integrity_errors,
    }
    for name, query in queries.items():
        with pytest.raises(CatalogDamagedError, match=f"the catalog {path} is damaged .*rag ingest"):
            query()
            raise AssertionError(f"{name} did not notice the damage")


def test_json_output_of_a_clean_search_is_unaffected(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest_paths(kb, [write_corpus(tmp_path / "docs", {"p.md": "# Planets\n\nJupiter is a planet."})["p.md"]])
    monkeypatch.setenv("RAG_DATA_DIR", str(kb.settings.data_dir))
    result = CliRunner().invoke(app, ["search", "Jupiter", "--mode", "bm25", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hits"][0]["text"].endswith("Jupiter is a planet.")


# --- documents built to be slow: nesting, quadratic steps, time budget, stop hook -------------------------

#: Seconds a parse that is linear must finish within (about 10x what it takes on a slow machine). The
#: linear-parse tests count the process's CPU seconds, not wall time: other processes on a busy machine
#: stretch the wall time (12 s on a 2-core machine at load 12), not the work done.
LINEAR_PARSE_LIMIT_S = 10.0


def nested_divs(levels: int) -> str:
    """A hostile page: `levels` nested <div>s, each with a little text, one sentence deepest."""
    return "<html><body>" + "<div>x " * levels + "deep text" + "</div>" * levels + "</body></html>"


@pytest.mark.timeout(HANG_LIMIT_S)
@pytest.mark.parametrize("max_depth", [512, 100_000])
def test_deeply_nested_html_loads_in_linear_time(tmp_path: Path, max_depth: int) -> None:
    # Marking the tree with bs4's insert_after re-walked every element's subtree: 8,000 levels took 12 s and
    # 30,000 take minutes. With the cap raised past the depth, this checks the single walk is linear.
    path = tmp_path / "nested.html"
    path.write_text(nested_divs(30_000))
    started = time.process_time()
    (document,) = load_file(path, 50_000_000, guard=LoadGuard(max_depth=max_depth, timeout_s=0))
    assert time.process_time() - started < LINEAR_PARSE_LIMIT_S
    assert document.text.endswith("x\n\nx deep text")
    assert document.text.count("x\n\n") == 29_999  # every level kept its text, as a paragraph


def test_html_beyond_the_depth_cap_is_flattened_not_lost(tmp_path: Path) -> None:
    # Legacy pages leave <p> unclosed and html.parser nests them: 300 paragraphs are 300 levels deep. Beyond
    # the cap the innermost element counts as closed: every paragraph's text stays, in order.
    paragraphs = "".join(f"<p>paragraph {number}" for number in range(300))
    path = tmp_path / "legacy.html"
    path.write_text(f"<html><body><h1>Old page</h1>{paragraphs}</body></html>")
    (document,) = load_file(path, 1_000_000, guard=LoadGuard(max_depth=32))
    assert document.sections[0].section == "Old page"
    assert document.text.split("\n\n")[1:] == [f"paragraph {number}" for number in range(300)]


@pytest.mark.timeout(HANG_LIMIT_S)
def test_long_runs_of_spaces_do_not_make_text_and_markdown_quadratic(tmp_path: Path) -> None:
    # Two regexes rescanned a run of spaces from each of its spaces: the trailing-space clean-up of every
    # text format (1.7 s for 20,000 spaces before a word) and the markdown heading (5.7 s for 20,000).
    spaces = " " * 100_000
    path = tmp_path / "spaces.md"
    path.write_text(f"# Title{spaces}end\n\nbody{spaces}word\n\n## Closed ##\n\nmore\n\n## C#\n\nsharp\n")
    started = time.process_time()
    documents = load_file(path, 1_000_000)
    assert time.process_time() - started < LINEAR_PARSE_LIMIT_S
    (document,) = documents
    assert [section.section for section in document.sections] == [f"Title{spaces}end", "Closed", "C#"]
    assert document.sections[0].text.endswith(f"body{spaces}word")


def test_deeply_nested_json_fails_alone_naming_the_depth_cap(
    make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    # 600 levels: within Python's recursion limit, so json.loads alone would parse it; past the cap it is
    # refused before json.loads recurses (at 100,000 levels it did fail, but only by RecursionError).
    deep = "[" * 600 + "]" * 600
    files = write_corpus(
        tmp_path / "docs",
        {
            "deep.json": deep,
            "deep.jsonl": f'{{"text": "fine"}}\n{{"text": "x", "nested": {deep}}}\n',
            # brackets inside strings are text, not nesting: this record loads
            "brackets.json": json.dumps({"text": "Unbalanced " + "[{" * 2_000, "note": '\\"[[['}),
            "good.md": "# Good\n\nThe patient heron waits by the reeds.",
        },
    )
    summary = ingest_paths(make_kb(make_settings()), list(files.values()))
    outcome = {Path(result.source).name: (result.status, result.reason) for result in summary.results}
    too_deep = "nested deeper than 512 levels (LOADER_MAX_DEPTH)"
    assert outcome == {
        "deep.json": ("failed", f"invalid JSON on line 1: {too_deep}"),
        "deep.jsonl": ("failed", f"invalid JSON on line 2: {too_deep}"),
        "brackets.json": ("indexed", None),
        "good.md": ("indexed", None),
    }


def test_docx_nested_past_the_xml_parser_limit_fails_with_a_plain_reason(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    plain = docx.Document()
    plain.add_paragraph("hello")
    plain.save(buffer)
    nested = io.BytesIO()
    with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(nested, "w", zipfile.ZIP_DEFLATED) as target:
        for name in source.namelist():
            data = source.read(name)
            if name == "word/document.xml":
                depth = 200  # two elements a level: 400 deep, past libxml2's 256
                wrapped = "<w:sdt><w:sdtContent>" * depth + "<w:p/>" + "</w:sdtContent></w:sdt>" * depth
                data = data.replace(b"<w:body>", b"<w:body>" + wrapped.encode(), 1)
            target.writestr(name, data)
    path = tmp_path / "nested.docx"
    path.write_bytes(nested.getvalue())
    with pytest.raises(LoaderError, match=r"^corrupt DOCX: XML nested deeper than 256 levels"):
        load_file(path, 1_000_000)


@pytest.mark.timeout(HANG_LIMIT_S)
def test_file_over_the_time_budget_fails_alone(
    make_settings: Callable[..., Settings],
    make_kb: Callable[..., KnowledgeBase],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 150,000 elements take seconds to parse; the budget is a fraction of that. The small file parses in
    # milliseconds and indexes in the same run.
    monkeypatch.setenv("RAG_LOADER_FILE_TIMEOUT_S", "0.3")
    files = write_corpus(
        tmp_path / "docs",
        {
            "slow.html": "<html><body>" + "<b>x</b> " * 150_000 + "</body></html>",
            "good.md": "# Good\n\nHeron.",
        },
    )
    started = time.perf_counter()
    summary = ingest_paths(make_kb(make_settings()), list(files.values()))
    outcome = {Path(result.source).name: (result.status, result.reason) for result in summary.results}
    assert outcome == {
        "slow.html": ("failed", "took longer than 0.3 s to parse (RAG_LOADER_FILE_TIMEOUT_S)"),
        "good.md": ("indexed", None),
    }
    assert time.perf_counter() - started < LINEAR_PARSE_LIMIT_S


def test_should_stop_ends_an_ingest_between_files(
    make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    files = write_corpus(tmp_path / "docs", {f"{name}.md": f"# {name}\n\nText of {name}." for name in "abc"})
    kb = make_kb(make_settings())
    done: list[int] = []
    summary = ingest_paths(
        kb,
        [tmp_path / "docs"],
        progress=lambda event, amount: done.append(amount) if event == "file" else None,
        should_stop=lambda: len(done) >= 1,  # the client goes away once the first file is indexed
        prune=True,
    )
    assert summary.stopped and summary.as_dict()["stopped"] is True
    assert [(Path(result.source).name, result.status) for result in summary.results] == [("a.md", "indexed")]
    assert [record.source for record in kb.catalog.documents("default", "default")] == [
        str(files["a.md"].resolve())
    ]


def test_should_stop_abandons_the_file_being_parsed(
    make_settings: Callable[..., Settings], make_kb: Callable[..., KnowledgeBase], tmp_path: Path
) -> None:
    write_corpus(tmp_path / "docs", {"big.html": "<p>x</p>" * 5_000, "good.md": "# Good\n\nHeron."})
    kb = make_kb(make_settings())
    calls: list[int] = []

    def should_stop() -> bool:
        calls.append(1)
        return len(calls) > 1  # False before the first file, True at the first check inside its parse

    summary = ingest_paths(kb, [tmp_path / "docs"], should_stop=should_stop)
    assert summary.stopped and summary.results == []  # abandoned, not failed; good.md never read
    assert kb.catalog.documents("default", "default") == []
    with pytest.raises(StopRequested):
        load_file(tmp_path / "docs" / "big.html", 1_000_000, guard=LoadGuard(should_stop=lambda: True))
