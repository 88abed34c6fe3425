"""The seed API's QueryRequest as an engine run, and the run's result as a QueryResponse (docs/api-seed.md).

A QueryRequest is the run of /generate (run_request.run_spec) plus the seed's switches: `conversation_id` is
the thread and the run's conversation (memories, summaries, director) without scoping retrieval to it; the
mode, model, Self-RAG, HyDE and reflection switches set the run's context, and `metadata.features` says which
ran. The RAGResponse fields of /generate and /generate/stream are built here too.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import PurePath
from typing import Any

from answering.judge import model_calibrator
from config.settings import Settings
from core.text import strip_references
from graphs.runner import new_thread_id
from nodes.reflection import ten_point
from nodes.resources import get_resources
from retrieval.search import BM25_WEIGHT, DENSE_WEIGHT
from retrieval.search_depth import ADVANCED_QUERIES, PRECISE_WEIGHTS
from service.answer_judgement import judgement
from service.api.engine import RunSpec
from service.api.errors import ApiError
from service.api.run_request import run_spec
from service.api.runtime import ApiState
from service.api.schemas import GenerateRequest
from service.api.seed_schemas import (
    CitationInfo,
    QueryRequest,
    QueryResponse,
    RAGCitation,
    RAGMetadata,
    SourceInfo,
)
from state.context import Context

#: The graph's nodes whose time is a RAGResponse's `rewrite_time`.
REWRITE_STAGES = ("contextualize", "rewrite", "reformulate")


def configured_models(settings: Settings) -> list[str]:
    """The models a request may name: RAG_LLM_MODEL, RAG_GRADER_MODEL and RAG_API_MODELS."""
    names = [settings.llm_model, settings.grader_model or "", *settings.api_models.split(",")]
    return list(dict.fromkeys(name.strip() for name in names if name and name.strip()))


def check_model(model: str | None, settings: Settings) -> None:
    """422 naming the field when `model` is not a configured one."""
    allowed = configured_models(settings)
    if model and model not in allowed:
        raise ApiError(
            422,
            "ValidationError",
            f"model: {model!r} is not a configured model; choose one of {', '.join(allowed)} "
            "(RAG_LLM_MODEL, RAG_GRADER_MODEL, RAG_API_MODELS)",
            "model",
        )


def seed_spec(body: QueryRequest, tenant: str, state: ApiState) -> RunSpec:
    """The engine run of a QueryRequest (run_request.run_spec, then the seed's switches on its context)."""
    check_model(body.model, state.settings)
    generate = GenerateRequest(
        query=body.query,
        tenant_id=body.tenant_id,
        thread_id=body.conversation_id or new_thread_id(),
        mode=body.mode,
        top_k=body.top_k,
        temperature=body.temperature,
        system_prompt=body.system_prompt,
        include_citations=body.enable_citations,
        filters=body.filters,
        directory=body.directory,
        rerank=body.rerank,
    )
    spec = run_spec(generate, tenant, state)
    if body.conversation_id:
        spec.inputs["conversation_id"] = body.conversation_id
        # the whole corpus searched: scoped to the conversation, a seed follow-up would find nothing
        spec.inputs["conversation_scopes_retrieval"] = False
    switches: dict[str, Any] = {
        "model": body.model or None,
        "self_rag": body.enable_self_rag,
        "max_iterations": body.max_reflection_rounds,
        "retry_strategy": body.retry_strategy,
        "rewrite": first_search_rewrite(body, spec.context.rewrite),
        "hyde": False if body.enable_hyde is False else None,
    }
    spec.context = replace(
        spec.context, **{key: value for key, value in switches.items() if value is not None}
    )
    return spec


def first_search_rewrite(body: QueryRequest, configured: str) -> str:
    """The run's rewrite method from the request's query rewriting and HyDE switches."""
    rewrite = configured
    if body.enable_query_rewriting is False:
        rewrite = "none"
    elif body.enable_query_rewriting and rewrite == "none":
        rewrite = "auto"
    if body.enable_hyde:
        return "hyde"
    if body.enable_hyde is False and rewrite == "hyde":
        return "auto"
    return rewrite


def confident_score(context: Context) -> float:
    """The notes assistant's `min_score` (1-10): the answering calibrator's confident threshold x 10."""
    identity = get_resources().model_identity("generate", context)
    return ten_point(model_calibrator(identity).thresholds.confident)


def reflection_report(
    context: Context, result: dict[str, Any], events: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The notes assistant's view of the run: the first search's rewrite, each reflection round and retry."""
    first: dict[str, Any] = next(
        (e["data"] for e in events if e.get("event") == "query_rewritten" and e["data"].get("round") == 1),
        {},
    )
    searched = str(result.get("standalone_question") or result.get("question") or "").strip()
    first_queries = [str(text).strip() for text in first.get("queries") or []]
    rewritten = len(first_queries) > 1 or any(text != searched for text in first_queries)
    grades = [event["data"] for event in events if event.get("event") == "answer_graded"]
    return {
        "query_rewriting": {"enabled": context.rewrite != "none", "ran": rewritten},
        "reflection": {
            "enabled": context.self_rag,
            "ran": bool(grades),
            "max_rounds": context.max_iterations,
            "min_score": confident_score(context),
            "retry_strategy": context.retry_strategy,
            "rounds": [
                {
                    "round": grade["round"],
                    "score": grade.get("reflection_score"),
                    "needs_improvement": grade.get("needs_improvement"),
                    "suggestions": grade.get("suggestions") or [],
                    "action": grade.get("action"),
                }
                for grade in grades
            ],
            "retries": [
                {
                    "round": data.get("round"),
                    "strategy": data.get("retry"),
                    "depth": data.get("depth", 1),
                    "queries": data.get("queries") or [],
                }
                for event in events
                if event.get("event") == "query_rewritten" and (data := event["data"]).get("retry")
            ],
        },
    }


def retrieval_plan(mode: str, top_k: int) -> dict[str, Any]:
    """What the mode does to retrieval (nodes.retrieve.mode_retrieval, nodes.rewrite), for the response."""
    dense, bm25 = PRECISE_WEIGHTS if mode == "precise" else (DENSE_WEIGHT, BM25_WEIGHT)
    advanced = mode == "advanced"
    return {
        "mode": mode,
        "queries": ADVANCED_QUERIES if advanced else "by strategy",
        "k_per_query": max(1, math.ceil(top_k / ADVANCED_QUERIES)) if advanced else top_k,
        "weights": {"dense": dense, "bm25": bm25},
    }


def first_rewrite(queries: list[Any], query: str) -> str:
    """The first of a round's search queries that differs from the question, else the question."""
    return next((str(text) for text in queries if str(text).strip() != query.strip()), query)


def rewritten_query(result: dict[str, Any], events: list[dict[str, Any]], query: str) -> str:
    """The question as searched: a follow-up's standalone rewrite, else the first differing search query."""
    standalone = str(result.get("standalone_question") or "").strip()
    if standalone and standalone != query.strip():
        return standalone
    for event in events:
        if event.get("event") == "query_rewritten":
            searched = first_rewrite(list(event["data"].get("queries") or []), query)
            if searched != query:
                return searched
    return query


def uncited(answer: str) -> str:
    """The answer without its citation markers (a request that asked for no citations)."""
    return strip_references(answer).strip()


def cited_answer(result: dict[str, Any], include_citations: bool) -> tuple[str, list[dict[str, Any]]]:
    """A RAGResponse's answer and citations, or the answer without markers when citations are off."""
    answer = str(result.get("answer") or "")
    return (answer, rag_citations(result)) if include_citations else (uncited(answer), [])


def citation_label(number: int) -> str:
    """A source's citation label, the marker the answer cites it with: `[n]`."""
    return f"[{number}]"


def _seconds(timings_ms: dict[str, Any], stages: tuple[str, ...]) -> float:
    return round(sum(float(timings_ms.get(stage) or 0.0) for stage in stages) / 1000, 3)


def stage_seconds(result: dict[str, Any], total_ms: float) -> dict[str, float]:
    """A RAGResponse's total and per-stage seconds (from the run's `timings_ms`)."""
    timings = result.get("timings_ms") or {}
    return {
        "total_time": round(total_ms / 1000, 3),
        "rewrite_time": _seconds(timings, REWRITE_STAGES),
        "retrieve_time": _seconds(timings, ("retrieve",)),
        "generate_time": _seconds(timings, ("generate",)),
    }


def rag_metadata(result: dict[str, Any], total_ms: float, model: str) -> dict[str, Any]:
    """A RAGResponse's metadata: seconds, passages found, the model and its token usage."""
    return RAGMetadata(
        **stage_seconds(result, total_ms),
        chunks_found=len(result.get("retrieved") or []),
        model=model,
        usage=token_usage(result),
    ).model_dump()


def token_usage(result: dict[str, Any]) -> dict[str, int]:
    """The run's prompt, completion and total tokens."""
    usage = result.get("usage") or {}
    prompt, completion = (int(usage.get(key, 0) or 0) for key in ("prompt_tokens", "completion_tokens"))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def rounded_timings(result: dict[str, Any]) -> dict[str, float]:
    """The run's per-stage milliseconds, rounded to 0.01 ms."""
    return {stage: round(float(ms), 2) for stage, ms in (result.get("timings_ms") or {}).items()}


def rag_citations(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's citations with a RAGResponse citation's fields beside the engine's own."""
    sources = list(result.get("sources") or [])
    cited: list[dict[str, Any]] = []
    for citation in result.get("citations") or []:
        marker = int(citation.get("marker", 0) or 0)
        doc = sources[marker - 1] if 0 < marker <= len(sources) else {}
        source = str(doc.get("source") or citation.get("source") or "")
        page = int(doc.get("page") or citation.get("page") or 0)
        url = (doc.get("metadata") or {}).get("url")
        seed = RAGCitation(
            source_id=marker,
            chunk_id=str(citation.get("chunk_id") or doc.get("chunk_id") or ""),
            content=str(doc.get("text") or ""),
            score=float(doc.get("score") or 0.0),
            document_id=str(doc.get("doc_id") or citation.get("doc_id") or "") or None,
            filename=PurePath(source).name or None,
            page=page if page > 0 else None,
            url=str(url) if url else None,
        )
        cited.append({**citation, **seed.model_dump()})
    return cited


def director_report(body: QueryRequest, result: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Whether the director could step in and how many of its events the answer prompt got."""
    used = int((result.get("prompt_info") or {}).get("director_events_used", 0) or 0)
    enabled = bool(body.conversation_id) and settings.director_stall_turns > 0
    return {"enabled": enabled, "ran": used > 0, "events": used}


def seed_response(
    body: QueryRequest,
    spec: RunSpec,
    result: dict[str, Any],
    events: list[dict[str, Any]],
    seconds: float,
    settings: Settings,
) -> dict[str, Any]:
    """The QueryResponse of a finished run (validated, as JSON)."""
    citations_on = body.enable_citations
    answer = str(result.get("answer") or "")
    if not citations_on:
        answer = uncited(answer)
    sources = _seed_sources(result)
    judged = judgement(result)
    citations = _seed_citations(result, judged["confidence"] or 0.0)
    strategy = result.get("strategy") or None
    usage = result.get("usage") or {}
    context = spec.context
    features = _seed_features(body, spec, result, events, settings, cited=citations_on and bool(citations))
    response = QueryResponse(
        answer=answer,
        sources=sources if body.include_sources else [],
        query=body.query,
        rewritten_query=rewritten_query(result, events, body.query),
        retrieved_count=len(result.get("retrieved") or []),
        generation_time=round(seconds, 3),
        citations=citations if citations_on else [],
        band=judged["band"],
        metadata={
            "conversation_id": spec.thread_id,
            "answer_id": result.get("answer_id") or None,
            "tenant_id": context.tenant,
            "mode": body.mode,
            "model": context.model or settings.llm_model,
            "temperature": body.temperature,
            "strategy": strategy,
            "not_found": bool(result.get("not_found", False)),
            "confidence": judged["confidence"],
            "not_found_reason": judged["not_found_reason"],
            "cache_hit": bool(result.get("cache_hit", False)),
            "retrieval": retrieval_plan(body.mode, body.top_k),
            "rewritten_queries": rewritten_queries(events),
            "features": features,
            "timings_ms": rounded_timings(result),
            "usage": {
                "prompt_tokens": int(usage.get("prompt_tokens", 0) or 0),
                "completion_tokens": int(usage.get("completion_tokens", 0) or 0),
            },
            "llm_calls": int(result.get("llm_calls", 0) or 0),
        },
    )
    return response.model_dump()


def _seed_sources(result: dict[str, Any]) -> list[SourceInfo]:
    """The run's sources as the response lists them, labelled as the answer cites them."""
    return [
        SourceInfo(
            id=str(doc.get("chunk_id") or ""),
            title=str(doc.get("title") or ""),
            content=str(doc.get("text") or ""),
            score=float(doc.get("score") or 0.0),
            source=str(doc.get("source") or ""),
            citation_id=citation_label(number),
        )
        for number, doc in enumerate(result.get("sources") or [], 1)
    ]


def _seed_citations(result: dict[str, Any], confidence: float) -> list[CitationInfo]:
    """The answer's citations, each with the answer's confidence."""
    return [
        CitationInfo(
            citation_num=int(item.get("marker", 0)),
            source_id=str(item.get("chunk_id") or ""),
            confidence=confidence,
        )
        for item in result.get("citations") or []
    ]


def _seed_features(
    body: QueryRequest,
    spec: RunSpec,
    result: dict[str, Any],
    events: list[dict[str, Any]],
    settings: Settings,
    *,
    cited: bool,
) -> dict[str, Any]:
    """Per feature the request could turn on: whether it was enabled and whether it ran."""
    grades = [event["data"] for event in events if event.get("event") == "answer_graded"]
    strategy = result.get("strategy") or None
    context = spec.context
    features: dict[str, Any] = {
        "citations": {"enabled": body.enable_citations, "ran": cited},
        "hallucination_detection": {"enabled": body.enable_hallucination_detection, "ran": False},
        "self_rag": {"enabled": context.self_rag, "ran": bool(grades), "iterations": grades},
        "hyde": {"enabled": body.enable_hyde, "ran": strategy == "HYDE"},
        **reflection_report(context, result, events),
        "director": director_report(body, result, settings),
    }
    if body.enable_hallucination_detection and not result.get("cache_hit"):
        features["hallucination_detection"] = {
            "enabled": True,
            "ran": True,
            "unsupported_sentences": list(result.get("unsupported_sentences") or []),
        }
    return features


def rewritten_queries(events: list[dict[str, Any]]) -> list[str]:
    """The queries the run rewrote the question into, first occurrence first."""
    return list(
        dict.fromkeys(
            query
            for event in events
            if event.get("event") == "query_rewritten"
            for query in event["data"]["queries"]
        )
    )


async def answer_query(body: QueryRequest, tenant: str, state: ApiState) -> dict[str, Any]:
    """Run one QueryRequest to the end (raises the run's error)."""
    started = time.perf_counter()
    spec = seed_spec(body, tenant, state)
    result, events = await state.engine.answer(spec)
    state.metrics.record_answer(result, bool(result.get("cache_hit", False)))
    return seed_response(body, spec, result, events, time.perf_counter() - started, state.settings)
