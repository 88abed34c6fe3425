"""notebooks/quickstart.ipynb runs from top to bottom with the embedded models and the SQLite checkpointer.

Why executed here: a notebook that is only read rots silently when an API it shows changes. nbclient runs it
in a kernel of this venv's Python (a kernelspec written to a temporary JUPYTER_PATH points at
sys.executable, so the kernel imports exactly the code under test), and the test reads the outputs each
step prints. Slow: it loads the real embedding model and the embedded LLM.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

NOTEBOOK = REPO_ROOT / "notebooks" / "quickstart.ipynb"
KERNEL_NAME = "agentic-rag-venv"
#: Whole-notebook bound for the cell timeout (each cell is far below it on 2 cores).
CELL_TIMEOUT_S = 600


def venv_kernelspec(root: Path) -> Path:
    """A kernelspec named KERNEL_NAME that starts this interpreter's ipykernel; returns the JUPYTER_PATH."""
    spec_dir = root / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "agentic-rag (.venv)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return root


def cell_text(cell: dict) -> str:  # type: ignore[type-arg]
    """Everything a code cell printed (stream outputs and results)."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


@pytest.mark.slow
def test_quickstart_notebook_runs_every_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("JUPYTER_PATH", str(venv_kernelspec(tmp_path / "jupyter")))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=KERNEL_NAME,
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError (with the cell and traceback) on the first failing cell

    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.get("execution_count") for cell in code_cells), "a code cell did not run"
    errors = [
        output for cell in code_cells for output in cell.get("outputs", []) if output.output_type == "error"
    ]
    assert errors == []
    text = "\n".join(cell_text(cell) for cell in code_cells)
    lines = {
        line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in text.splitlines() if ":" in line
    }

    assert lines["INGESTED"].startswith("7 files") and "0 failed" in lines["INGESTED"]
    assert lines["ANSWER"] and lines["STRATEGY"]
    assert "solar_system.md" in lines["SOURCES"]
    assert "generate" in lines["NODES"] and int(lines["STREAMED TOKENS"]) > 0
    assert int(lines["HISTORY"].split()[0]) > 10 and "4 messages" in lines["HISTORY"]
    assert lines["REPLAY"] and lines["FORK"]
    assert "python_history.txt" in lines["FORK SOURCES"]  # the fork searched its own question
    assert lines["INTERRUPTED BEFORE"] == "('generate',)"
    assert lines["RESUMED"]
