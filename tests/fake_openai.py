"""A fake OpenAI-compatible endpoint (chat completions, embeddings) for tests that run the engine in another
process (`langgraph dev`), where fakes cannot be installed in-process.

Why an endpoint rather than the embedded models: the subprocess then needs no torch and no GGUF model, starts
in seconds and answers deterministically; the engine talks to it exactly as to any OpenAI-compatible server.
Chat: every prompt gets `reply` (streamed word by word when asked). Embeddings: the hashed bag-of-words
vectors of tests.fakes, so retrieval still ranks by shared words.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tests.fakes import hashed_vector
from tests.helpers.api_server import serve_app


def fake_openai_app(reply: str) -> FastAPI:
    """The endpoint's app; `app.state.calls` counts chat and embedding requests."""
    app = FastAPI()
    app.state.calls = {"chat": 0, "embeddings": 0}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        app.state.calls["chat"] += 1
        model = body.get("model", "fake")
        if body.get("stream"):
            return StreamingResponse(_chunks(reply, model), media_type="text/event-stream")
        return JSONResponse(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        body = await request.json()
        app.state.calls["embeddings"] += 1
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for index, text in enumerate(texts):
            vector = hashed_vector(str(text))
            encoded: Any = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", "fake"),
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    return app


def _chunks(reply: str, model: str) -> Iterator[str]:
    words = reply.split(" ")
    for index, word in enumerate(words):
        delta = {"content": word if index == 0 else f" {word}"}
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}  # fmt: skip
        yield f"data: {json.dumps(chunk)}\n\n"
    last = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}  # fmt: skip
    yield f"data: {json.dumps(last)}\n\n"
    yield "data: [DONE]\n\n"


class FakeOpenAIServer:
    """The endpoint served by uvicorn in a thread on a loopback port."""

    def __init__(self, reply: str, port: int) -> None:
        self.app = fake_openai_app(reply)
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._served = serve_app(self.app, port)

    def __enter__(self) -> FakeOpenAIServer:
        self._served.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._served.__exit__(*exc)  # type: ignore[arg-type]
