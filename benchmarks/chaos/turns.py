"""`python -m benchmarks chaos --suite turns`: concurrent turns on one thread, as processes of the CLI and as
threads of one process. Each turn asks about its own word, so the stored history shows which turns were lost,
stored twice, left without an answer, or rewritten with another turn's history (mixed)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.chaos.corpora import ALPHA
from benchmarks.chaos.limits import CONCURRENT_TIMEOUT_S, CONCURRENT_TURNS
from benchmarks.chaos.probe import Probe
from benchmarks.chaos.runner import ChaosRunner, last_json
from benchmarks.chaos.threads import thread_messages

#: One distinct word per concurrent turn: the stored history must hold each exactly once, answered.
TURN_WORDS = ("kiwi", "mango", "papaya", "quince", "lychee", "guava", "durian", "feijoa", "loquat", "medlar")

#: The same turns as threads of one process, one graphs.runner.Session shared by all of them.
THREADED_TURNS_SNIPPET = """
import json
from concurrent.futures import ThreadPoolExecutor
from config.settings import get_settings
from graphs.runner import Session
from state.context import Context
session = Session(get_settings())
words = WORDS
def turn(word):
    try:
        out = session.ask(f"Is the {word} a planet?", thread_id="THREAD_ID", context=Context(tenant="alpha"))
        return {"word": word, "ok": True, "standalone": out.get("standalone_question", "")}
    except Exception as error:
        return {"word": word, "ok": False, "error": f"{type(error).__name__}: {str(error)[:200]}"}
with ThreadPoolExecutor(len(words)) as pool:
    print(json.dumps(list(pool.map(turn, words))))
"""


def turn_verdict(
    messages: list[list[str]], outcomes: dict[str, dict[str, Any]]
) -> tuple[dict[str, float], list[str]]:
    """Lost, duplicated, unanswered and mixed turns of a thread that `outcomes` asked on concurrently.

    A turn whose caller got a clear error (thread busy) was refused, not lost: the user knows. A turn whose
    caller got an answer must be stored exactly once with one AI message right after it, and its standalone
    question must not carry the word of a turn that is not stored before it: that turn was not yet part of
    its history, so the question was rewritten with another turn's history (overlapping turns). Words of the
    turns stored before it are its thread's own history, which contextualize may legitimately use.
    """
    figures = {"lost": 0.0, "duplicated": 0.0, "unanswered": 0.0, "mixed": 0.0, "refused": 0.0}
    notes: list[str] = []
    for word, outcome in outcomes.items():
        positions = [i for i, (kind, text) in enumerate(messages) if kind == "human" and word in text]
        if not outcome.get("ok"):
            figures["refused"] += 1
            if positions:
                notes.append(f"{word}: refused but stored")
                figures["duplicated"] += len(positions)
            continue
        if not positions:
            figures["lost"] += 1
            notes.append(f"{word}: answered but not stored")
            continue
        if len(positions) > 1:
            figures["duplicated"] += len(positions) - 1
            notes.append(f"{word}: stored {len(positions)} times")
        for position in positions:
            following = messages[position + 1] if position + 1 < len(messages) else None
            if following is None or following[0] != "ai":
                figures["unanswered"] += 1
                notes.append(f"{word}: no answer right after it")
        earlier = {
            other
            for other in outcomes
            if any(k == "human" and other in t for k, t in messages[: positions[0]])
        }
        others = [
            other
            for other in outcomes
            if other != word and other not in earlier and other in outcome.get("standalone", "")
        ]
        if others:
            figures["mixed"] += 1
            notes.append(f"{word}: rewritten with {others}")
    return figures, notes


def concurrency_suite(runner: ChaosRunner, data_dir: Path) -> None:
    """8 processes, then 8 threads of one process, ask on the same thread at once."""
    words = TURN_WORDS[:CONCURRENT_TURNS]
    thread = "shared-process-thread"

    def one_process(word: str) -> dict[str, Any]:
        result = runner.rag(
            data_dir,
            "ask",
            f"Is the {word} a planet?",
            "--tenant",
            ALPHA,
            "--thread",
            thread,
            "--json",
            timeout=CONCURRENT_TIMEOUT_S,
        )
        payload = last_json(result.stdout) if result.returncode == 0 else None
        return {
            "ok": result.returncode == 0 and isinstance(payload, dict),
            "standalone": (payload or {}).get("standalone_question", "") if isinstance(payload, dict) else "",
            "trace": result.traceback,
            "hung": result.hung,
        }

    with ThreadPoolExecutor(len(words)) as pool:
        outcomes = dict(zip(words, pool.map(one_process, words), strict=True))
    record_turns(runner, "8 processes", thread_messages(runner, data_dir, thread, ALPHA), outcomes)

    thread = "shared-thread-thread"
    snippet = THREADED_TURNS_SNIPPET.replace("WORDS", repr(list(words))).replace("THREAD_ID", thread)
    result = runner.python_snippet(data_dir, snippet, timeout=CONCURRENT_TIMEOUT_S)
    rows = last_json(result.stdout) or []
    outcomes = {row["word"]: row for row in rows if isinstance(row, dict)}
    for word in words:
        outcomes.setdefault(word, {"ok": False, "error": "snippet failed", "hung": result.hung})
    record_turns(runner, "8 threads", thread_messages(runner, data_dir, thread, ALPHA), outcomes)


def record_turns(
    runner: ChaosRunner, name: str, messages: list[list[str]], outcomes: dict[str, dict[str, Any]]
) -> None:
    """Record the verdict of one round of concurrent turns, with the traces and hangs of their callers."""
    figures, notes = turn_verdict(messages, outcomes)
    traces = sum(1.0 for outcome in outcomes.values() if outcome.get("trace"))
    hangs = sum(1.0 for outcome in outcomes.values() if outcome.get("hung"))
    harm = figures["lost"] + figures["duplicated"] + figures["unanswered"] + figures["mixed"]
    runner.record(
        Probe(
            "turns",
            name,
            harm == 0 and traces == 0 and hangs == 0,
            "; ".join(notes[:6]) + (f" (+{len(notes) - 6} more)" if len(notes) > 6 else ""),
            {**figures, "traces": traces, "hangs": hangs},
        )
    )
