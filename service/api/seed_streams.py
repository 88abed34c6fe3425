"""The seed contract's two SSE streams (docs/api-seed.md), translated from the engine's run as it happens.

Why a translation: the engine reports every round of a Self-RAG run, while a seed client expects each opening
event once, in order, before the answer's tokens. So each opening event goes out once, at the engine's first
event of its kind or before the first token or final event; a withdrawn draft is a `draft_replaced` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from fastapi import Request
from sse_starlette.sse import EventSourceResponse

from service.api.draft import DRAFT_REPLACED, DraftWatch
from service.api.engine import RunSpec
from service.api.errors import classify
from service.api.runtime import ApiState
from service.api.seed_runs import first_rewrite

#: The last line of /query-stream, after its final event (also after an error).
QUERY_STREAM_END = "[DONE]"
#: Seconds between SSE keep-alive comments (as the engine's stream): proxies close idle streams.
SSE_PING_S = 15

Message = dict[str, str]
#: The final messages of a finished run: (result, engine events, seconds since the request) -> messages.
Finish = Callable[[dict[str, Any], list[dict[str, Any]], float], list[Message]]


class StreamPlan(Protocol):
    """A stream's format: the messages for each engine event, token and failure of the run."""

    def event(self, name: str, data: dict[str, Any]) -> list[Message]: ...

    def token(self, text: str) -> list[Message]: ...

    def failed(self, error: dict[str, Any]) -> list[Message]: ...


def seed_message(kind: str, **fields: Any) -> Message:
    """One message of the seed's streams: a `data:` line holding `{"type": kind, **fields}`."""
    return {"data": json.dumps({"type": kind, **fields}, ensure_ascii=False, default=str)}


class SeedStream:
    """What one seed stream has sent: its opening events (each once, in order), tokens and drafts."""

    #: The opening events, in the seed's order.
    opening: tuple[str, ...] = ()
    #: The type of a piece of the answer.
    token_type = "token"

    def __init__(self, question: str) -> None:
        self.question = question
        self.sent: set[str] = set()
        self.known: dict[str, dict[str, Any]] = {}
        self.tokens = 0
        self.draft = DraftWatch()

    def defaults(self, kind: str) -> dict[str, Any]:
        """The fields of opening event `kind` when the run has not reported them yet."""
        raise NotImplementedError

    def open_to(self, kind: str) -> list[Message]:
        """The opening events up to and including `kind` that were not sent yet."""
        messages: list[Message] = []
        for name in self.opening[: self.opening.index(kind) + 1]:
            if name not in self.sent:
                self.sent.add(name)
                messages.append(seed_message(name, **self.known.get(name, self.defaults(name))))
        return messages

    def opened(self) -> list[Message]:
        """Every opening event not sent yet."""
        return self.open_to(self.opening[-1]) if self.opening else []

    def note(self, name: str, data: dict[str, Any]) -> list[Message]:
        """The seed messages an engine event leads to (subclasses map their opening events)."""
        return []

    def event(self, name: str, data: dict[str, Any]) -> list[Message]:
        """The seed messages before and for engine event `name`."""
        replaced = self.draft.before(name, data)
        messages = [seed_message(DRAFT_REPLACED, **replaced)] if replaced is not None else []
        return messages + self.note(name, data)

    def token(self, text: str) -> list[Message]:
        """A piece of the answer (after the opening events)."""
        self.draft.token(text)
        self.tokens += 1
        return [*self.opened(), seed_message(self.token_type, content=text)]

    def answer_once(self, answer: str) -> list[Message]:
        """The opening events left, and the answer as one token when the run streamed none."""
        messages = self.opened()
        if not self.tokens and answer:
            messages.append(seed_message(self.token_type, content=answer))
        return messages


class QueryStream(SeedStream):
    """/query-stream: query_rewritten, documents_retrieved, generation_start, token..., the end."""

    opening = ("query_rewritten", "documents_retrieved", "generation_start")

    def defaults(self, kind: str) -> dict[str, Any]:
        known: dict[str, dict[str, Any]] = {
            "query_rewritten": {"content": self.question},
            "documents_retrieved": {"count": 0},
        }
        return known.get(kind, {})

    def note(self, name: str, data: dict[str, Any]) -> list[Message]:
        if name == "query_rewritten" and name not in self.known:
            self.known[name] = {"content": first_rewrite(list(data.get("queries") or []), self.question)}
            return self.open_to(name)
        if name == "documents_retrieved" and name not in self.known:
            self.known[name] = {"count": int(data.get("count") or 0)}
            return self.open_to(name)
        if name == "generation_start":
            return self.open_to(name)
        return []

    def finish(self, response: dict[str, Any]) -> list[Message]:
        """The closing events of a QueryResponse: generation_complete, then [DONE]."""
        self.known.setdefault("query_rewritten", {"content": response["rewritten_query"]})
        self.known.setdefault("documents_retrieved", {"count": response["retrieved_count"]})
        return [
            *self.answer_once(response["answer"]),
            seed_message("generation_complete", **response),
            {"data": QUERY_STREAM_END},
        ]

    def failed(self, error: dict[str, Any]) -> list[Message]:
        """A failure: the error event, then [DONE]."""
        return [seed_message("error", **error), {"data": QUERY_STREAM_END}]


class GenerateStream(SeedStream):
    """/generate/stream: context, chunk..., citations, done."""

    opening = ("context",)
    token_type = "chunk"

    def defaults(self, kind: str) -> dict[str, Any]:
        return {"chunks_count": 0}

    def note(self, name: str, data: dict[str, Any]) -> list[Message]:
        if name == "documents_retrieved" and "context" not in self.known:
            self.known["context"] = {"chunks_count": int(data.get("count") or 0)}
            return self.open_to("context")
        if name == "generation_start":
            return self.open_to("context")
        return []

    def finish(self, answer: str, citations: list[dict[str, Any]], done: dict[str, Any]) -> list[Message]:
        """The closing events: citations, then done."""
        self.known.setdefault("context", {"chunks_count": int(done["metadata"]["chunks_found"])})
        return [
            *self.answer_once(answer),
            seed_message("citations", citations=citations),
            seed_message("done", answer=answer, **done),
        ]

    def failed(self, error: dict[str, Any]) -> list[Message]:
        """A failure: the error event ends the stream."""
        return [seed_message("error", **error)]


def stream_run(
    request: Request,
    state: ApiState,
    spec: RunSpec,
    plan: StreamPlan,
    route: str,
    finish: Finish,
) -> EventSourceResponse:
    """Run `spec` and stream it in `plan`'s format; a client that leaves stops the run (a 499)."""
    gone = asyncio.Event()  # set by the response when the client disconnects (not on a server shutdown)

    async def on_disconnect(_message: Any) -> None:
        gone.set()

    async def events() -> AsyncIterator[Message]:
        started = time.perf_counter()
        seen: list[dict[str, Any]] = []
        result: dict[str, Any] = {}
        try:
            # aclosing: a client that leaves closes the run (abandoned, rolled back) now, not when collected
            async with contextlib.aclosing(state.engine.run(spec)) as run:
                async for kind, payload in run:
                    if kind == "event":
                        seen.append(payload)
                        for message in plan.event(payload["event"], payload["data"]):
                            yield message
                    elif kind == "token":
                        for message in plan.token(payload):
                            yield message
                    else:
                        result = payload
        except (asyncio.CancelledError, GeneratorExit):
            if gone.is_set():
                state.client_left(route, request, f"thread {spec.thread_id}")
            raise
        except Exception as error:  # noqa: BLE001 - reported to the client as an event, not a broken stream
            info = classify(error)
            state.metrics.record_error(route, info.kind)
            for message in plan.failed(info.body()):
                yield message
            return
        state.metrics.record_answer(result, bool(result.get("cache_hit", False)))
        for message in finish(result, seen, time.perf_counter() - started):
            yield message

    return EventSourceResponse(events(), ping=SSE_PING_S, client_close_handler_callable=on_disconnect)
