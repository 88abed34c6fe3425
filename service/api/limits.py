"""The API's time limits in force: a value set in the settings, or derived from the model (docs/api.md).

Why derived: the embedded model on 2 CPU cores reads 50-150 prompt tokens/s, so a full prompt window takes a
minute or two and a fixed 30 s limit answered 504 to most questions; a limit must stop a stuck model, not a
slow one. On auto an endpoint gets fixed limits; the embedded model's are the safety factor x its worst call
at the speed measured at start-up, and the run's are that times the model calls a run may make plus a
retrieval limit per round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from config.settings import API_TIMEOUT_MAX_S, Settings
from models.local_llm import ModelSpeed, running_local_server

#: Auto limits of an endpoint (or of an embedded model whose speed is unknown): one call, one run's work.
ENDPOINT_MODEL_TIMEOUT_S = 30.0
ENDPOINT_RUN_TIMEOUT_S = 60.0
#: Auto limits of the embedded model: the worst-case call time at the measured speed, times this (the
#: start-up probe's rates varied about 3x on a shared 2-core machine: 50 to 150 prompt tokens/s).
API_TIMEOUT_SAFETY_FACTOR = 3.0
#: Model calls a run makes once at most: contextualize, analyze and rewrite.
ONCE_PER_RUN_MODEL_CALLS = 3
#: Model calls per retrieval round (grade_retrieval, reformulate) and per answer attempt (generate, its
#: focused read, grade_answer); max_iterations bounds both kinds of round (graphs.rag).
MODEL_CALLS_PER_RETRIEVAL_ROUND = 2
MODEL_CALLS_PER_ANSWER_ATTEMPT = 3

#: Where a limit in force comes from: set in the settings; the endpoint's fixed value; derived from the
#: embedded model's measured speed; the fixed value for an embedded model whose speed is unknown; (run limit)
#: derived from a model limit that is set.
LimitSource = Literal["setting", "endpoint_default", "measured", "unmeasured_default", "model_setting"]


def max_prompt_tokens(model_context_tokens: int, generation_reserve: int, model_n_ctx: int | None) -> int:
    """The longest prompt a call can send: the window (capped by the model's own) less the completion cap."""
    window = min(model_context_tokens, model_n_ctx) if model_n_ctx else model_context_tokens
    return max(0, window - generation_reserve)


def derive_model_limit_s(
    speed: ModelSpeed, prompt_tokens: int, completion_tokens: int, safety_factor: float
) -> float:
    """safety factor x the time of the longest call at the measured speed (read the prompt, write the cap)."""
    worst = prompt_tokens / speed.prompt_tokens_per_s + completion_tokens / speed.completion_tokens_per_s
    return min(API_TIMEOUT_MAX_S, safety_factor * worst)


def model_calls_per_run(max_iterations: int) -> int:
    """The most model calls one run can make with `max_iterations` retrieval rounds and answer attempts."""
    per_round = MODEL_CALLS_PER_RETRIEVAL_ROUND + MODEL_CALLS_PER_ANSWER_ATTEMPT
    return ONCE_PER_RUN_MODEL_CALLS + max_iterations * per_round


def derive_run_limit_s(model_s: float, max_iterations: int, retrieval_s: float) -> float:
    """Every model call of a run at its limit, plus one retrieval limit per round."""
    return min(
        API_TIMEOUT_MAX_S, model_s * model_calls_per_run(max_iterations) + max_iterations * retrieval_s
    )


@dataclass(frozen=True)
class TimeLimits:
    """The limits one run works under, and where each comes from."""

    model_s: float
    run_s: float
    retrieval_s: float
    model_source: LimitSource
    run_source: LimitSource

    def as_json(self) -> dict[str, Any]:
        """Seconds (rounded to ms) and sources, for the health route."""
        return {
            "model_s": round(self.model_s, 3),
            "run_s": round(self.run_s, 3),
            "retrieval_s": round(self.retrieval_s, 3),
            "model_source": self.model_source,
            "run_source": self.run_source,
        }


@dataclass(frozen=True)
class RunShape:
    """What sizes a run's limits: its prompt window, completion cap and loop bound (from its context)."""

    model_context_tokens: int
    generation_reserve: int
    max_iterations: int


@dataclass(frozen=True)
class LimitPolicy:
    """How the API sets its limits: the settings, whether the model is embedded, its measured speed."""

    settings: Settings
    embedded: bool
    speed: ModelSpeed | None = None
    unmeasured_reason: str = ""
    #: The embedded model's own context window (its server's n_ctx), when known.
    model_n_ctx: int | None = None

    def default_shape(self) -> RunShape:
        """The run shape of the settings (a run whose request changes none of them)."""
        s = self.settings
        return RunShape(s.model_context_tokens, s.generation_reserve, s.max_iterations)

    def _model(self, shape: RunShape) -> tuple[float, LimitSource]:
        s = self.settings
        if s.api_model_timeout_s:
            return s.api_model_timeout_s, "setting"
        if self.speed is not None and self.embedded:
            prompt = max_prompt_tokens(shape.model_context_tokens, shape.generation_reserve, self.model_n_ctx)
            limit = derive_model_limit_s(
                self.speed, prompt, shape.generation_reserve, API_TIMEOUT_SAFETY_FACTOR
            )
            return limit, "measured"
        return ENDPOINT_MODEL_TIMEOUT_S, "unmeasured_default" if self.embedded else "endpoint_default"

    def limits(self, shape: RunShape | None = None) -> TimeLimits:
        """The limits of a run of `shape` (the settings' shape by default)."""
        shape = shape or self.default_shape()
        s = self.settings
        model_s, model_source = self._model(shape)
        run_source: LimitSource
        if s.api_run_timeout_s:
            run_s, run_source = s.api_run_timeout_s, "setting"
        elif self.embedded and model_source != "unmeasured_default":
            run_s = derive_run_limit_s(model_s, shape.max_iterations, s.api_retrieval_timeout_s)
            run_source = "measured" if model_source == "measured" else "model_setting"
        else:
            run_s, run_source = ENDPOINT_RUN_TIMEOUT_S, model_source
        return TimeLimits(model_s, run_s, s.api_retrieval_timeout_s, model_source, run_source)

    def describe(self) -> dict[str, Any]:
        """The limits in force for the settings' run shape and what they were derived from (health route)."""
        s = self.settings
        shape = self.default_shape()
        report: dict[str, Any] = {
            **self.limits(shape).as_json(),
            "settings": {
                "RAG_API_MODEL_TIMEOUT_S": s.api_model_timeout_s or "auto",
                "RAG_API_RUN_TIMEOUT_S": s.api_run_timeout_s or "auto",
                "RAG_API_RETRIEVAL_TIMEOUT_S": s.api_retrieval_timeout_s,
            },
            "model": "embedded" if self.embedded else "endpoint",
        }
        if self.speed is not None:
            report["measured_speed"] = {
                "prompt_tokens_per_s": round(self.speed.prompt_tokens_per_s, 2),
                "completion_tokens_per_s": round(self.speed.completion_tokens_per_s, 2),
                "probe_prompt_tokens": self.speed.prompt_tokens,
                "probe_completion_tokens": self.speed.completion_tokens,
            }
            report["derivation"] = {
                "safety_factor": API_TIMEOUT_SAFETY_FACTOR,
                "max_prompt_tokens": max_prompt_tokens(
                    shape.model_context_tokens, shape.generation_reserve, self.model_n_ctx
                ),
                "completion_cap_tokens": shape.generation_reserve,
                "model_calls_per_run": model_calls_per_run(shape.max_iterations),
                "retrieval_rounds": shape.max_iterations,
                "model_s": "safety_factor x (max_prompt_tokens / prompt_tokens_per_s "
                "+ completion_cap_tokens / completion_tokens_per_s)",
                "run_s": "model_s x model_calls_per_run + retrieval_rounds x retrieval_s",
            }
        if self.unmeasured_reason:
            report["unmeasured_reason"] = self.unmeasured_reason
        return report


def unmeasured_policy(settings: Settings, reason: str) -> LimitPolicy:
    """The policy before (or without) a measurement: auto limits are the fixed ones, `reason` says why."""
    embedded = settings.llm_provider == "local"
    return LimitPolicy(settings, embedded=embedded, unmeasured_reason=reason if embedded else "")


def measured_policy(settings: Settings, generation_model: Any) -> LimitPolicy:
    """The policy for `generation_model`, probing the embedded model's speed once at start-up: the first
    requests need their limits before they run, and one call of known size gives both rates on idle cores,
    where a real call's time mixes prompt and answer under varying load."""
    if settings.llm_provider != "local" or settings.api_model_timeout_s:
        return unmeasured_policy(settings, "")
    server = running_local_server()
    if server is None or getattr(generation_model, "openai_api_base", None) != server.base_url:
        return unmeasured_policy(
            settings, "the generation model is not this process's embedded llama.cpp server"
        )
    try:
        speed = server.measure_speed()
    except Exception as error:  # noqa: BLE001 - an unmeasured model keeps the fixed limits, with the reason
        return unmeasured_policy(settings, f"speed probe failed ({type(error).__name__}: {error})")
    return LimitPolicy(settings, embedded=True, speed=speed, model_n_ctx=server.n_ctx)
