"""The chaos benchmark's child processes: each probe runs the engine of `code_root` in a child (the real CLI,
a Python snippet, the server) with a fresh data folder, a timeout after which it counts as hung, and a process
group of its own so a hung child is killed whole.

Every child's `PYTHONPATH` is `code_root`, so the same probes measure an older checkout (`--code-root`) for a
before/after comparison. That is also why the Python probes are self-contained snippets run with `python -c`:
they may only use APIs every version has.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.chaos.limits import FAST_TURN_ENV, PROBE_TIMEOUT_S
from benchmarks.chaos.probe import Probe

REPO_ROOT = Path(__file__).resolve().parents[2]
#: What a Python stack trace starts with: any in a child's output (or the server's log) is a harm.
TRACEBACK = "Traceback (most recent call last)"


@dataclass
class ProcessResult:
    """What one child process did."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    hung: bool
    max_rss_bytes: int = 0

    @classmethod
    def of(
        cls,
        returncode: int | None,
        stdout: bytes,
        stderr: bytes,
        started: float,
        hung: bool,
        max_rss_bytes: int = 0,
    ) -> ProcessResult:
        """The result of a child that started at `started` (perf_counter) and wrote these bytes; a hung
        child has no exit code."""
        return cls(
            returncode=None if hung else returncode,
            stdout=stdout.decode("utf-8", "replace"),
            stderr=stderr.decode("utf-8", "replace"),
            seconds=time.perf_counter() - started,
            hung=hung,
            max_rss_bytes=max_rss_bytes,
        )

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def traceback(self) -> bool:
        return TRACEBACK in self.output

    @property
    def lines(self) -> int:
        """Non-empty lines the child printed (an error the user sees should be one)."""
        return sum(1 for line in self.output.splitlines() if line.strip())


@dataclass
class ChaosRunner:
    """Runs probes against `code_root` with data under `work_dir`."""

    work_dir: Path
    code_root: Path = REPO_ROOT
    python: str = sys.executable
    probes: list[Probe] = field(default_factory=list)
    progress: Callable[[str], None] = lambda _name: None

    # --- child processes -------------------------------------------------------------------------
    def env(self, data_dir: Path, **extra: str) -> dict[str, str]:
        """The environment of a child: no RAG_* of the caller, data in `data_dir`, code from code_root."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("RAG_")}
        env.update(FAST_TURN_ENV)
        env.update({"RAG_DATA_DIR": str(data_dir), "PYTHONPATH": str(self.code_root), **extra})
        env.pop("PYTHONSAFEPATH", None)
        return env

    def run(
        self,
        args: Sequence[str | bytes],
        data_dir: Path,
        *,
        timeout: float = PROBE_TIMEOUT_S,
        **extra_env: str,
    ) -> ProcessResult:
        """Run a child with a timeout; a child still running then is killed and reported as hung."""
        started = time.perf_counter()
        process = self.spawn(args, data_dir, extra_env=extra_env)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            stdout, stderr = process.communicate()
            hung = True
        return ProcessResult.of(process.returncode, stdout, stderr, started, hung)

    def spawn(
        self,
        args: Sequence[str | bytes],
        data_dir: Path,
        *,
        log: Path | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a child of code_root's Python in its own process group (so a hung one is killed whole).
        With `log`, its output goes to that file instead of pipes (a server logging for minutes would fill a
        pipe nobody reads, and block)."""
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        if log is None:
            out: Any = subprocess.PIPE
            err: Any = subprocess.PIPE
        else:
            out, err = log.open("ab"), subprocess.STDOUT
        try:
            return subprocess.Popen(
                [self.python, *args],
                cwd=data_dir.parent,
                env=self.env(data_dir, **(extra_env or {})),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        finally:
            if log is not None:
                out.close()  # the child has its own copy

    def ingest(self, data_dir: Path, folder: Path, tenant: str, what: str) -> None:
        """Ingest a set-up corpus; a failure ends the suite as a failed set-up (RuntimeError naming it)."""
        result = self.rag(data_dir, "ingest", str(folder), "--tenant", tenant, timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"chaos set-up: ingest of {what} failed: {result.output[-500:]}")

    def rag(
        self, data_dir: Path, *args: str | bytes, timeout: float = PROBE_TIMEOUT_S, **extra_env: str
    ) -> ProcessResult:
        """The `rag` command line of code_root."""
        return self.run(["-m", "service.cli", *args], data_dir, timeout=timeout, **extra_env)

    def python_snippet(self, data_dir: Path, code: str, timeout: float = PROBE_TIMEOUT_S) -> ProcessResult:
        """A self-contained Python snippet against code_root (prints one JSON line on success)."""
        return self.run(["-c", textwrap.dedent(code)], data_dir, timeout=timeout)

    def supports(self, data_dir: Path, command: Sequence[str], option: str) -> bool:
        """Whether a CLI command of code_root has an option (older versions lack some)."""
        return option in self.rag(data_dir, *command, "--help").stdout

    def record(self, probe: Probe) -> None:
        """Keep a probe's verdict and report it as it comes (a run takes minutes)."""
        self.probes.append(probe)
        self.progress(f"{probe.suite}/{probe.name}: {'ok' if probe.passed else 'FAIL'} {probe.detail}")


def last_json(output: str) -> Any:
    """The last JSON document printed: a one-line object or array, or an indented one (`rag ask --json`)
    starting at a line's first column; None when there is none. A line inside an indented document is never
    taken for the document (a bare string line such as `"text"` is valid JSON on its own)."""
    lines = output.strip().splitlines()
    for start in reversed(range(len(lines))):
        if not lines[start].startswith(("{", "[")):
            continue
        try:
            return json.loads("\n".join(lines[start:]))
        except ValueError:
            continue
    return None
