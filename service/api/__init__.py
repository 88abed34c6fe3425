"""The HTTP API (FastAPI): generate, SSE streaming, batch, documents, health and metrics.

`service.api.app:create_app(settings)` builds it; `service.api.app:app` is what langgraph.json's `http.app`
mounts next to the LangGraph server's own API and what `rag serve` runs with uvicorn.
"""
