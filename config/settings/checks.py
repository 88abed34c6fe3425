"""One value checked against one setting's type and range, outside a settings read: a run's context
override (state/context.py) accepts exactly what the setting accepts.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, get_args

from pydantic import TypeAdapter, ValidationError

from config.settings.engine import Settings


@cache
def _adapter(setting: str) -> tuple[TypeAdapter[Any], tuple[str, ...]]:
    """A validator of one setting's type and constraints (ge/le/min_length...), and its Literal choices."""
    info = Settings.model_fields[setting]
    annotation: Any = info.annotation
    constrained: Any = Annotated[(annotation, *info.metadata)] if info.metadata else annotation
    choices = get_args(annotation) if getattr(annotation, "__origin__", None) is Literal else ()
    return TypeAdapter(constrained), tuple(str(choice) for choice in choices)


def checked_value(setting: str, value: Any, label: str, variable: str) -> Any:
    """`value` as `setting` holds it; ValueError naming `label` and `variable` when invalid."""
    adapter, choices = _adapter(setting)
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        if choices:
            raise ValueError(f"{label}={value!r}: choose one of {', '.join(choices)}") from None
        reason = error.errors()[0].get("msg", "invalid value")
        raise ValueError(f"{label}={value!r} is out of range ({variable}): {reason}") from None
