"""What a new user waits for before the engine does any work of its own: cold `rag ask`, a cache hit,
`rag serve` until it answers, and `rag ask` handed to a running server.

Each figure is the wall time of a fresh `python -m service.cli` process (as a user's shell starts `rag`),
over a data folder of its own with the sample corpus ingested once:
- `cold_ask_overhead_s`: a cold `rag ask --json` (the semantic cache off) minus the answer's own
  `timings_ms` (its nodes' work): imports, settings, opening the stores; `cold_ask_analyze_s` is the node
  where a cold process ran the model self-test;
- `cache_hit_s`: `rag ask` of a question asked before, the cache on (the repeat is what is timed), and
  `cache_hit_lookup_s` its cache_lookup node (where a cold process loaded the embedding model);
- `serve_ready_s`: `rag serve` started until GET /health answers 200 (the server loads its runner, stores
  and models after that, in the background); `serve_first_answer_s`: started until a `rag ask` sent at that
  moment has its answer (the rest of the warm-up, then the model's first, uncached prompt);
- `ask_via_server_s` and its overhead: `rag ask` while that server runs (a checkout without the hand-off
  answers in-process then, which is the comparison).
Medians of `--runs` runs. `--repo` measures another checkout (e.g. a `git worktree` of an earlier commit)
with this interpreter: its own code is imported (its root is the child's working directory).

    python -m benchmarks cold-start [--repo DIR] [--runs N] [--label NAME] [--json results/cold_start.json]
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer

from evals.environment import machine_description
from nodes.record_turn import SUB_TIMINGS

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The corpus ingested (small: the figures are about start-up, not about search over many files).
DEFAULT_CORPUS = REPO_ROOT / "samples" / "corpus"
#: The question asked (its answer is in the sample corpus).
DEFAULT_QUESTION = "Which planet is the largest in the Solar System?"
#: Timed runs of each figure (medians are reported).
DEFAULT_RUNS = 3
#: Seconds one CLI command may take before the benchmark gives up on it.
COMMAND_TIMEOUT_S = 600.0
#: Seconds `rag serve` may take to answer GET /health.
SERVE_READY_TIMEOUT_S = 300.0
#: Seconds between two GET /health polls while the server starts.
SERVE_POLL_S = 0.1


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(data_dir: Path, port: int, *, cache: bool) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAG_")}
    env.update(
        {
            "RAG_DATA_DIR": str(data_dir),
            "RAG_API_HOST": "127.0.0.1",
            "RAG_API_PORT": str(port),
            "RAG_CACHE_ENABLED": "true" if cache else "false",
        }
    )
    return env


def _cli(repo: Path, env: dict[str, str], *args: str) -> tuple[float, str]:
    """Run `rag ARGS` in a fresh interpreter of `repo`; its wall seconds and stdout (raises on failure)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"rag {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.stdout


def _ask(repo: Path, env: dict[str, str], question: str) -> dict[str, float]:
    """One `rag ask --json`: wall seconds, the answer's own work (its nodes' timings; the model and
    retrieval parts are inside them), the difference, and the two nodes a cold process used to load
    models in (cache_lookup: the embedding model; analyze: the model self-test)."""
    wall, stdout = _cli(repo, env, "ask", question, "--json")
    timings = json.loads(stdout).get("timings_ms") or {}
    work = sum(float(ms) for key, ms in timings.items() if key not in SUB_TIMINGS) / 1000
    return {
        "wall_s": wall,
        "work_s": work,
        "overhead_s": wall - work,
        "cache_lookup_s": float(timings.get("cache_lookup", 0.0)) / 1000,
        "analyze_s": float(timings.get("analyze", 0.0)) / 1000,
    }


def _median(runs: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(run[key] for run in runs), 3)


def _serve(repo: Path, env: dict[str, str], port: int) -> tuple[subprocess.Popen[bytes], float]:
    """Start `rag serve` and wait until GET /health answers 200; the process and the seconds it took."""
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = started + SERVE_READY_TIMEOUT_S
    while time.perf_counter() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"rag serve exited {server.returncode} before answering")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as reply:
                if reply.status == 200:
                    return server, time.perf_counter() - started
        except OSError:
            pass
        time.sleep(SERVE_POLL_S)
    server.terminate()
    raise RuntimeError(f"rag serve did not answer GET /health within {SERVE_READY_TIMEOUT_S:g} s")


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def measure(repo: Path, corpus: Path, question: str, runs: int) -> dict[str, Any]:
    """Every figure of one checkout (see the module docstring)."""
    root = Path(tempfile.mkdtemp(prefix="cold-start-"))
    try:
        port = _free_port()
        data_dir = root / "rag"
        uncached = _environment(data_dir, port, cache=False)
        cached = _environment(data_dir, port, cache=True)
        _cli(repo, uncached, "ingest", str(corpus))
        _ask(repo, uncached, question)  # unmeasured: the .pyc files and the page cache warm
        cold = [_ask(repo, uncached, question) for _ in range(runs)]
        _ask(repo, cached, question)  # stores the answer
        hits = [_ask(repo, cached, question) for _ in range(runs)]
        server, ready_s = _serve(repo, uncached, port)
        try:
            first = _ask(repo, uncached, question)  # waits for the rest of the warm-up; cold prompt cache
            via_server = [_ask(repo, uncached, question) for _ in range(runs)]
        finally:
            _stop(server)
        return {
            "cold_ask_wall_s": _median(cold, "wall_s"),
            "cold_ask_work_s": _median(cold, "work_s"),
            "cold_ask_overhead_s": _median(cold, "overhead_s"),
            "cold_ask_analyze_s": _median(cold, "analyze_s"),
            "cache_hit_s": _median(hits, "wall_s"),
            "cache_hit_lookup_s": _median(hits, "cache_lookup_s"),
            "serve_ready_s": round(ready_s, 3),
            "serve_first_answer_s": round(ready_s + first["wall_s"], 3),
            "ask_via_server_s": _median(via_server, "wall_s"),
            "ask_via_server_overhead_s": _median(via_server, "overhead_s"),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _commit(repo: Path) -> str:
    """The checkout's commit, marked `+uncommitted` when its tracked files differ from it."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, check=False
    )
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    commit = head.stdout.strip() or "unknown"
    return f"{commit}+uncommitted" if changed.stdout.strip() else commit


def eval_cold_start(
    repo: Annotated[Path, typer.Option(help="Checkout to measure (its code is imported).")] = REPO_ROOT,
    corpus: Annotated[Path, typer.Option(help="Folder ingested before the questions.")] = DEFAULT_CORPUS,
    question: Annotated[str, typer.Option(help="The question asked.")] = DEFAULT_QUESTION,
    runs: Annotated[
        int, typer.Option(min=1, help="Timed runs per figure (medians reported).")
    ] = DEFAULT_RUNS,
    label: Annotated[str, typer.Option(help="Name of this measurement in the JSON file.")] = "current",
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Add the figures under `label` to this JSON file.")
    ] = None,
) -> None:
    """Cold `rag ask` overhead, cache-hit wall, `rag serve` ready and `rag ask` through a running server."""
    if not (repo / "service" / "cli" / "__main__.py").is_file():
        raise typer.BadParameter(f"{repo} is not a checkout of this engine", param_hint="--repo")
    if not corpus.is_dir():
        raise typer.BadParameter(f"{corpus} is not a folder", param_hint="--corpus")
    figures = {
        "commit": _commit(repo),
        "runs": runs,
        **measure(repo.resolve(), corpus.resolve(), question, runs),
    }
    typer.echo(json.dumps({label: figures}, indent=2))
    if json_out is not None:
        report: dict[str, Any] = json.loads(json_out.read_text()) if json_out.is_file() else {}
        report["machine"] = machine_description()
        report["question"] = question
        report["corpus_files"] = sum(1 for path in corpus.rglob("*") if path.is_file())
        report.setdefault("measurements", {})[label] = figures
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, indent=2) + "\n")
