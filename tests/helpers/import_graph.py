"""scripts/import_graph.py loaded as a module, once, for the tests that read the project's import graph
(tests/test_layering.py, tests/test_module_size.py, tests/test_thread_modules.py): scripts/ is no package, so
it is loaded from its path rather than imported."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "import_graph.py"


def _load() -> ModuleType:
    if "import_graph" in sys.modules:
        return sys.modules["import_graph"]
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module
    spec.loader.exec_module(module)
    return module


#: The script's functions: import_graph, module_graph, cycles, forbidden_edges, packages...
graph_tools = _load()
