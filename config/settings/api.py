"""Settings of the HTTP API (service/api): address, keys, time limits, body limits and concurrency.
One field group of `Settings` (config/settings/engine.py).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

#: Longest time limit the API accepts or derives (s): a day; a larger value is a typo, not a limit.
API_TIMEOUT_MAX_S = 86_400.0


class ApiSettings(BaseModel):
    """How `rag serve` listens, authenticates and bounds requests."""

    api_host: str = Field("127.0.0.1", description="Address `rag serve` listens on.")
    api_port: int = Field(8000, ge=1, le=65535, description="Port `rag serve` listens on.")
    api_keys: str = Field(
        "", description="API keys mapped to tenants, 'key1:tenantA,key2:tenantB'; empty = no authentication."
    )
    api_key: str | None = Field(
        None,
        description="Key `rag ask` / `rag search` present (X-API-Key) when they hand a question to a running "
        "`rag serve` of the same data directory (service/handoff.py); unset = none.",
    )
    api_cors_origins: str = Field("", description="Origins allowed by CORS, comma-separated ('*' = any).")
    api_models: str = Field(
        "",
        description="Models a request may name besides RAG_LLM_MODEL and RAG_GRADER_MODEL (comma-separated; "
        "served by the same provider and endpoint); any other name is refused with a 422.",
    )
    api_run_timeout_s: float = Field(
        0.0,
        ge=0,
        le=API_TIMEOUT_MAX_S,
        description="A run's own work, at most (then 504), waits excluded; 0 = auto: derived from the model "
        "and retrieval limits for the embedded model, 60 s for an endpoint (service/api/limits.py).",
    )
    api_model_timeout_s: float = Field(
        0.0,
        ge=0,
        le=API_TIMEOUT_MAX_S,
        description="One model call, at most (then 504), waits excluded; 0 = auto: from the embedded "
        "model's measured speed, window and completion cap, 30 s for an endpoint (service/api/limits.py).",
    )
    api_queue_timeout_s: float = Field(
        600.0, gt=0, description="Waiting for a run slot or for the model, at most (then 503 + Retry-After)."
    )
    api_model_concurrency: int = Field(
        0,
        ge=0,
        le=256,
        description="Calls to one model at once (0 = auto: 2 for the embedded model, no cap for endpoints).",
    )
    api_retrieval_timeout_s: float = Field(10.0, gt=0, description="One retrieval, at most (then 504).")
    api_max_json_bytes: int = Field(
        10_000_000,  # room for /documents/text's 1,000,000 characters escaped in JSON, and a full batch
        ge=1024,
        description="Body of a JSON request, at most (then 413, refused as it arrives).",
    )
    api_max_upload_bytes: int = Field(
        100_000_000,
        ge=1024,
        description="Body of one upload request, all files together, at most (then 413); keep it above "
        "RAG_MAX_FILE_BYTES.",
    )
    api_workers: int = Field(16, ge=1, le=256, description="Graph runs the API executes at once.")
    api_tenant_runs: int = Field(
        4,
        ge=0,
        le=256,
        description="Graph runs and searches one tenant may have in the worker pool at once (0 = no bound); "
        "further ones wait without holding a worker (then 503), so one tenant cannot take every worker.",
    )
    api_health_model_probe: bool = Field(
        True, description="The health route asks the model for one token (else only builds the client)."
    )
