"""The JSON of `rag ask --json`, apart from the graph runner: a command that hands its question to a server
prints it too.
"""

from __future__ import annotations

from typing import Any

from service.answer_judgement import judgement


def output_json(result: dict[str, Any]) -> dict[str, Any]:
    """The parts of a turn's output state a script reads."""
    judged = judgement(result)
    return {
        "thread_id": result.get("thread_id"),
        "answer_id": result.get("answer_id") or None,
        "question": result.get("question"),
        "standalone_question": result.get("standalone_question"),
        "short_answer": result.get("short_answer") or "",
        "answer": result.get("answer"),
        "not_found": result.get("not_found", False),
        "confidence": judged["confidence"],
        "band": judged["band"],
        "not_found_reason": judged["not_found_reason"],
        "citations": result.get("citations", []),
        "sources": [
            {
                key: source.get(key)
                for key in ("chunk_id", "source", "title", "page", "doc_id", "score", "relevance")
            }
            for source in result.get("sources", [])
        ],
        "retrieved": [
            {key: doc.get(key) for key in ("chunk_id", "doc_id", "score", "relevance")}
            for doc in result.get("retrieved", [])
        ],
        "unsupported_sentences": result.get("unsupported_sentences", []),
        "strategy": result.get("strategy"),
        "analysis": result.get("analysis", {}),
        "iterations": {
            "retrieval_rounds": result.get("retrieval_rounds", 0),
            "generation_rounds": result.get("generation_rounds", 0),
        },
        "answer_grade": result.get("answer_grade", {}),
        "timings_ms": {key: round(value, 2) for key, value in (result.get("timings_ms") or {}).items()},
        "usage": result.get("usage", {}),
        "llm_calls": result.get("llm_calls", 0),
        "prompt_info": result.get("prompt_info", {}),
    }
