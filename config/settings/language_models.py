"""Settings of the language models that generate and grade answers (embedded or an endpoint).
One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, Field, model_validator

LLMProvider = Literal["local", "openai", "init_chat_model"]
ModelStrength = Literal["auto", "weak", "strong"]
#: Embedded models of models/local_catalog.py (the catalog says where each one's weights come from).
LocalModelName = Literal["qwen2.5-coder-0.5b", "smollm2-135m", "gemma3-270m", "qwen2.5-coder-1.5b"]
#: The default by measurement (results/models.json): the most accurate embedded model within 30 s on 2 cores
#: (README "The embedded model").
DEFAULT_LOCAL_MODEL: LocalModelName = "qwen2.5-coder-0.5b"


class ModelSettings(BaseModel):
    """Which model answers and grades, where it is served and how it is called."""

    llm_provider: LLMProvider = Field(
        "local", description="local (embedded model, RAG_LOCAL_MODEL) | openai | init_chat_model."
    )
    llm_model: str = Field(
        "",
        description="Model name the endpoint serves (openai) or provider:model (init_chat_model); required "
        "with those providers (no name fits every server). With local it is RAG_LOCAL_MODEL's name.",
    )
    llm_base_url: str | None = Field(None, description="OpenAI-compatible endpoint for generation.")
    llm_api_key: str | None = Field(None, description="API key for the generation endpoint.")
    grader_provider: LLMProvider | None = Field(
        None, description="Provider for graders; unset = llm_provider."
    )
    grader_model: str | None = Field(None, description="Model for graders; unset = llm_model.")
    grader_base_url: str | None = Field(None, description="Endpoint for graders; unset = llm_base_url.")
    grader_api_key: str | None = Field(None, description="API key for graders; unset = llm_api_key.")
    llm_temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature.")
    llm_timeout_s: float = Field(120.0, gt=0, description="Per-call timeout in seconds.")
    llm_strength: ModelStrength = Field(
        "auto",
        description="weak | strong | auto: strong models get the LLM analyser, graders and rewriting; auto "
        "= a one-call JSON self-test per process and model (the embedded model is weak without a call).",
    )
    grader_strength: ModelStrength | None = Field(
        None, description="weak | strong | auto for the grading model; unset = llm_strength."
    )
    local_model: LocalModelName = Field(
        DEFAULT_LOCAL_MODEL,
        description="Embedded model (RAG_LLM_PROVIDER=local): qwen2.5-coder-0.5b | smollm2-135m | "
        "gemma3-270m | qwen2.5-coder-1.5b (models/local_catalog.py; measured by "
        "`python -m benchmarks models`).",
    )
    local_n_ctx: int = Field(8192, ge=512, description="Context window of the embedded model.")
    local_threads: int = Field(2, ge=1, le=256, description="CPU threads of the embedded model.")

    @model_validator(mode="after")
    def _name_the_embedded_model(self) -> Self:
        """With the embedded provider, `llm_model` is the embedded model's name: responses and health checks
        show it, so it must not name a model that is not running."""
        if self.llm_provider == "local":
            object.__setattr__(self, "llm_model", self.local_model)
        return self
