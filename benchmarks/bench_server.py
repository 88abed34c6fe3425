"""One embedded model's llama.cpp server for the model and prompt campaigns, with raw calls that keep
llama.cpp's own timings (prompt and generation tokens per second), which the engine's client drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from config.settings import LocalModelName, Settings
from models.factory import PLACEHOLDER_API_KEY
from models.local_catalog import CATALOG, find_model_file
from models.local_llm import LocalLLMServer

#: Context of the benchmark server: the long prompt and its answer fit.
EVAL_N_CTX = 4096
#: Seconds one call may take (a long prompt on a slow model and 2 busy cores).
HTTP_TIMEOUT_S = 1800.0


def reply_text(payload: dict[str, Any]) -> str:
    """The reply of an OpenAI-compatible chat completion response ("" when it has none)."""
    return str(payload["choices"][0]["message"].get("content") or "")


class BenchServer:
    """One model's llama.cpp server for the benchmark, with raw calls that keep llama.cpp's timings."""

    def __init__(self, name: LocalModelName, settings: Settings) -> None:
        model = CATALOG[name]
        self.name = name
        self.server = LocalLLMServer(
            find_model_file(name),
            n_ctx=EVAL_N_CTX,
            threads=settings.local_threads,
            alias=name,
            parallel=1,
            chat_template=model.chat_template,
        )
        self.client = httpx.Client(timeout=HTTP_TIMEOUT_S)

    def __enter__(self) -> BenchServer:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.server.stop()

    def chat(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        *,
        cache_prompt: bool = True,
        stop: Sequence[str] = (),
    ) -> tuple[str, dict[str, Any], float]:
        """(reply text, llama.cpp timings, wall seconds) of one greedy chat completion."""
        payload, wall = self.completion(messages, max_tokens, cache_prompt=cache_prompt, stop=stop)
        return reply_text(payload), payload.get("timings", {}), wall

    def completion(
        self,
        messages: list[dict[str, str]],
        max_tokens: int,
        *,
        cache_prompt: bool = True,
        stop: Sequence[str] = (),
        logprobs: bool = False,
    ) -> tuple[dict[str, Any], float]:
        """(llama.cpp's whole response, wall seconds) of one greedy chat completion; with `logprobs`, the
        response carries each reply token's log-probability (choices[0].logprobs.content)."""
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
            "cache_prompt": cache_prompt,
        }
        if stop:
            body["stop"] = list(stop)
        if logprobs:
            body["logprobs"] = True
        return self.server.chat_completion(body, timeout_s=HTTP_TIMEOUT_S, client=self.client)

    def count_tokens(self, text: str) -> int:
        base = self.server.base_url.removesuffix("/v1")
        response = self.client.post(
            f"{base}/tokenize", json={"content": text}, headers=self.server.auth_headers()
        )
        response.raise_for_status()
        return len(response.json()["tokens"])

    def chat_model(self, max_tokens: int) -> Any:
        """The engine's client kind (ChatOpenAI) on this server, for the structured and self-test calls."""
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr

        return ChatOpenAI(
            model=self.name,
            base_url=self.server.base_url,
            api_key=SecretStr(self.server.api_key or PLACEHOLDER_API_KEY),
            temperature=0,
            max_completion_tokens=max_tokens,  # max_tokens's alias, the one pydantic's mypy plugin knows
            timeout=HTTP_TIMEOUT_S,
            max_retries=0,
        )
