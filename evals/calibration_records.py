"""The records `rag eval calibrate` learns from: `rag eval qa` results files loaded and checked (numeric
signals, a 0/1 label), each record tagged with its file and the data set its file's name tells (records do
not carry it), so a report splits by set and an error names file and question.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from answering.signals import SIGNAL_GROUPS, SIGNAL_NAMES
from evals.datasets import open_text

Record = Mapping[str, Any]
FloatArray = NDArray[np.float64]

#: Data sets told apart by their file names (records do not carry their data set).
KNOWN_SETS: tuple[str, ...] = ("squad", "cmrc2018", "hotpotqa")
#: Field a loaded record gets with the name of its set (from its file's name), and with its file.
SET_FIELD = "eval_set"
FILE_FIELD = "eval_file"
#: The label: 1.0 when the record's candidate short answer holds a gold answer (0 for unanswerable ones).
LABEL_FIELD = "candidate_right"


class CalibrationInputError(ValueError):
    """Records that cannot be fit or evaluated; the message names the file or record."""


@dataclass(frozen=True)
class RunFile:
    """The usable records of one `rag eval qa` results file, each tagged with its set and file."""

    path: Path
    set_name: str
    records: tuple[dict[str, Any], ...]
    skipped: int
    """Failed questions (records with an `error`) left out: they hold no judgement to learn from."""

    @property
    def label(self) -> str:
        """What the run is called in tables and plots: its file name without the extension."""
        return self.path.stem


def set_name_of(path: Path) -> str:
    """The data set of a results file: the first of KNOWN_SETS its name contains, else its name."""
    lowered = path.name.lower()
    return next((name for name in KNOWN_SETS if name in lowered), path.stem)


def check_record(record: Record, features: Sequence[str], where: str) -> None:
    """CalibrationInputError unless the record has numeric signals for `features` and a 0/1 label."""
    signals = record.get("signals")
    if not isinstance(signals, Mapping):
        raise CalibrationInputError(f"{where}: no `signals` (an older `rag eval qa` record: run it again)")
    missing = [name for name in features if name not in signals]
    if missing:
        raise CalibrationInputError(f"{where}: signals lack {', '.join(missing)}")
    bad = [name for name in features if not is_finite_number(signals[name])]
    if bad:
        raise CalibrationInputError(f"{where}: signals {', '.join(bad)} are not finite numbers")
    if record.get(LABEL_FIELD) not in (0, 1):
        raise CalibrationInputError(f"{where}: `{LABEL_FIELD}` is {record.get(LABEL_FIELD)!r}, not 1 or 0")


def is_finite_number(value: object) -> bool:
    """Whether `value` is a finite int or float (a bool is not a signal's number)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def record_place(record: Record, line: int | None = None) -> str:
    """Names a record in an error: its file (and line) and question id."""
    place = str(record.get(FILE_FIELD) or "record")
    if line is not None:
        place += f" line {line}"
    return f"{place} (qid {record.get('qid')!r})"


def load_run(path: Path) -> RunFile:
    """The records of one results file, failed questions left out; CalibrationInputError naming file and
    line for a missing file, a line that is not a JSON object, or a record without signals or label."""
    if not path.is_file():
        raise CalibrationInputError(f"results file not found: {path}")
    set_name = set_name_of(path)
    records: list[dict[str, Any]] = []
    skipped = 0
    with open_text(path) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise CalibrationInputError(f"{path} line {number}: not JSON ({error.msg})") from error
            if not isinstance(record, dict):
                raise CalibrationInputError(f"{path} line {number}: not a JSON object")
            if record.get("error"):
                skipped += 1
                continue
            tagged = {**record, SET_FIELD: set_name, FILE_FIELD: str(path)}
            check_record(tagged, (), record_place(tagged, number))
            records.append(tagged)
    if not records:
        raise CalibrationInputError(f"{path}: no usable record ({skipped} failed questions)")
    return RunFile(path=path, set_name=set_name, records=tuple(records), skipped=skipped)


def set_of(record: Record) -> str:
    """The set a record is reported under: its file's data set, else its language."""
    return str(record.get(SET_FIELD) or record.get("language") or "all")


def feature_matrix(records: Sequence[Record], features: Sequence[str]) -> FloatArray:
    """Records by `features`: each record's signals, checked (CalibrationInputError naming the record)."""
    for record in records:
        check_record(record, features, record_place(record))
    return np.array(
        [[float(record["signals"][name]) for name in features] for record in records], dtype=np.float64
    ).reshape(len(records), len(features))


def label_array(records: Sequence[Record]) -> FloatArray:
    """Each record's label (LABEL_FIELD) as 1.0 or 0.0."""
    return np.array([float(record[LABEL_FIELD]) for record in records], dtype=np.float64)


def excluded_groups(features: Sequence[str]) -> list[str]:
    """The signal groups none of whose signals are among `features`."""
    kept = set(features)
    return [group for group, names in SIGNAL_GROUPS.items() if not kept.intersection(names)]


def features_without(groups: Iterable[str]) -> tuple[str, ...]:
    """SIGNAL_NAMES less the signals of `groups`; CalibrationInputError naming an unknown group."""
    dropped = list(groups)
    unknown = [group for group in dropped if group not in SIGNAL_GROUPS]
    if unknown:
        raise CalibrationInputError(
            f"unknown signal group(s) {', '.join(unknown)}; choose among {', '.join(SIGNAL_GROUPS)}"
        )
    removed = {name for group in dropped for name in SIGNAL_GROUPS[group]}
    return tuple(name for name in SIGNAL_NAMES if name not in removed)
