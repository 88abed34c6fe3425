"""Metadata filters: one validated language, compiled identically for Chroma and for the keyword index.

The language is Chroma's (a Mongo-like dict): `{"field": value}` for equality, `{"field": {"$op": value}}`
with `$eq $ne $gt $gte $lt $lte $in $nin`, and `{"$and": [...]}` / `{"$or": [...]}`. A filter is validated
once into a tree (`Condition` / `Logical`), then rendered for Chroma or as SQL over the keyword index's JSON
metadata, so a bad filter fails with a message naming the problem and both search paths see the same
conditions. Its depth, conditions and $in / $nin values are bounded while it is parsed (stores crash on
huge expressions). `tenant` is not a filter field: searches scope the tenant themselves.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from config.settings import get_settings
from core.types import CHUNK_METADATA_DEFAULTS, MetadataValue, is_custom_metadata_key

COMPARISON_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
LIST_OPERATORS = ("$in", "$nin")
RANGE_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
LOGICAL_OPERATORS = ("$and", "$or")
#: Metadata keys a filter may use: the chunk schema plus numeric helpers; tenant is reserved for scoping.
RESERVED_FIELDS = frozenset({"tenant"})
FILTERABLE_FIELDS = frozenset(CHUNK_METADATA_DEFAULTS) - RESERVED_FIELDS
#: Keys that ingestion always fills with numbers: a filter value of another type (or a fractional bound on
#: an integer field) is refused: Chroma casts the operand and SQLite does not, so the two would disagree.
NUMERIC_FIELDS = frozenset(
    key
    for key, value in CHUNK_METADATA_DEFAULTS.items()
    if isinstance(value, int | float) and not isinstance(value, bool)
)
INTEGER_FIELDS = frozenset(key for key in NUMERIC_FIELDS if isinstance(CHUNK_METADATA_DEFAULTS[key], int))
MAX_FILTER_DEPTH = 8
#: Values of all the $in / $nin lists of one filter together (each is a bound parameter of the SQL).
MAX_FILTER_VALUES = 1000
#: The setting that bounds a filter's conditions (config/settings/search.py), named in the refusal.
MAX_CONDITIONS_SETTING = "RAG_FILTER_MAX_CONDITIONS"
#: Integers a filter may hold: SQLite and Chroma store 64-bit integers, and a larger one overflows in both.
MIN_FILTER_INT = -(2**63)
MAX_FILTER_INT = 2**63 - 1

_SQL_OPERATORS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


class FilterError(ValueError):
    """A metadata filter that cannot be applied; the message says what is wrong and where."""


@dataclass(frozen=True)
class Condition:
    """`field <operator> value` on one metadata key."""

    field: str
    operator: str
    value: MetadataValue | tuple[MetadataValue, ...]


@dataclass(frozen=True)
class Logical:
    """`$and` / `$or` over two or more sub-filters."""

    operator: str
    children: tuple[Condition | Logical, ...]


FilterNode = Condition | Logical
#: SQL dialects a filter renders to: the embedded catalog (SQLite) and the shared one (PostgreSQL).
SqlDialect = Literal["sqlite", "postgresql"]


class _Budget:
    """What is left of a filter's bounds while it is parsed: conditions and $in / $nin values."""

    def __init__(self, max_conditions: int) -> None:
        self.max_conditions = max_conditions
        self.conditions = 0
        self.values = 0

    def take_conditions(self, count: int, path: str, *, members: int = 0) -> None:
        """Count `count` more conditions, or FilterError past the bound; `members` (one each at least) are
        checked now, so a huge $or is refused before any member is parsed."""
        self.conditions += count
        if self.conditions + members > self.max_conditions:
            raise FilterError(
                f"{path}: filter holds more than {self.max_conditions} conditions "
                f"({MAX_CONDITIONS_SETTING}; each $and, $or and field condition counts)"
            )

    def take_values(self, count: int, path: str) -> None:
        """Count the values of one $in / $nin list, or FilterError past MAX_FILTER_VALUES in all."""
        self.values += count
        if self.values > MAX_FILTER_VALUES:
            raise FilterError(
                f"{path}: the filter's $in / $nin lists hold more than {MAX_FILTER_VALUES} values in all "
                "(MAX_FILTER_VALUES)"
            )


def configured_max_conditions() -> int:
    """RAG_FILTER_MAX_CONDITIONS of the environment's settings."""
    return get_settings().filter_max_conditions


def parse_filter(raw: str | dict[str, Any] | None, *, max_conditions: int | None = None) -> FilterNode | None:
    """Validate a filter given as a dict or JSON text; None or {} means no filter. `max_conditions`
    defaults to the environment's RAG_FILTER_MAX_CONDITIONS."""
    if raw is None:
        return None
    if isinstance(raw, str):
        if not raw.strip():
            return None
        raw = _load_json(raw)
    if not isinstance(raw, dict):
        raise FilterError(f"filter must be a JSON object, got {type(raw).__name__}")
    if not raw:
        return None
    budget = _Budget(configured_max_conditions() if max_conditions is None else max_conditions)
    return _parse_object(raw, path="filter", depth=0, budget=budget)


def _load_json(text: str) -> Any:
    """Filter JSON, refusing what no store can compare (NaN, Infinity, 1e400) and runaway nesting."""

    def refuse_constant(name: str) -> float:
        raise FilterError(f"filter: {name} is not a number a filter can compare (use a finite number)")

    def finite_float(token: str) -> float:
        value = float(token)
        if not math.isfinite(value):
            raise FilterError(f"filter: number {_abbreviate(token)} is out of range")
        return value

    try:
        return json.loads(text, parse_constant=refuse_constant, parse_float=finite_float)
    except json.JSONDecodeError as error:
        raise FilterError(f"filter is not valid JSON: {error.msg} at position {error.pos}") from None
    except RecursionError:
        raise FilterError(f"filter nested deeper than {MAX_FILTER_DEPTH} levels") from None
    except FilterError:
        raise
    except ValueError:  # Python refuses to parse integers of more than 4300 digits
        raise FilterError("filter: integer out of range (64-bit integers)") from None


def _abbreviate(token: str, limit: int = 24) -> str:
    return token if len(token) <= limit else f"{token[:limit]}... ({len(token)} characters)"


def _parse_object(raw: dict[str, Any], path: str, depth: int, budget: _Budget) -> FilterNode:
    if depth > MAX_FILTER_DEPTH:
        raise FilterError(f"{path}: filter nested deeper than {MAX_FILTER_DEPTH} levels")
    if not raw:
        raise FilterError(f"{path}: empty object")
    for key in raw:
        if not isinstance(key, str):
            raise FilterError(f"{path}: keys must be strings, got {key!r}")
    if len(raw) > 1:  # several fields of one object: an implicit $and over them
        budget.take_conditions(1, path, members=len(raw))
    nodes = [_parse_entry(key, value, f"{path}.{key}", depth, budget) for key, value in raw.items()]
    return nodes[0] if len(nodes) == 1 else Logical("$and", tuple(nodes))


def _parse_entry(key: str, value: Any, path: str, depth: int, budget: _Budget) -> FilterNode:
    if key in LOGICAL_OPERATORS:
        if not isinstance(value, list) or not value:
            raise FilterError(f"{path}: {key} needs a non-empty list of filters")
        budget.take_conditions(1, path, members=len(value))
        children = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise FilterError(f"{path}[{index}]: expected an object, got {type(item).__name__}")
            children.append(_parse_object(item, f"{path}[{index}]", depth + 1, budget))
        return children[0] if len(children) == 1 else Logical(key, tuple(children))
    if key.startswith("$"):
        raise FilterError(f"{path}: unknown operator {key!r} (logical operators: $and, $or)")
    if key in RESERVED_FIELDS:
        raise FilterError(f"{path}: '{key}' cannot be filtered on; pass the tenant with --tenant / tenant=")
    if key not in FILTERABLE_FIELDS and not is_custom_metadata_key(key):
        raise FilterError(
            f"{path}: unknown field {key!r}; known fields: {', '.join(sorted(FILTERABLE_FIELDS))}, "
            "or a custom metadata key (letters, digits and _)"
        )
    budget.take_conditions(1, path)
    if isinstance(value, dict):
        if len(value) != 1:
            raise FilterError(f"{path}: use one operator per field object, or combine with $and")
        ((operator, operand),) = value.items()
        return _condition(key, operator, operand, f"{path}.{operator}", budget)
    return _condition(key, "$eq", value, path, budget)


def _check_scalar(value: Any, path: str) -> MetadataValue:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not MIN_FILTER_INT <= value <= MAX_FILTER_INT:
            raise FilterError(
                f"{path}: integer of {value.bit_length()} bits is out of range (64-bit integers)"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FilterError(f"{path}: {value!r} is not a number a filter can compare")
        return value
    raise FilterError(f"{path}: value must be a string, number or boolean, got {type(value).__name__}")


def _condition(field: str, operator: str, operand: Any, path: str, budget: _Budget) -> Condition:
    if operator in LIST_OPERATORS:
        if not isinstance(operand, list) or not operand:
            raise FilterError(f"{path}: {operator} needs a non-empty list")
        budget.take_values(len(operand), path)
        values = tuple(_coerce(field, _check_scalar(item, path), path) for item in operand)
        return Condition(field, operator, _uniform(values, operator, path))
    if operator not in COMPARISON_OPERATORS:
        known = ", ".join(COMPARISON_OPERATORS + LIST_OPERATORS)
        raise FilterError(f"{path}: unknown operator {operator!r}; known: {known}")
    value = _check_scalar(operand, path)
    if operator in RANGE_OPERATORS and not _is_number(value):
        raise FilterError(f"{path}: {operator} compares numbers only, got {value!r}")
    return Condition(field, operator, _coerce(field, value, path))


def _is_number(value: MetadataValue) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _coerce(field: str, value: MetadataValue, path: str) -> MetadataValue:
    """`value` in the type `field` holds (see NUMERIC_FIELDS), or FilterError."""
    if field not in NUMERIC_FIELDS:
        return value
    if not _is_number(value):
        raise FilterError(f"{path}: '{field}' holds numbers, got {value!r}")
    if field in INTEGER_FIELDS:
        if not float(value).is_integer():
            raise FilterError(f"{path}: '{field}' holds whole numbers, got {value!r}")
        return int(value)
    return value


def _uniform(values: tuple[MetadataValue, ...], operator: str, path: str) -> tuple[MetadataValue, ...]:
    """The values of $in/$nin as one type, as Chroma requires (ints with floats become floats)."""
    kinds = {"boolean" if isinstance(v, bool) else "number" if _is_number(v) else "string" for v in values}
    if len(kinds) > 1:
        raise FilterError(f"{path}: {operator} values must all be of one type (strings, numbers or booleans)")
    if kinds == {"number"} and len({type(v) for v in values}) > 1:
        return tuple(float(v) for v in values)
    return values


def to_chroma_where(node: FilterNode | None) -> dict[str, Any] | None:
    """Render a validated filter as a Chroma `where` dict."""
    if node is None:
        return None
    if isinstance(node, Logical):
        return {node.operator: [to_chroma_where(child) for child in node.children]}
    value = list(node.value) if isinstance(node.value, tuple) else node.value
    return {node.field: {node.operator: value}}


def to_sql(
    node: FilterNode | None, column: str = "metadata", dialect: SqlDialect = "sqlite"
) -> tuple[str, list[Any]]:
    """Render a validated filter as a SQL boolean expression over a JSON text column, with its parameters
    (SQLite's json_extract, or PostgreSQL's jsonb with values sent as JSON)."""
    if node is None:
        return ("1" if dialect == "sqlite" else "TRUE"), []
    if isinstance(node, Logical):
        parts, params = [], []
        for child in node.children:
            sql, child_params = to_sql(child, column, dialect)
            parts.append(f"({sql})")
            params.extend(child_params)
        joiner = " AND " if node.operator == "$and" else " OR "
        return joiner.join(parts), params
    if dialect == "postgresql":
        return _to_postgres(node, column)
    target = f"json_extract({column}, '$.{node.field}')"
    if node.operator in LIST_OPERATORS:
        assert isinstance(node.value, tuple)
        marks = ", ".join("?" for _ in node.value)
        negation = "NOT " if node.operator == "$nin" else ""
        return f"{target} {negation}IN ({marks})", list(node.value)
    # Chroma's $ne keeps records whose value differs; a missing key never occurs (all keys are stored).
    return f"{target} {_SQL_OPERATORS[node.operator]} ?", [node.value]


def _to_postgres(node: Condition, column: str) -> tuple[str, list[Any]]:
    # Field names are validated identifiers (see _parse_entry), so they can be written into the SQL.
    target = f"(({column})::jsonb -> '{node.field}')"
    if node.operator in LIST_OPERATORS:
        assert isinstance(node.value, tuple)
        marks = ", ".join("%s::jsonb" for _ in node.value)
        negation = "NOT " if node.operator == "$nin" else ""
        return f"{target} {negation}IN ({marks})", [json.dumps(value) for value in node.value]
    sql = f"{target} {_SQL_OPERATORS[node.operator]} %s::jsonb"
    if node.operator in RANGE_OPERATORS:
        sql = f"jsonb_typeof({target}) = 'number' AND {sql}"
    return sql, [json.dumps(node.value)]


def matches(node: FilterNode | None, metadata: dict[str, Any]) -> bool:
    """Evaluate a validated filter on one metadata dict (the reference semantics of both renderings)."""
    if node is None:
        return True
    if isinstance(node, Logical):
        results = (matches(child, metadata) for child in node.children)
        return all(results) if node.operator == "$and" else any(results)
    if node.field not in metadata:
        return False
    actual = metadata[node.field]
    value = node.value
    if node.operator in ("$in", "$nin"):  # parse_filter gives these a tuple, the others a scalar
        found = actual in (value if isinstance(value, tuple) else (value,))
        return found if node.operator == "$in" else not found
    if node.operator == "$eq":
        return bool(actual == value)
    if node.operator == "$ne":
        return bool(actual != value)
    if isinstance(actual, bool) or not isinstance(actual, int | float) or isinstance(value, tuple):
        return False
    bound = float(value)  # a number: range operators compare numbers only (parse_filter)
    return {
        "$gt": actual > bound,
        "$gte": actual >= bound,
        "$lt": actual < bound,
        "$lte": actual <= bound,
    }[node.operator]
