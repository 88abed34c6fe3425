"""Finding a local sentence-transformers model by name (RAG_EMBEDDING_PROVIDER=sentence-transformers), on disk
only (the machine may be offline), first match wins: RAG_EMBEDDING_MODEL as a path; then
`<RAG_EMBEDDING_MODELS_DIR>/<name>`; then the local Hugging Face hub cache (a bare name also as
`sentence-transformers/<name>`). A folder with `modules.json` or `config.json` holds a model. Nothing found
is one error naming every place looked in.
"""

from __future__ import annotations

import os
from pathlib import Path

from retrieval.embedding_errors import EmbeddingError

#: Files that make a folder a model sentence-transformers can load.
MODEL_MARKERS = ("modules.json", "config.json")
#: The organisation sentence-transformers prefixes to a bare model name.
DEFAULT_ORGANISATION = "sentence-transformers"


class ModelFolderNotFoundError(EmbeddingError):
    """No local folder holds the named embedding model."""


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache folder, from the same variables huggingface_hub reads."""
    if cache := os.environ.get("HF_HUB_CACHE"):
        return Path(cache).expanduser()
    if home := os.environ.get("HF_HOME"):
        return Path(home).expanduser() / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "huggingface" / "hub"


def is_model_folder(folder: Path) -> bool:
    """Whether `folder` holds a model sentence-transformers can load."""
    return folder.is_dir() and any((folder / marker).is_file() for marker in MODEL_MARKERS)


def hub_snapshot(cache: Path, repo_id: str) -> Path | None:
    """The cached snapshot of `repo_id` ('org/name'): the revision `refs/main` names, else the newest one."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    main = repo / "refs" / "main"
    if main.is_file() and (snapshots / main.read_text().strip()).is_dir():
        return snapshots / main.read_text().strip()
    folders = [folder for folder in snapshots.iterdir() if folder.is_dir()]
    return max(folders, key=lambda folder: folder.stat().st_mtime) if folders else None


def candidate_folders(name: str, models_dir: Path) -> list[Path]:
    """Where `name` may be, in the order looked (see the module docstring)."""
    candidates = [Path(name).expanduser()]
    if not Path(name).is_absolute():
        candidates.append(models_dir / name)
    cache = hub_cache_dir()
    repo_ids = [name] if "/" in name else [name, f"{DEFAULT_ORGANISATION}/{name}"]
    for repo_id in repo_ids:
        if repo_id.count("/") > 1 or Path(repo_id).is_absolute():
            continue  # not a hub id ("org/name")
        snapshot = hub_snapshot(cache, repo_id)
        missing = cache / f"models--{repo_id.replace('/', '--')}"
        candidates.append(snapshot if snapshot is not None else missing)
    return list(dict.fromkeys(candidates))


def find_model_folder(name: str, models_dir: Path) -> Path:
    """The resolved folder of the local model `name`; ModelFolderNotFoundError naming the places looked in."""
    if not name.strip():
        raise ModelFolderNotFoundError("RAG_EMBEDDING_MODEL is empty: name a sentence-transformers model")
    candidates = candidate_folders(name, models_dir)
    for folder in candidates:
        if is_model_folder(folder):
            return folder.resolve()
    looked = ", ".join(str(folder) for folder in candidates)
    raise ModelFolderNotFoundError(
        f"embedding model '{name}' (RAG_EMBEDDING_MODEL) is not a sentence-transformers model folder on this "
        f"machine (looked in: {looked}; a model folder holds modules.json or config.json); nothing is "
        f"downloaded: copy the model's folder to {models_dir / name} or set RAG_EMBEDDING_MODEL to its path"
    )
