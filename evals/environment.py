"""What a benchmark ran on: the machine and the language model, written into every result file.

Numbers without their machine and model cannot be compared, so every evaluation report carries both; one
function each keeps the wording identical across the retrieval, latency, QA and router reports.
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
#: Where the evaluation commands write their files by default (`rag eval qa`'s per-question records under
#: runs/), relative to the working directory: the repository root when run from there.
DEFAULT_RESULTS_DIR = Path("results")


def machine_description() -> str:
    """CPU model, core count and OS, for benchmark tables."""
    model = platform.processor() or "unknown CPU"
    try:
        for line in CPU_INFO.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    system = f"{platform.system()} {platform.release()}"
    return f"{model}, {os.cpu_count()} cores, {system}, Python {platform.python_version()}"


def model_description(settings: Settings) -> str:
    """The generation model as a reader of the results needs it: the embedded file, or provider and name.

    Reads only the settings (starts no model); the grader is named too when it differs.
    """
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
    """The commit of the checkout that ran (with '+dirty' when it has uncommitted changes outside results/,
    where the running benchmark itself writes), for the record: a number is only reproducible with the code
    that produced it."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(code_root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(code_root),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":!results",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit or "unknown") + ("+dirty" if dirty else "")


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS has none): latencies mean little without it,
    since a benchmark sharing the cores runs slower. A run alone adds about its own thread count."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
