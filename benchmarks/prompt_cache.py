"""How much of each answer prompt llama.cpp's prompt cache serves, and what that saves.

Why it matters: every answer prompt starts with the same system message (the rules and worked examples of
prompts/answer.py), so a server that keeps a slot's prompt reads only the sources and the question anew.
llama.cpp's server does this by itself (`cache_prompt`, on by default); the engine sends nothing to ask for
it. This campaign measures it with the engine's own embedded server (the product's slot count) and its
own answer templates: the same requests once with `cache_prompt` on and once off, llama.cpp's own timings
(`prompt_n` tokens read, `cache_n` tokens reused, `prompt_ms`) per request.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from config.settings import LocalModelName, Settings
from evals.environment import machine_description
from models.local_catalog import CATALOG, find_model_file
from models.local_llm import PARALLEL_SLOTS, LocalLLMServer
from prompts.answer import ANSWER_SYSTEM_PROMPTS, ANSWER_USER_TEMPLATE_EN
from retrieval.loaders import load_file

#: Characters of each sample document given as one numbered source (about the evidence budget's 400 tokens
#: over three sources).
SOURCE_CHARS = 500
#: Sources per request.
SOURCES_PER_REQUEST = 3
#: Tokens each request may write: the cache changes prompt reading, not writing.
ANSWER_TOKENS = 8
#: Seconds one request may take on two busy cores.
REQUEST_TIMEOUT_S = 300.0
#: Answer templates measured (mode, language): the one naive uses and the one for factoid questions.
TEMPLATES: tuple[tuple[str, str], ...] = (("advanced", "en"), ("simple", "en"))
#: Largest document read from the sample corpus.
MAX_FILE_BYTES = 5_000_000


@dataclass(frozen=True)
class CacheCall:
    """One request's llama.cpp timings."""

    template: str
    cache_prompt: bool
    prompt_tokens: int
    tokens_read: int
    tokens_reused: int
    prompt_ms: float
    wall_s: float


def source_texts(corpus: Path) -> list[str]:
    """The first SOURCE_CHARS characters of every readable English document of `corpus`, by file name."""
    texts: list[str] = []
    for path in sorted(corpus.iterdir()):
        if not path.is_file() or path.name.endswith("_zh.md"):
            continue
        for document in load_file(path, MAX_FILE_BYTES)[:1]:
            text = " ".join(section.text for section in document.sections).strip()
            if text:
                texts.append(" ".join(text.split())[:SOURCE_CHARS])
    return texts


def answer_requests(system: str, questions: list[str], texts: list[str]) -> list[list[dict[str, str]]]:
    """One answer request per question: the template's system message, then SOURCES_PER_REQUEST numbered
    sources (rotating through `texts`, so each request's sources differ from the previous one's)."""
    requests = []
    for index, question in enumerate(questions):
        picked = [texts[(index + offset) % len(texts)] for offset in range(SOURCES_PER_REQUEST)]
        sources = "\n\n".join(f"[{number}] {text}" for number, text in enumerate(picked, start=1))
        human = ANSWER_USER_TEMPLATE_EN.format(sources=sources, question=question)
        requests.append([{"role": "system", "content": system}, {"role": "user", "content": human}])
    return requests


def measure(
    server: LocalLLMServer, template: str, requests: list[list[dict[str, str]]], cache_prompt: bool
) -> list[CacheCall]:
    """Every request once, in order, with `cache_prompt` as given; llama.cpp's timings of each."""
    calls = []
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        for messages in requests:
            body: dict[str, Any] = {
                "messages": messages,
                "max_tokens": ANSWER_TOKENS,
                "temperature": 0,
                "cache_prompt": cache_prompt,
            }
            payload, wall = server.chat_completion(body, timeout_s=REQUEST_TIMEOUT_S, client=client)
            timings = payload.get("timings") or {}
            read = int(timings.get("prompt_n") or 0)
            reused = int(timings.get("cache_n") or 0)
            calls.append(
                CacheCall(
                    template=template,
                    cache_prompt=cache_prompt,
                    prompt_tokens=read + reused,
                    tokens_read=read,
                    tokens_reused=reused,
                    prompt_ms=float(timings.get("prompt_ms") or 0.0),
                    wall_s=round(wall, 3),
                )
            )
    return calls


def summarise(calls: list[CacheCall]) -> dict[str, Any]:
    """Means and medians of one template and cache setting (the first call, which fills the cache, apart)."""
    steady = calls[1:] or calls
    return {
        "requests": len(calls),
        "prompt_tokens_mean": round(statistics.mean(call.prompt_tokens for call in steady), 1),
        "tokens_read_mean": round(statistics.mean(call.tokens_read for call in steady), 1),
        "tokens_reused_mean": round(statistics.mean(call.tokens_reused for call in steady), 1),
        "prompt_ms_p50": round(statistics.median(call.prompt_ms for call in steady), 1),
        "wall_s_p50": round(statistics.median(call.wall_s for call in steady), 3),
        "first_call_prompt_ms": round(calls[0].prompt_ms, 1),
    }


def run_prompt_cache(
    settings: Settings,
    *,
    model: LocalModelName,
    questions: list[str],
    corpus: Path,
    progress: Callable[[str], None] = lambda _line: None,
) -> dict[str, Any]:
    """The report: per answer template, the same requests with the prompt cache on, then off."""
    texts = source_texts(corpus)
    if not texts:
        raise ValueError(f"no readable English document in {corpus}")
    server = LocalLLMServer(
        find_model_file(model),
        n_ctx=settings.local_n_ctx,
        threads=settings.local_threads,
        alias=model,
        parallel=PARALLEL_SLOTS,
        chat_template=CATALOG[model].chat_template,
    )
    server.start()
    calls: list[CacheCall] = []
    summaries: dict[str, Any] = {}
    started = time.monotonic()
    try:
        for mode, language in TEMPLATES:
            system = ANSWER_SYSTEM_PROMPTS[(mode, language)]
            requests = answer_requests(system, questions, texts)
            # On first: a request the server has seen before would be served whole from its cache, so
            # the "on" pass must meet every request fresh; "off" reads everything whatever came before.
            for cache_prompt in (True, False):
                measured = measure(server, mode, requests, cache_prompt)
                calls.extend(measured)
                key = f"{mode}/{'on' if cache_prompt else 'off'}"
                summaries[key] = summarise(measured)
                progress(f"{key}: {summaries[key]}")
    finally:
        server.stop()
    return {
        "model": model,
        "slots": PARALLEL_SLOTS,
        "threads": settings.local_threads,
        "questions": len(questions),
        "sources_per_request": SOURCES_PER_REQUEST,
        "answer_tokens": ANSWER_TOKENS,
        "machine": machine_description(),
        "seconds": round(time.monotonic() - started, 1),
        "summaries": summaries,
        "calls": [asdict(call) for call in calls],
    }


def markdown_table(report: dict[str, Any]) -> list[str]:
    """One row per template and cache setting."""
    lines = [
        "| template | prompt cache | prompt tokens | read | reused | prompt ms p50 | request s p50 |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, row in report["summaries"].items():
        template, cache = key.split("/")
        lines.append(
            f"| {template} | {cache} | {row['prompt_tokens_mean']:.0f} | {row['tokens_read_mean']:.0f} | "
            f"{row['tokens_reused_mean']:.0f} | {row['prompt_ms_p50']:.0f} | {row['wall_s_p50']:.2f} |"
        )
    return lines
