import pytest
from tests.test_graph_e2e import resources, FIRST, FOLLOW_UP, CONTEXT  # noqa
from graphs.rag import build_graph
from persistence.checkpointer import sqlite_checkpointer
from state.context import Context
pytestmark = pytest.mark.slow
def test_peek(resources, tmp_path):
    g = build_graph(sqlite_checkpointer(path=tmp_path / "c.sqlite"))
    cfg = {"configurable": {"thread_id": "x"}}
    for q in (FIRST, FOLLOW_UP):
        out = g.invoke({"question": q}, config=cfg, context=Context(**CONTEXT))
        print({k: out[k] for k in ("answer","standalone_question","strategy","retrieval_rounds","generation_rounds","llm_calls","not_found")})
        print([ (c["marker"], c["chunk_id"][:8], c["source"].split("/")[-1], c["inferred"]) for c in out["citations"]], [s["source"].split("/")[-1] for s in out["sources"]])
        print(out["answer_grade"], sorted(out["timings_ms"]))
