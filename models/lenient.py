"""Recover a pydantic object from the sloppy JSON that small models write (prose, fences, single quotes,
"yes" for true, "7/10" for 7, cut-off JSON, the schema echoed): a repair is cheap, a retry costs a model call.
"""

from __future__ import annotations

import enum
import json
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

M = TypeVar("M", bound=BaseModel)

#: A fenced code block, with or without a language tag.
FENCE_RE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
#: The first number in a string ("7/10" -> 7, "score: 0.8" -> 0.8).
NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
#: How many "{" positions to try before giving up on a reply.
MAX_OBJECT_STARTS = 20
#: Words read as booleans.
TRUE_WORDS = frozenset({"true", "yes", "y", "t", "1", "on", "correct", "relevant", "supported", "grounded"})
FALSE_WORDS = frozenset(
    {"false", "no", "n", "f", "0", "off", "not", "incorrect", "irrelevant", "unsupported", "none"}
)
#: Keys under which models wrap the answer when they echo the schema.
WRAPPER_KEYS = ("properties", "answer", "output", "result", "response", "data", "json")


class LenientParseError(ValueError):
    """Nothing usable for the schema could be recovered from a reply."""


@dataclass(frozen=True)
class Coerced(Generic[M]):
    """A schema instance recovered from a reply, with the fields taken from the default."""

    value: M
    found: tuple[str, ...]
    filled: tuple[str, ...]


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply (fenced blocks first), repaired by json-repair; None if none."""
    candidates = [match.group(1) for match in FENCE_RE.finditer(text)] + [text]
    for candidate in candidates:
        start, tries = candidate.find("{"), 0
        while start != -1 and tries < MAX_OBJECT_STARTS:  # "{maybe} ... {"a": 1}": the next "{" may be it
            tries += 1
            try:
                data = json_repair.loads(candidate[start:])
            except (ValueError, RecursionError):
                data = None
            objects = data if isinstance(data, list) else [data]
            first = next((item for item in objects if isinstance(item, dict) and item), None)
            if first is not None:
                return first
            start = candidate.find("{", start + 1)
    return None


def parse_reply(text: str, schema: type[M], default: M) -> Coerced[M]:
    """Parse a model's reply into `schema`, filling what is missing from `default`."""
    data = extract_json_object(text)
    if data is None:
        raise LenientParseError("the reply contains no JSON object")
    return coerce_to_schema(data, schema, default)


def coerce_to_schema(data: Mapping[str, Any], schema: type[M], default: M) -> Coerced[M]:
    """Fit a loose mapping to `schema`, filling the rest from `default`; LenientParseError if no field."""
    if not isinstance(default, schema):
        raise TypeError(f"default must be a {schema.__name__} instance, got {type(default).__name__}")
    fields = schema.model_fields
    data = _unwrap(data, fields)
    lookup = {_norm(key): value for key, value in data.items() if isinstance(key, str)}
    values: dict[str, Any] = {}
    found: list[str] = []
    problems: list[str] = []
    for name, info in fields.items():
        keys = [_norm(name)] + ([_norm(info.alias)] if info.alias else [])
        key = next((key for key in keys if key in lookup), None)
        if key is None:
            continue
        try:
            values[name] = _coerce(lookup[key], info.annotation, info, getattr(default, name))
            found.append(name)
        except (TypeError, ValueError) as error:
            problems.append(f"{name}: {error}")
    if not found:
        detail = f" ({'; '.join(problems)})" if problems else ""
        raise LenientParseError(f"no field of {schema.__name__} could be read from the reply{detail}")
    for _attempt in range(2):
        try:
            value = schema.model_validate({**_defaults(default), **values}, by_alias=True, by_name=True)
        except ValidationError as error:
            # fields the schema's own validators refuse fall back to the default's values
            bad = {str(item["loc"][0]) for item in error.errors() if item.get("loc")}
            if not bad & set(values):
                break
            for name in bad & set(values):
                del values[name]
                found.remove(name)
            if not found:
                break
            continue
        filled = tuple(name for name in fields if name not in found)
        return Coerced(value=value, found=tuple(found), filled=filled)
    raise LenientParseError(f"the reply does not validate as {schema.__name__}")


def _defaults(default: BaseModel) -> dict[str, Any]:
    return {name: getattr(default, name) for name in type(default).model_fields}


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.strip().lower()).strip("_")


def _unwrap(data: Mapping[str, Any], fields: Mapping[str, FieldInfo]) -> Mapping[str, Any]:
    """Descend into `{"properties": {...}}`-style wrappers when no field is at the top level."""
    wanted = {_norm(name) for name in fields} | {_norm(info.alias) for info in fields.values() if info.alias}
    for _depth in range(3):
        if any(isinstance(key, str) and _norm(key) in wanted for key in data):
            return data
        nested = [value for key, value in data.items() if isinstance(value, Mapping)]
        preferred = [data[key] for key in WRAPPER_KEYS if isinstance(data.get(key), Mapping)]
        if preferred:
            data = preferred[0]
        elif len(nested) == 1:
            data = nested[0]
        else:
            return data
    return data


def _coerce(value: Any, annotation: Any, info: FieldInfo | None, default: Any) -> Any:
    """Coerce one value to an annotation; raises ValueError/TypeError when it cannot."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _coerce(value, typing.get_args(annotation)[0], info, default)
    if annotation is Any or annotation is object or annotation is None:
        return value
    if origin in (typing.Union, types.UnionType):
        arms = typing.get_args(annotation)
        if type(None) in arms and (
            value is None or (isinstance(value, str) and _norm(value) in ("null", "none"))
        ):
            return None
        errors = []
        for arm in arms:
            if arm is type(None):
                continue
            try:
                return _coerce(value, arm, info, default)
            except (TypeError, ValueError) as error:
                errors.append(str(error))
        raise ValueError("; ".join(errors) or "no matching type")
    if origin is typing.Literal:
        return _choose(value, typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        members = list(annotation)
        chosen = _choose(value, [member.value for member in members] + [member.name for member in members])
        return annotation(chosen) if chosen in {m.value for m in members} else annotation[chosen]
    if annotation is bool:
        return _to_bool(value)
    if annotation is int:
        return int(_clamp(round(_to_number(value)), info, integer=True))
    if annotation is float:
        return float(_clamp(_to_number(value), info, integer=False))
    if annotation is str:
        return _to_str(value, info)
    if origin in (list, tuple, set, frozenset) or annotation in (list, tuple, set, frozenset):
        return _to_collection(value, annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if isinstance(value, annotation):
            return value
        if isinstance(value, Mapping) and isinstance(default, annotation):
            return coerce_to_schema(value, annotation, default).value
        return annotation.model_validate(value)
    return value


def _choose(value: Any, choices: Sequence[Any]) -> Any:
    """Map a reply to one allowed value: exact, case-insensitive, then a unique prefix or word match."""
    if value in choices and not isinstance(value, bool):
        return value
    text = _norm(str(value))
    if not text:
        raise ValueError(f"empty value, expected one of {list(choices)}")
    normalised = [(_norm(str(choice)), choice) for choice in choices]
    for norm, choice in normalised:
        if norm == text:
            return choice
    for test in (
        lambda norm: text.startswith(norm) or norm.startswith(text),
        lambda norm: re.search(rf"(?:^|_){re.escape(norm)}(?:_|$)", text) is not None,
    ):
        matches = {choice for norm, choice in normalised if norm and test(norm)}
        if len(matches) == 1:
            return matches.pop()
    raise ValueError(f"{value!r} is not one of {list(choices)}")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        words = _norm(value).split("_")
        if words and words[0] in TRUE_WORDS:
            return True
        if words and words[0] in FALSE_WORDS:
            return False
    raise ValueError(f"{value!r} is not a yes/no value")


def _to_number(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        if math.isnan(value):
            raise ValueError("NaN is not a number here")
        return float(value)
    if isinstance(value, str):
        match = NUMBER_RE.search(value)
        if match:
            number = float(match.group())
            return number / 100 if value[match.end() :].lstrip().startswith("%") else number
    raise ValueError(f"{value!r} is not a number")


def _clamp(number: float, info: FieldInfo | None, *, integer: bool) -> float:
    """Clamp to the field's ge/gt/le/lt bounds: a weak model's 11/10 still says 'very relevant'."""
    for item in info.metadata if info is not None else ():
        ge, gt = getattr(item, "ge", None), getattr(item, "gt", None)
        le, lt = getattr(item, "le", None), getattr(item, "lt", None)
        if ge is not None:
            number = max(number, ge)
        if gt is not None and number <= gt:
            number = gt + 1 if integer else math.nextafter(gt, math.inf)
        if le is not None:
            number = min(number, le)
        if lt is not None and number >= lt:
            number = lt - 1 if integer else math.nextafter(lt, -math.inf)
    return number


def _to_str(value: Any, info: FieldInfo | None) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float):
        text = str(value)
    elif isinstance(value, list | tuple):
        text = "; ".join(_to_str(item, None) for item in value)
    elif value is None:
        raise ValueError("null is not a string")
    else:
        text = json.dumps(value, ensure_ascii=False)
    for item in info.metadata if info is not None else ():
        max_length = getattr(item, "max_length", None)
        if max_length is not None:
            text = text[:max_length]
    return text


def _to_collection(value: Any, annotation: Any) -> Any:
    origin = typing.get_origin(annotation) or annotation
    args = [arg for arg in typing.get_args(annotation) if arg is not Ellipsis]
    if isinstance(value, str):
        items: list[Any] = [part.strip() for part in re.split(r"[\n;,]", value) if part.strip()]
    elif isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    elif value is None:
        items = []
    else:
        items = [value]
    if args:
        items = [_coerce(item, args[0], None, None) for item in items]
    return origin(items)
