"""`langgraph.json` is what `langgraph dev`, Studio and the LangGraph server load: these tests check it the
way they use it.

- the config validates with the CLI's own validator, and both graphs build input/output JSON schemas (the
  server's `/assistants/{id}/schemas`, Studio's input form);
- (slow) the graphs import by file path in a fresh process with a provider that would need an API key and no
  key: importing must build no model, settings or store, and the graphs carry no checkpointer (the server
  brings its own);
- (slow) `langgraph dev` starts on a copy of the project, lists both graphs, serves their schemas, and runs
  the rag graph on a thread (with the project's SQLite checkpointer) far enough to refuse an empty question.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_cli.config import validate_config_file

from graphs.baseline import graph as baseline_graph
from graphs.rag import graph as rag_graph
from tests.conftest import REPO_ROOT
from tests.helpers.langgraph_dev import COPY_IGNORE, environment_without_settings, langgraph_dev, request

CONFIG = REPO_ROOT / "langgraph.json"
GRAPH_IDS = {"rag", "baseline"}


def test_config_validates_and_names_both_graphs() -> None:
    config = validate_config_file(CONFIG)
    assert set(config["graphs"]) == GRAPH_IDS
    for spec in [*config["graphs"].values(), config["checkpointer"]["path"]]:
        path, attribute = spec.split(":")
        source = (REPO_ROOT / path).read_text(encoding="utf-8")
        assert f"\n{attribute} = " in source or f"def {attribute}(" in source, spec
    assert (REPO_ROOT / config["env"]).is_file()


@pytest.mark.parametrize("graph", [rag_graph, baseline_graph], ids=["rag", "baseline"])
def test_graphs_have_input_output_and_context_json_schemas(graph: Any) -> None:
    """What Studio renders: the input form, the output, and the run's configurable context."""
    assert set(graph.get_input_jsonschema()["properties"]) == {
        "question",
        "messages",
        "conversation_id",
        "tenant",
        "filters",
        "conversation_metadata",
        "conversation_scopes_retrieval",
    }
    output = graph.get_output_jsonschema()["properties"]
    assert {"answer", "citations", "sources", "strategy", "retrieval_rounds", "llm_calls"} <= set(output)
    context = graph.get_context_jsonschema()["properties"]
    assert {"max_iterations", "top_k", "mode", "tenant"} <= set(context)
    assert graph.checkpointer is None


IMPORT_SCRIPT = """
import importlib.util
import json
import sys

report = {}
for name, spec_text in json.loads(sys.argv[1]).items():
    path, attribute = spec_text.split(":")
    spec = importlib.util.spec_from_file_location(f"langgraph_json_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    graph = getattr(module, attribute)
    report[name] = {
        "type": type(graph).__name__,
        "name": graph.name,
        "checkpointer_is_none": graph.checkpointer is None,
        "nodes": sorted(graph.nodes),
    }

import models.factory
import nodes.resources
from config.settings import SettingsError, get_settings

try:
    get_settings()
    settings_error = ""
except SettingsError as error:
    settings_error = str(error)
report["_loaded"] = {
    "heavy_modules": [
        name for name in ("torch", "sentence_transformers", "xllamacpp", "openai") if name in sys.modules
    ],
    "chat_models": len(models.factory._cache),
    "resources_built": nodes.resources._default is not None,
    "settings_error": settings_error,
}
print(json.dumps(report))
"""


@pytest.mark.slow
def test_graphs_import_by_path_without_any_model_or_key(tmp_path: Path) -> None:
    graphs = validate_config_file(CONFIG)["graphs"]
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RAG_", "OPENAI_"))}
    env |= {"RAG_LLM_PROVIDER": "openai", "RAG_DATA_DIR": str(tmp_path / "data")}
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_SCRIPT, json.dumps(graphs)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])

    assert report["rag"]["type"] == report["baseline"]["type"] == "CompiledStateGraph"
    assert (report["rag"]["name"], report["baseline"]["name"]) == ("rag", "baseline")
    assert report["rag"]["checkpointer_is_none"] and report["baseline"]["checkpointer_is_none"]
    assert {"start_turn", "retrieve", "grade_retrieval", "generate", "grade_answer", "cite"} <= set(
        report["rag"]["nodes"]
    )
    loaded = report["_loaded"]
    # These settings are invalid (openai without a key): had the import built anything from them, it failed.
    assert "RAG_LLM_PROVIDER=openai" in loaded["settings_error"]
    assert loaded["heavy_modules"] == [] and loaded["chat_models"] == 0
    assert loaded["resources_built"] is False
    assert not (tmp_path / "data").exists()  # no store, no checkpoint file


# --- langgraph dev ---------------------------------------------------------------------------------------


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`langgraph dev` on a copy of the project; yields (base URL, data folder). Always stopped after."""
    project = tmp_path / "project"
    shutil.copytree(REPO_ROOT, project, ignore=COPY_IGNORE)
    data_dir = tmp_path / "data"
    env = environment_without_settings() | {"RAG_DATA_DIR": str(data_dir)}
    with langgraph_dev(project, env, tmp_path / "server.log") as base:
        yield base, data_dir


@pytest.mark.slow
def test_langgraph_dev_serves_both_graphs(dev_server: tuple[str, Path]) -> None:
    base, data_dir = dev_server
    assistants = request(f"{base}/assistants/search", {"limit": 20})
    by_graph = {assistant["graph_id"]: assistant for assistant in assistants}
    assert set(by_graph) == GRAPH_IDS

    schemas = request(f"{base}/assistants/{by_graph['rag']['assistant_id']}/schemas")
    assert schemas["input_schema"] is not None, "Studio would have no input form"
    assert "question" in schemas["input_schema"]["properties"]
    assert "answer" in schemas["output_schema"]["properties"]
    assert "max_iterations" in schemas["context_schema"]["properties"]

    # A run on a thread goes through the project's checkpointer; an empty question is refused before any
    # model is needed, with the engine's own error.
    thread = request(f"{base}/threads", {})
    result = request(
        f"{base}/threads/{thread['thread_id']}/runs/wait", {"assistant_id": "rag", "input": {"question": ""}}
    )
    error = result.get("__error__") or {}
    assert error.get("error") == "InvalidQuestionError", result
    assert "empty question" in error.get("message", "")
    assert (data_dir / "checkpoints.sqlite").is_file()  # server_checkpointer wrote to RAG_DATA_DIR
