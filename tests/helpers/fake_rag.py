"""Test-only hook: the `rag` command line in a subprocess, with fake models installed.

Why: a subprocess cannot inherit the test's `use_resources`, and product code must carry no test switch. This
script installs the fakes (fake embeddings, a chat model scripted per task) as the process resources, then
runs the real CLI app with the given arguments. With `FAKE_RAG_RECORD=<file>` it appends one JSON line per
contextualize call (the history the turn saw), so a test can check which history each concurrent turn used.

Usage: python tests/helpers/fake_rag.py ask "QUESTION" --thread T --tenant A --json
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from langchain_core.messages import BaseMessage  # noqa: E402

from tests.fakes import TaskChatModel  # noqa: E402

#: The analysis of every question: no documents needed, so a turn goes straight to the answer (for questions
#: the heuristic analysis skips too, e.g. arithmetic: nodes/analyze.py retrieves unless both say no).
NO_RETRIEVAL_ANALYSIS = json.dumps(
    {"query_type": "SIMPLE_FACT", "complexity": 1, "needs_retrieval": False, "wants_details": False}
)
#: The grade of every answer: good enough to stop at the first attempt.
GOOD_GRADE = json.dumps(
    {
        "grounded": True,
        "answers_question": True,
        "relevance": 1.0,
        "accuracy": 1.0,
        "completeness": 1.0,
        "clarity": 1.0,
    }
)
_LAST = re.compile(r"Last message:\s*(.+)")
_USER = re.compile(r"^User:\s*(.+)$", re.MULTILINE)


def answer_for(question: str) -> str:
    """The fake answer to a question: names the question's fruit, so a test can pair answers to questions."""
    return f"Answer to: {question.strip()}"


def turn_model(record: list[dict[str, object]] | None = None) -> TaskChatModel:
    """A model for concurrent-turn tests: contextualize returns the question unchanged (recording the history
    it was shown), analysis says no retrieval, the answer repeats the question it answers."""

    def contextualize(messages: list[BaseMessage]) -> str:
        prompt = str(messages[-1].content)
        match = _LAST.search(prompt)
        question = match.group(1).strip() if match else ""
        history = _USER.findall(prompt.split("Last message:")[0])
        if record is not None:
            record.append({"question": question, "history_questions": history})
        return question

    def chat(messages: list[BaseMessage]) -> str:
        return answer_for(str(messages[-1].content).strip().splitlines()[-1])

    return TaskChatModel(
        replies={
            "contextualize": contextualize,
            "analyze": NO_RETRIEVAL_ANALYSIS,
            "chat": chat,
            "grade_answer": GOOD_GRADE,
        },
        fallback="ok",
    )


def main(argv: list[str]) -> int:
    from config.settings import get_settings
    from nodes.resources import use_resources
    from retrieval.knowledge_base import KnowledgeBase
    from service.cli import app
    from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, fake_resources

    record: list[dict[str, object]] = []
    settings = get_settings()
    model = turn_model(record)
    knowledge_base = KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    resources = fake_resources(knowledge_base, model, strength="strong")
    code = 0
    try:
        with use_resources(resources):
            app(args=argv, prog_name="rag")
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        target = os.environ.get("FAKE_RAG_RECORD")
        if target:
            with open(target, "a", encoding="utf-8") as handle:
                for row in record:
                    handle.write(json.dumps(row) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
