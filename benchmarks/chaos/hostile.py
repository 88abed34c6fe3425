"""`python -m benchmarks chaos --suite hostile`: hostile files and inputs through the CLI. Malformed queries
and filters, questions of 100k characters, a device, a pipe, a symlink loop, a zip bomb, garbage, files
whose parse used to take minutes, and a damaged catalog (benchmarks/chaos/damaged_catalog.py): each must
end with the documented exit code and one line of error, no stack trace, no hang and no memory blow-up
(the child's peak memory is measured with wait4)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.chaos.corpora import write_files
from benchmarks.chaos.damaged_catalog import corrupt_catalog_probe, damaged_catalog_command_probe
from benchmarks.chaos.limits import MEMORY_LIMIT_BYTES, PROBE_TIMEOUT_S
from benchmarks.chaos.probe import Probe, failed_checks
from benchmarks.chaos.runner import ChaosRunner, ProcessResult, last_json


@dataclass(frozen=True)
class HostileCase:
    """A hostile command line and the exit codes that count as handled; `one_line`: its error must be one
    line; `must_index`: files its ingest (`--json`) must still index (a bad file fails alone)."""

    name: str
    args: tuple[str | bytes, ...]
    expected: frozenset[int]
    one_line: bool = False
    must_index: int = 0


def hostile_cases(files: dict[str, Path]) -> list[HostileCase]:
    """The hostile command lines: malformed queries, questions and filters (exit 2, a usage error), and the
    `files` of hostile_files to ingest (they fail alone, exit 1 or 2, or index)."""
    nested = '{"$and": [' * 1000 + '{"page": 1}' + "]}" * 1000  # json.dumps would hit the recursion limit
    bad_input = frozenset({2})
    failed_file = frozenset({1, 2})
    indexed_or_failed = frozenset({0, 1})
    search = ("-m", "service.cli", "search")
    ask = ("-m", "service.cli", "ask")
    ingest = ("-m", "service.cli", "ingest")
    return [
        HostileCase("invalid UTF-8 query", (*search, b"caf\xff\xfe query"), bad_input),
        HostileCase("empty query", (*search, ""), bad_input),
        HostileCase("huge query (100k chars)", (*search, "x " * 50_000), bad_input),
        HostileCase("filter nested 1000 levels", (*search, "planet", "--filter", nested), bad_input),
        HostileCase(
            "huge integer in filter",
            (*search, "planet", "--filter", '{"page": 1' + "0" * 400 + "}"),
            bad_input,
        ),
        HostileCase("NaN in filter", (*search, "planet", "--filter", '{"page": NaN}'), bad_input),
        HostileCase(
            "Infinity in filter", (*search, "planet", "--filter", '{"page": {"$gt": Infinity}}'), bad_input
        ),
        HostileCase("1e400 in filter", (*search, "planet", "--filter", '{"page": 1e400}'), bad_input),
        HostileCase("truncated filter JSON", (*search, "planet", "--filter", '{"page":'), bad_input),
        HostileCase("negative k", (*search, "planet", "--k", "-5"), bad_input),
        HostileCase("unknown mode", (*search, "planet", "--mode", "telepathy"), bad_input),
        HostileCase("empty question", ("-m", "service.cli", "ask", "   "), bad_input),
        HostileCase("huge question", ("-m", "service.cli", "ask", "why " * 25_000), bad_input),
        HostileCase(
            "ask with NaN filter", ("-m", "service.cli", "ask", "why", "--filter", '{"page": NaN}'), bad_input
        ),
        HostileCase(
            "/dev/zero behind a .txt symlink",
            ("-m", "service.cli", "ingest", str(files["zero"])),
            failed_file,
        ),
        HostileCase("named pipe", ("-m", "service.cli", "ingest", str(files["fifo"])), failed_file),
        HostileCase("symlink loop", ("-m", "service.cli", "ingest", str(files["loop"])), failed_file),
        HostileCase("docx zip bomb", ("-m", "service.cli", "ingest", str(files["bomb"])), failed_file),
        HostileCase(
            "binary garbage as .pdf", ("-m", "service.cli", "ingest", str(files["garbage"])), failed_file
        ),
        HostileCase("ask: invalid UTF-8 question", (*ask, b"caf\xff\xfe?"), bad_input, one_line=True),
        HostileCase("ask: empty string question", (*ask, ""), bad_input, one_line=True),
        HostileCase("ask: question of 100k chars", (*ask, "why " * 25_000), bad_input, one_line=True),
        HostileCase("HTML of 20k nested divs", (*ingest, str(files["deep_html"])), indexed_or_failed),
        HostileCase("JSON of 100k nested arrays", (*ingest, str(files["deep_json"])), indexed_or_failed),
        HostileCase("markdown of 200k spaces", (*ingest, str(files["spaces"])), indexed_or_failed),
        HostileCase(
            "slow-parse files beside a good one",
            (*ingest, str(files["slow_parse"]), "--json"),
            indexed_or_failed,
            must_index=1,
        ),
    ]


def hostile_files(root: Path) -> dict[str, Path]:
    """Files that attack the loaders: a device, a pipe, a loop, a zip bomb, garbage."""
    import zipfile

    root.mkdir(parents=True, exist_ok=True)
    zero = root / "zero.txt"
    zero.symlink_to("/dev/zero")
    fifo = root / "pipe.txt"
    os.mkfifo(fifo)
    loop = root / "loop"
    loop.mkdir()
    (loop / "self").symlink_to(loop, target_is_directory=True)
    (loop / "a.md").symlink_to(loop / "b.md")
    (loop / "b.md").symlink_to(loop / "a.md")
    bomb = root / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        body = "<w:p><w:r><w:t>" + "A" * 1000 + "</w:t></w:r></w:p>"
        archive.writestr(
            "word/document.xml",
            '<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
            'wordprocessingml/2006/main"><w:body>' + body * 300_000 + "</w:body></w:document>",
        )
    garbage = root / "garbage.pdf"
    garbage.write_bytes(os.urandom(4096))
    slow_folder = write_files(root / "slow-parse", {**slow_parse_documents(), "good.md": SLOW_PARSE_GOOD_DOC})
    return {
        "zero": zero,
        "fifo": fifo,
        "loop": loop,
        "bomb": bomb,
        "garbage": garbage,
        "deep_html": slow_folder / "deep.html",
        "deep_json": slow_folder / "deep.json",
        "spaces": slow_folder / "spaces.md",
        "slow_parse": slow_folder,
    }


#: The file indexed beside the slow-parse ones: they must fail (or index) alone.
SLOW_PARSE_GOOD_DOC = "# Harbour\n\nThe Wenlow harbour has 12 berths.\n"


def slow_parse_documents() -> dict[str, str]:
    """Small files whose parse used to take minutes or blow the stack: nested markup, and a whitespace-only
    markdown file (a regex over 200k spaces)."""
    return {
        "deep.html": "<html><body>" + "<div>" * 20_000 + "deep text" + "</div>" * 20_000 + "</body></html>",
        "deep.json": "[" * 100_000 + "1" + "]" * 100_000,
        "spaces.md": " " * 200_000,
    }


def run_measured(runner: ChaosRunner, args: Sequence[str | bytes], data_dir: Path) -> ProcessResult:
    """Like runner.run, with the child's peak memory (wait4) so a zip bomb shows up even when it ends."""
    started = time.perf_counter()
    process = runner.spawn(args, data_dir)
    out_pipe, err_pipe = process.stdout, process.stderr
    if out_pipe is None or err_pipe is None:  # spawn pipes both whenever it is given no log file
        raise RuntimeError("the child was started without pipes to read")
    with ThreadPoolExecutor(2) as pool:
        out_future = pool.submit(out_pipe.read)
        err_future = pool.submit(err_pipe.read)
        deadline = started + PROBE_TIMEOUT_S
        hung = False
        rusage = None
        status = 0
        while True:
            pid, status, rusage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(process.pid, 9)
                _, status, rusage = os.wait4(process.pid, 0)
                hung = True
                break
            time.sleep(0.05)
        stdout, stderr = out_future.result(), err_future.result()
    process.returncode = os.waitstatus_to_exitcode(status)
    max_rss_bytes = (rusage.ru_maxrss * 1024) if rusage else 0
    return ProcessResult.of(process.returncode, stdout, stderr, started, hung, max_rss_bytes)


def hostile_verdict(case: HostileCase, result: ProcessResult) -> Probe:
    """The probe of one hostile case: no trace, no hang, no blow-up, the documented exit code, one line of
    error where the case asks for it, the good files indexed where it has any. Its figures carry the child's
    peak memory and run time (`max_rss_bytes`, `seconds`: not harm counts; the report keeps the peak memory
    over the hostile set)."""
    blowup = result.max_rss_bytes > MEMORY_LIMIT_BYTES
    wrong_code = result.returncode not in case.expected and not result.hung
    multiline = case.one_line and not result.hung and result.lines != 1
    summary = last_json(result.stdout) if case.must_index else None
    indexed = int(summary.get("indexed", 0)) if isinstance(summary, dict) else 0
    unindexed = bool(case.must_index) and not result.hung and indexed < case.must_index
    problems = failed_checks(
        ("stack trace", result.traceback),
        ("hang", result.hung),
        (f"{result.max_rss_bytes / 1024**3:.1f} GB memory", blowup),
        (f"exit {result.returncode}, expected {sorted(case.expected)}", wrong_code),
        (f"{result.lines} lines of output, expected one", multiline),
        (f"{indexed} files indexed, expected {case.must_index}", unindexed),
    )
    return Probe(
        "hostile",
        case.name,
        not problems,
        "; ".join(problems),
        {
            "traces": float(result.traceback),
            "hangs": float(result.hung),
            "memory_blowups": float(blowup),
            "wrong_exit_codes": float(wrong_code),
            "multiline_errors": float(multiline),
            "lost": float(unindexed),
            "max_rss_bytes": float(result.max_rss_bytes),
            "seconds": round(result.seconds, 1),
        },
    )


def hostile_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """Hostile files and inputs through the CLI: no trace, no hang, no blow-up, the documented exit code."""
    files = hostile_files(runner.work_dir / "hostile")
    for case in hostile_cases(files):
        runner.record(hostile_verdict(case, run_measured(runner, case.args, data_dir)))
    corrupt_catalog_probe(runner, data_dir)
    for command in ("ask", "ingest"):
        damaged_catalog_command_probe(runner, data_dir, command)
