"""Every ```python and shell block of README.md and docs/**/*.md runs here, so a snippet that breaks fails CI.

Why: readers copy these blocks as they are; a snippet that needs an import the text does not show, or that is
not even valid Python, is a bug of the documentation that no other test sees. Each block runs on its own
(a block names every import it uses), in a fresh working directory whose data folder (RAG_DATA_DIR) holds the
sample corpus, indexed, and one conversation on thread `t1` (what a reader has after the README's first
commands). Python blocks run with this interpreter (the project's .venv), shell blocks with `bash -e -o
pipefail` and the venv's `bin` first on PATH (`rag ...`). The models are the fake OpenAI-compatible endpoint
of tests.fake_openai, chosen by settings as a deployment would, so nothing loads a model or downloads.

A block that cannot run here (it starts a server, needs a key, a GPU, minutes of model time, or is the
install itself, or a synopsis of options rather than commands) says so in its first line, the README's
convention for it:

    # Not run by the tests: <why>

A marker without a reason fails, and a marked Python block must still compile. Blocks of other languages
(mermaid, json, text) are not code to run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import CACHE_OFF, REPO_ROOT
from tests.fake_openai import FakeOpenAIServer
from tests.helpers.api_server import free_port
from tests.helpers.langgraph_dev import environment_without_settings

#: The markdown files whose blocks must run.
DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
#: Fence language -> how the block runs; other languages are not run.
RUNNERS = {
    "python": "python",
    "py": "python",
    "bash": "bash",
    "sh": "bash",
    "shell": "bash",
    "console": "console",
}
#: The first line of a block the tests do not run: `# Not run by the tests: <reason>`.
MARKER = re.compile(r"#\s*not run by the tests\b\s*:?\s*(?P<reason>.*)", re.IGNORECASE)
#: Seconds one block may take: the slowest runs a few graph turns against the fake endpoint (a few seconds);
#: far more means it hangs.
BLOCK_TIMEOUT_S = 120
#: Every model call gets this reply (a cited answer about the sample corpus).
REPLY = "Jupiter is the largest planet in the Solar System [1]."
VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it starts (1-based line of the opening fence), its language and code."""

    path: Path
    line: int
    language: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"

    @property
    def marker(self) -> re.Match[str] | None:
        """The not-run marker, when the block's first non-empty line is one."""
        first = next((line.strip() for line in self.code.splitlines() if line.strip()), "")
        return MARKER.fullmatch(first)


def code_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a markdown file, also those indented under a list item (the indent removed)."""
    blocks: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = re.fullmatch(r"(\s*)```\s*([\w+-]*)\s*", lines[index])
        if not opening:
            index += 1
            continue
        indent, language = len(opening.group(1)), opening.group(2).lower()
        body: list[str] = []
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            line = lines[end]
            body.append(line[min(indent, len(line) - len(line.lstrip())) :])
            end += 1
        assert end < len(lines), f"{path.name}:{index + 1}: a code block that is never closed"
        blocks.append(Block(path, index + 1, language, "\n".join(body) + "\n"))
        index = end + 1
    return blocks


ALL_BLOCKS = [block for path in DOCUMENTS for block in code_blocks(path) if block.language in RUNNERS]
TO_RUN = [block for block in ALL_BLOCKS if block.marker is None]
NOT_RUN = [block for block in ALL_BLOCKS if block.marker is not None]


def test_the_documents_have_blocks_to_run() -> None:
    """Guards the parser: the README's Python section alone has blocks that run."""
    assert any(block.path.name == "README.md" and block.language == "python" for block in TO_RUN)
    assert NOT_RUN, "the README's server recipes carry a not-run marker"


@pytest.mark.parametrize("block", NOT_RUN, ids=lambda block: block.name)
def test_a_block_not_run_says_why(block: Block) -> None:
    marker = block.marker
    assert marker is not None
    assert marker.group("reason").strip(), (
        f"{block.name}: the marker needs a reason: '# Not run by the tests: <why>'"
    )
    if RUNNERS[block.language] == "python":
        compile(block.code, block.name, "exec")  # still valid Python: a SyntaxError fails here


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """The fake models' base URL, shared by the module's blocks."""
    with FakeOpenAIServer(REPLY, free_port()) as fake:
        yield fake.base_url


def block_environment(base_url: str, data_dir: Path) -> dict[str, str]:
    """No RAG_* of the caller; the fake models, the given data folder, the venv's commands first on PATH."""
    return (
        environment_without_settings()
        | CACHE_OFF
        | {
            "RAG_DATA_DIR": str(data_dir),
            "RAG_EMBEDDING_PROVIDER": "openai",
            "RAG_EMBEDDING_BASE_URL": base_url,
            "RAG_EMBEDDING_API_KEY": "test",
            "RAG_LLM_PROVIDER": "openai",
            "RAG_LLM_BASE_URL": base_url,
            "RAG_LLM_API_KEY": "test",
            "RAG_LLM_MODEL": "fake",
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(REPO_ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    )


def run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The finished command; one that runs past BLOCK_TIMEOUT_S is killed and reported as exit 124 with
    what it printed (a block that starts a server never ends)."""
    try:
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as error:
        printed = [part.decode(errors="replace") if isinstance(part, bytes) else part or "" for part in
                   (error.stdout, error.stderr)]  # fmt: skip
        return subprocess.CompletedProcess(command, 124, printed[0], f"{printed[1]}\n(timed out)")


@pytest.fixture(scope="module")
def prepared_data(endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with the sample corpus indexed and a conversation on thread t1, built once and copied
    for each block (blocks write to it)."""
    root = tmp_path_factory.mktemp("docs-data")
    env = block_environment(endpoint, root / ".rag")
    for command in (
        ["rag", "ingest", str(REPO_ROOT / "samples" / "corpus")],
        ["rag", "ask", "Which planet is the largest in the Solar System?", "--thread", "t1"],
    ):
        done = run([str(VENV_BIN / command[0]), *command[1:]], root, env)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
    return root / ".rag"


def shell_commands(block: Block) -> str:
    """The block's shell code; of a `console` block (a transcript), only the lines after a `$ ` prompt."""
    if RUNNERS[block.language] != "console":
        return block.code
    return "".join(f"{line[2:]}\n" for line in block.code.splitlines() if line.startswith("$ "))


@pytest.mark.slow  # a process per block (a few seconds each; `rag doctor`'s three commands about 20 s)
@pytest.mark.parametrize("block", TO_RUN, ids=lambda block: block.name)
def test_the_block_runs(block: Block, endpoint: str, prepared_data: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data_dir = work / ".rag"
    shutil.copytree(prepared_data, data_dir)
    env = block_environment(endpoint, data_dir)
    if RUNNERS[block.language] == "python":
        script = work / "block.py"
        script.write_text(block.code, encoding="utf-8")
        done = run([sys.executable, str(script)], work, env)
    else:
        done = run(["bash", "-e", "-o", "pipefail", "-c", shell_commands(block)], work, env)
    assert done.returncode == 0, (
        f"{block.name} ({block.language}) exited {done.returncode}; fix the block, or start it with "
        f"'# Not run by the tests: <why>' if it cannot run in tests.\n"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )
