"""Draw data/squad/squad2_dev_mixed400.json.gz: answerable and unanswerable SQuAD 2.0 dev questions.

    git --git-dir=/work/.mirror/chrischute+squad/repo/.git show HEAD:data/dev-v2.0.json > /tmp/dev-v2.0.json
    python3 -m benchmarks.squad2_mixed_sample /tmp/dev-v2.0.json

Why a script: the sample is evaluation data for the answer-confidence calibration (rag eval calibrate),
and a reader must be able to redraw it byte for byte to trust that no question was picked by hand.
Questions of the router sample (data/squad/squad2_dev_sample600.json.gz) are left out, so the two evaluations
never share a question. Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import random
from pathlib import Path
from typing import Any

SQUAD_DIR = Path(__file__).resolve().parents[1] / "data" / "squad"
ROUTER_SAMPLE = SQUAD_DIR / "squad2_dev_sample600.json.gz"
OUTPUT = SQUAD_DIR / "squad2_dev_mixed400.json.gz"
#: The draw's seed and sizes (data/squad/README.md states them; change them only with a new file name).
SEED = 20261207
ANSWERABLE = 200
UNANSWERABLE = 200
VERSION = "v2.0-mixed400"
#: Fields of a question kept in the sample (plausible_answers only where SQuAD has them).
QUESTION_FIELDS = ("id", "question", "answers", "is_impossible", "plausible_answers")


def question_ids(document: dict[str, Any]) -> set[str]:
    """Every question id of a SQuAD-format document."""
    return {
        str(qa["id"])
        for article in document["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    }


def draw(document: dict[str, Any], excluded: set[str]) -> set[str]:
    """Ids of ANSWERABLE answerable and UNANSWERABLE unanswerable questions not in `excluded`.

    Each group is listed in file order, then sampled with one random.Random(SEED): answerable first.
    """
    candidates = [
        qa
        for article in document["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if str(qa["id"]) not in excluded
    ]
    answerable = [str(qa["id"]) for qa in candidates if not qa.get("is_impossible")]
    unanswerable = [str(qa["id"]) for qa in candidates if qa.get("is_impossible")]
    rng = random.Random(SEED)
    return set(rng.sample(answerable, ANSWERABLE)) | set(rng.sample(unanswerable, UNANSWERABLE))


def sample_document(document: dict[str, Any], chosen: set[str]) -> dict[str, Any]:
    """The chosen questions with their paragraphs and articles, all in file order."""
    articles = []
    for article in document["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = [
                {field: qa[field] for field in QUESTION_FIELDS if field in qa}
                for qa in paragraph["qas"]
                if str(qa["id"]) in chosen
            ]
            if qas:
                paragraphs.append({"context": paragraph["context"], "qas": qas})
        if paragraphs:
            articles.append({"title": article["title"], "paragraphs": paragraphs})
    return {"version": VERSION, "data": articles}


def write_gzip_json(document: dict[str, Any], path: Path) -> None:
    """Sorted-key JSON, gzip with mtime 0: the same input always gives the same bytes."""
    text = json.dumps(document, sort_keys=True, ensure_ascii=False)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as handle:
        handle.write(text.encode("utf-8"))
    path.write_bytes(buffer.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dev_file", type=Path, help="SQuAD 2.0 dev-v2.0.json")
    parser.add_argument("--out", type=Path, default=OUTPUT)
    arguments = parser.parse_args()
    document = json.loads(arguments.dev_file.read_text(encoding="utf-8"))
    with gzip.open(ROUTER_SAMPLE, "rt", encoding="utf-8") as handle:
        excluded = question_ids(json.load(handle))
    sample = sample_document(document, draw(document, excluded))
    write_gzip_json(sample, arguments.out)
    print(f"wrote {arguments.out}: {len(question_ids(sample))} questions, {len(sample['data'])} articles")


if __name__ == "__main__":
    main()
