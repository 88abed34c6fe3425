"""What a benchmark ran on (machine, model, commit, load), written into every result file: numbers without
them cannot be compared, and one function each keeps the wording identical across reports.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from config.settings import Settings
from models.factory import resolve_spec
from models.local_catalog import CATALOG

CPU_INFO = Path("/proc/cpuinfo")
#: The checkout whose commit a result file names (this package's parent).
PROJECT_ROOT = Path(__file__).resolve().parent.parent
#: Where the evaluation commands write their files by default, relative to the working directory.
DEFAULT_RESULTS_DIR = Path("results")


def machine_description() -> str:
    """CPU model, core count and OS, for benchmark tables."""
    try:
        lines = CPU_INFO.read_text().splitlines()
    except OSError:
        lines = []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    model = names[0] if names else platform.processor() or "unknown CPU"
    system = f"{platform.system()} {platform.release()}"
    return f"{model}, {os.cpu_count()} cores, {system}, Python {platform.python_version()}"


def model_description(settings: Settings) -> str:
    """The generation model (embedded file, or provider and name) and the grader when it differs."""
    generator = resolve_spec(settings, "generate")
    grader = resolve_spec(settings, "grade")

    def name(spec_provider: str, spec_model: str, base_url: str | None) -> str:
        if spec_provider == "local":
            return f"{CATALOG[settings.local_model].file_name} (embedded)"
        return f"{spec_provider}:{spec_model}" + (f" @ {base_url}" if base_url else "")

    described = name(generator.provider, generator.model, generator.base_url)
    graded = name(grader.provider, grader.model, grader.base_url)
    return described if graded == described else f"{described}; grader {graded}"


def code_commit(code_root: Path = PROJECT_ROOT) -> str:
    """The commit of the checkout that ran, '+dirty' with uncommitted changes outside results/ (where the
    benchmark itself writes): a number is only reproducible with the code that produced it."""

    def git(*args: str) -> str:
        command = ["git", "-C", str(code_root), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!results")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit or "unknown") + ("+dirty" if dirty else "")


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS has none): latencies mean little without it."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
