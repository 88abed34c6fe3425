"""The prompt-cache campaign's pure parts (benchmarks/prompt_cache.py): requests, summaries, table."""

from __future__ import annotations

from pathlib import Path

from benchmarks.prompt_cache import (
    SOURCE_CHARS,
    SOURCES_PER_REQUEST,
    CacheCall,
    answer_requests,
    markdown_table,
    source_texts,
    summarise,
)
from prompts.answer import SOURCES_CLOSE, SOURCES_OPEN


def call(read: int, reused: int, prompt_ms: float) -> CacheCall:
    return CacheCall("simple", True, read + reused, read, reused, prompt_ms, prompt_ms / 1000)


def test_every_request_shares_the_system_message_and_rotates_its_sources() -> None:
    texts = ["alpha text", "beta text", "gamma text", "delta text"]
    requests = answer_requests("SYSTEM RULES", ["Q one?", "Q two?"], texts)
    assert [request[0] for request in requests] == [{"role": "system", "content": "SYSTEM RULES"}] * 2
    first, second = (request[1]["content"] for request in requests)
    assert SOURCES_OPEN in first and SOURCES_CLOSE in first and first.endswith("Q one?")
    assert "[1] alpha text" in first and f"[{SOURCES_PER_REQUEST}] gamma text" in first
    assert "[1] beta text" in second and "alpha text" not in second


def test_the_summary_leaves_out_the_call_that_filled_the_cache() -> None:
    summary = summarise([call(600, 0, 9000.0), call(200, 400, 3000.0), call(220, 380, 3400.0)])
    assert summary["requests"] == 3
    assert summary["first_call_prompt_ms"] == 9000.0
    assert summary["tokens_reused_mean"] == 390.0
    assert summary["prompt_ms_p50"] == 3200.0
    assert summary["prompt_tokens_mean"] == 600.0


def test_the_table_has_a_row_per_template_and_setting() -> None:
    row = summarise([call(600, 0, 9000.0), call(200, 400, 3000.0)])
    lines = markdown_table({"summaries": {"simple/on": row, "simple/off": row}})
    assert len(lines) == 4
    assert lines[2].startswith("| simple | on | 600 | 200 | 400 | 3000 |")


def test_sources_come_from_the_english_documents_cut_to_size(tmp_path: Path) -> None:
    (tmp_path / "long.md").write_text("# Title\n\n" + "word " * 400, encoding="utf-8")
    (tmp_path / "other_zh.md").write_text("# 标题\n\n长城很长。", encoding="utf-8")
    texts = source_texts(tmp_path)
    assert len(texts) == 1
    assert len(texts[0]) == SOURCE_CHARS and "word" in texts[0]
