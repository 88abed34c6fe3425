"""What importing the graph costs: `import graphs.rag` runs before every `rag ask`, the server
and every notebook, so libraries only some paths need (a store client, file parsers, migrations, model
runtimes) are imported where they are used, not with the graph. Timings are measured by
`python -m benchmarks.import_time` and reported in docs/benchmarks.md; this test checks the structure that
makes them small, which does not depend on the machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Libraries the graph's import must not pull in, with the path that needs them.
DEFERRED = {
    "chromadb": "the vector store, on its first search or write (persistence/vector_store.py)",
    "langchain_chroma": "the vector store, on its first search or write",
    "docx": "the .docx loader, when a .docx file is read",
    "pypdf": "the .pdf loader, when a .pdf file is read",
    "bs4": "the HTML loader, when an .html file is read",
    "alembic": "migrations, when a database is created or upgraded",
    "sqlalchemy": "the app tables, catalog and semantic cache, on their first use (persistence/database.py)",
    "numpy": "vectors (embeddings, the semantic cache, fusion), on the first embedding or cache lookup",
    "torch": "the embedding model, on the first embedding",
    "sentence_transformers": "the embedding model, on the first embedding",
    "xllamacpp": "the embedded LLM, on the first model call",
    "matplotlib": "plots, in the benchmarks only",
}


def test_importing_the_graph_leaves_heavy_libraries_for_the_paths_that_use_them() -> None:
    probe = (
        "import json, sys; import graphs.rag; "
        f"print(json.dumps(sorted(m for m in {sorted(DEFERRED)!r} if m in sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded == [], {name: DEFERRED[name] for name in loaded}
