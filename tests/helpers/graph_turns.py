"""Answer scripted turns with the real compiled graph on a SQLite checkpoint file, with the fake embeddings
and a scripted chat model (tests/test_graph_memory.py): in the test's process or in a fresh one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config.settings import load_settings
from graphs.rag import build_graph
from nodes.resources import Resources, use_resources
from persistence.checkpointer import sqlite_checkpointer
from retrieval.ingest import ingest_paths
from retrieval.knowledge_base import KnowledgeBase
from state.context import Context
from tests.fakes import FAKE_MODEL_KEY, HashEmbeddings, TaskChatModel


def answer_turns(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Ingest `spec["corpus"]` into `spec["data_dir"]`, answer `spec["turns"]` ([thread, question] pairs) on
    the checkpoint file `spec["checkpoint"]` with `spec["replies"]` / `spec["strengths"]`, and report each
    turn: its standalone question, answer, thread messages, model tasks and contextualize prompts."""
    settings = load_settings(data_dir=Path(spec["data_dir"]))
    kb = KnowledgeBase(settings, base_model=HashEmbeddings(), model_key=FAKE_MODEL_KEY)
    checkpointer = sqlite_checkpointer(path=Path(spec["checkpoint"]))
    try:
        ingest_paths(kb, [Path(spec["corpus"])])
        model = TaskChatModel(replies=spec["replies"])
        resources = Resources(
            settings, knowledge_base=kb, generator=model, grader=model, strengths=spec["strengths"]
        )
        graph = build_graph(checkpointer)
        turns = []
        with use_resources(resources):
            for thread, question in spec["turns"]:
                before = len(model.calls)
                out = graph.invoke(
                    {"question": question},
                    config={"configurable": {"thread_id": thread}},
                    context=Context(top_k=2, answerer="model"),  # the reply kept as is: this is about memory
                )
                calls = model.calls[before:]
                turns.append(
                    {
                        "thread": thread,
                        "standalone_question": out["standalone_question"],
                        "answer": out["answer"],
                        "messages": [[message.type, message.content] for message in out["messages"]],
                        "tasks": [task for task, _ in calls],
                        "contextualize_prompts": [
                            str(messages[-1].content) for task, messages in calls if task == "contextualize"
                        ],
                    }
                )
        return turns
    finally:
        checkpointer.conn.close()
        kb.close()
