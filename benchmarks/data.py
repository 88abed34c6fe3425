"""Where the campaigns find their data: the labelled sets beside the checkout (../shared/data) and the
samples committed under data/.

Why here and not in evals/: the product's `rag eval` commands read the files a user names; only the
campaigns that reproduce the committed results default to these folders, so no installed module reads
outside its package.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from evals.datasets import Passage, open_text
from service.cli.common import fail

#: The checkout this package lives in.
REPO_ROOT = Path(__file__).resolve().parents[1]
#: The evaluation data beside the project's checkout (../shared/data).
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
#: The HotpotQA sample of the shared data (multi-hop, with distractors), relative to a data folder.
HOTPOTQA_FILE = Path("hotpotqa") / "hotpot_dev_distractor_sample500_amor.jsonl.gz"
HOTPOTQA_SAMPLE = SHARED_DATA_DIR / HOTPOTQA_FILE
#: English single-hop questions (SQuAD 2.0 dev sample; provenance in data/squad/README.md), committed.
SQUAD_SAMPLE = REPO_ROOT / "data" / "squad" / "squad2_dev_sample600.json.gz"

ScifactOption = Annotated[
    Path | None, typer.Option(help="BEIR SciFact folder (default: ../shared/data/beir-scifact).")
]


def scifact_folder(option: Path | None) -> Path:
    """The SciFact folder a campaign reads (the option, else the shared data's); exit 2 when missing."""
    folder = option or SHARED_DATA_DIR / "beir-scifact"
    if not folder.is_dir():
        fail(f"SciFact folder not found: {folder}")
    return folder


def iter_beir_corpus(path: Path) -> Iterator[Passage]:
    """Documents of a BEIR corpus.jsonl(.gz), streamed (a BEIR corpus can hold millions of lines)."""
    with open_text(path) as handle:
        for line in filter(str.strip, handle):
            record = json.loads(line)
            yield Passage(str(record["_id"]), str(record.get("title") or ""), str(record["text"]))
