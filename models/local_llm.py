"""The embedded language model: a GGUF chat model of the catalog, served in-process by llama.cpp.

Why a server: xllamacpp runs llama.cpp's OpenAI-compatible server on a loopback port, so the engine talks to
the embedded model as to a remote one (`ChatOpenAI`). It loads at most once per process. Each server has a
random key that only this process knows, so no other local process can call the model past the API's gate.
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.offline import prepare_offline_environment
from models.errors import ModelUnavailableError
from models.local_catalog import CATALOG, DEFAULT_LOCAL_MODEL, find_model_file

if TYPE_CHECKING:
    import httpx

    from config.settings import Settings

logger = logging.getLogger(__name__)

#: Model name the default server answers to (each embedded model answers to its catalog name).
LOCAL_MODEL_ALIAS = DEFAULT_LOCAL_MODEL
#: Concurrent request slots, sharing one KV cache (`kv_unified`) so each can use the whole window;
#: with a single slot, concurrent graph branches would queue behind each other.
PARALLEL_SLOTS = 4
#: Only reachable from this machine.
LOOPBACK_HOST = "127.0.0.1"
#: Random bytes of the key a server makes for itself (`secrets.token_urlsafe` writes ~1.3 characters each).
API_KEY_BYTES = 32
#: llama.cpp log threshold: 0 keeps the server silent (errors surface as exceptions here instead).
SERVER_VERBOSITY = 0
#: The speed probe's prompt: a sentence repeated to about 280 tokens (read in large batches, ~2 s on 2 cores).
SPEED_PROBE_SENTENCE = "The quick brown fox jumps over the lazy dog. "
SPEED_PROBE_REPEATS = 25
#: Tokens the probe makes the model write (end-of-text ignored, so exactly this many are timed).
SPEED_PROBE_COMPLETION_TOKENS = 16
#: Seconds the probe may take before it counts as failed (the model is then not measured).
SPEED_PROBE_TIMEOUT_S = 120.0


class SpeedProbeError(RuntimeError):
    """The embedded server did not report usable timings for the speed probe."""


@dataclass(frozen=True)
class ModelSpeed:
    """How fast a model reads a prompt and writes its answer, in tokens per second (as llama.cpp timed it)."""

    prompt_tokens_per_s: float
    completion_tokens_per_s: float
    #: Tokens the measurement read and wrote (0 when the speed was given, not measured).
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LocalLLMServer:
    """llama.cpp's OpenAI-compatible server for one GGUF model on a loopback port, in-process."""

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int,
        threads: int,
        alias: str = LOCAL_MODEL_ALIAS,
        parallel: int = PARALLEL_SLOTS,
        chat_template: str = "",
        host: str = LOOPBACK_HOST,
        port: int = 0,
        api_key: str | None = None,
    ) -> None:
        """`port` 0 = any free one; `api_key` None = a random one, '' = none (keyless on purpose)."""
        self.model_path = model_path
        self.chat_template = chat_template
        self.n_ctx = n_ctx
        self.threads = threads
        self.model_alias = alias
        self.parallel = parallel
        self.host = host
        self.port = port
        self.api_key = secrets.token_urlsafe(API_KEY_BYTES) if api_key is None else api_key
        self.load_seconds: float | None = None
        self._server: Any = None  # xllamacpp.Server; typed loosely because xllamacpp has no stubs
        self._base_url: str | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    @property
    def is_running(self) -> bool:
        """Whether this process's server is up (a forked child does not inherit the server's threads)."""
        return self._server is not None and self._pid == os.getpid()

    @property
    def base_url(self) -> str:
        """OpenAI-compatible endpoint (`http://127.0.0.1:PORT/v1`); starts the server if needed."""
        self.start()
        assert self._base_url is not None
        return self._base_url

    def start(self) -> None:
        """Load the model and start serving, once; later calls return at once."""
        with self._lock:
            if self.is_running:
                return
            if not self.model_path.is_file():
                raise ModelUnavailableError(
                    f"model file {self.model_path} does not exist: run `bash scripts/install.sh`"
                )
            # OMP_WAIT_POLICY must be set before xllamacpp is imported, or its OpenMP threads spin
            # between requests and eat the CPU the retrievers need
            prepare_offline_environment()
            import xllamacpp

            params = xllamacpp.CommonParams()
            params.model.path = str(self.model_path)
            params.model_alias = {self.model_alias}
            params.n_ctx = self.n_ctx
            params.n_parallel = self.parallel
            params.kv_unified = True
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
            params.hostnames = [self.host]
            params.port = self.port
            if self.api_key:
                params.api_keys = [self.api_key]
            params.ui = False
            params.verbosity = SERVER_VERBOSITY
            if self.chat_template:  # a base model has none: use llama.cpp's built-in one of its family
                params.chat_template = self.chat_template
            started = time.perf_counter()
            try:
                server = xllamacpp.Server(params)
            except RuntimeError as error:
                where = f" on {self.host}:{self.port} (is the port in use?) or" if self.port else ""
                raise ModelUnavailableError(
                    f"llama.cpp could not start{where} load {self.model_path} ({error}); the file may be "
                    "damaged: delete it and run `bash scripts/install.sh` again"
                ) from error
            self.load_seconds = time.perf_counter() - started
            self._server = server
            self._base_url = f"{server.listening_address}/v1"
            self._pid = os.getpid()
            logger.info(
                "embedded LLM %s loaded in %.2fs at %s (n_ctx=%d, threads=%d, slots=%d)",
                self.model_alias,
                self.load_seconds,
                self._base_url,
                self.n_ctx,
                self.threads,
                self.parallel,
            )

    def auth_headers(self) -> dict[str, str]:
        """The header a raw request to this server carries (its key), or none when it has no key."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def chat_completion(
        self, body: dict[str, Any], *, timeout_s: float, client: httpx.Client | None = None
    ) -> tuple[dict[str, Any], float]:
        """(reply JSON, wall seconds) of one raw /chat/completions call, keeping llama.cpp's `timings`."""
        import httpx

        started = time.perf_counter()
        response = (client or httpx).post(
            f"{self.base_url}/chat/completions",
            json={"model": self.model_alias, **body},
            headers=self.auth_headers(),
            timeout=timeout_s,
        )
        wall = time.perf_counter() - started
        response.raise_for_status()
        payload: dict[str, Any] = response.json()
        return payload, wall

    def measure_speed(self) -> ModelSpeed:
        """The model's prompt-reading and writing rates from llama.cpp's own `timings` (which the OpenAI
        client drops): uncached prompt, exactly SPEED_PROBE_COMPLETION_TOKENS written, after a one-token call
        pages the weights in. SpeedProbeError when the timings are unusable."""
        payload: dict[str, Any] = {}
        for prompt, tokens in (
            (SPEED_PROBE_SENTENCE, 1),
            (SPEED_PROBE_SENTENCE * SPEED_PROBE_REPEATS, SPEED_PROBE_COMPLETION_TOKENS),
        ):
            payload, _wall = self.chat_completion(
                {
                    "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": tokens,
                    "temperature": 0,
                    "ignore_eos": True,
                    "cache_prompt": False,
                },
                timeout_s=SPEED_PROBE_TIMEOUT_S,
            )
        timings = payload.get("timings") or {}
        speed = ModelSpeed(
            prompt_tokens_per_s=float(timings.get("prompt_per_second") or 0.0),
            completion_tokens_per_s=float(timings.get("predicted_per_second") or 0.0),
            prompt_tokens=int(timings.get("prompt_n") or 0),
            completion_tokens=int(timings.get("predicted_n") or 0),
        )
        if speed.prompt_tokens_per_s <= 0 or speed.completion_tokens_per_s <= 0:
            raise SpeedProbeError(f"llama.cpp reported no usable timings: {timings!r}")
        logger.info(
            "embedded LLM %s reads %.1f prompt tokens/s and writes %.1f tokens/s",
            self.model_alias,
            speed.prompt_tokens_per_s,
            speed.completion_tokens_per_s,
        )
        return speed

    def stop(self) -> None:
        """Shut the server down; idempotent. In-flight requests fail with a connection error."""
        with self._lock:
            server, self._server, self._base_url = self._server, None, None
            if server is None or self._pid != os.getpid():
                return  # never started, already stopped, or inherited through fork (not ours to join)
            # no close(): dropping the last reference runs the native destructor, which joins the threads
            del server
            logger.info("embedded LLM %s stopped", self.model_alias)


_server: LocalLLMServer | None = None
_server_lock = threading.Lock()


def get_local_server(settings: Settings) -> LocalLLMServer:
    """The process-wide embedded server, started on first use; never a second model in memory."""
    global _server
    with _server_lock:
        wanted = (settings.local_model, settings.local_n_ctx, settings.local_threads)
        if _server is not None and _server.is_running:
            running = (_server.model_alias, _server.n_ctx, _server.threads)
            if running != wanted:
                logger.warning("embedded LLM already running as %s; ignoring %s", running, wanted)
            return _server
        model = CATALOG[settings.local_model]
        server = LocalLLMServer(
            find_model_file(model.name),  # assembled from its packages on first use, no network
            n_ctx=settings.local_n_ctx,
            threads=settings.local_threads,
            alias=model.name,
            chat_template=model.chat_template,
        )
        server.start()
        atexit.register(server.stop)
        _server = server
        return server


def running_local_server() -> LocalLLMServer | None:
    """The process-wide embedded server if it runs now (never starts one)."""
    with _server_lock:
        return _server if _server is not None and _server.is_running else None
