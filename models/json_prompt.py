"""The plain-JSON prompt of a structured call: the schema's keys, allowed values and bounds, as a
model without grammar-constrained output must learn them.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from pydantic import BaseModel
from pydantic.fields import FieldInfo

#: How much of a failure reason is echoed back to the model in the retry prompt.
MAX_ERROR_IN_PROMPT = 200

FORMAT_INSTRUCTION = (
    "Answer with a JSON object only, no other text, with these keys:\n{fields}\nStart your reply with {{"
)
RETRY_INSTRUCTION = "Your previous reply could not be used ({error}). Reply with only the JSON object."


def as_messages(messages: LanguageModelInput) -> list[BaseMessage]:
    """A call's input (a string, a prompt value or message-likes) as messages."""
    if isinstance(messages, PromptValue):
        return messages.to_messages()
    if isinstance(messages, str):
        return [HumanMessage(content=messages)]
    return convert_to_messages(messages)


def with_instruction(
    messages: list[BaseMessage], schema: type[BaseModel], error: str | None
) -> list[BaseMessage]:
    """The messages with the JSON instruction (and the last failure) added to the final user turn:
    small models follow an instruction at the end of the prompt far better than one in a system message."""
    instruction = FORMAT_INSTRUCTION.format(fields=describe_fields(schema))
    if error:
        instruction += "\n" + RETRY_INSTRUCTION.format(error=error[:MAX_ERROR_IN_PROMPT])
    if messages and isinstance(messages[-1], HumanMessage) and isinstance(messages[-1].content, str):
        last = messages[-1]
        return [*messages[:-1], HumanMessage(content=f"{last.content}\n\n{instruction}")]
    return [*messages, HumanMessage(content=instruction)]


def describe_fields(schema: type[BaseModel]) -> str:
    """One line per field: key, expected value and description, as the plain-JSON prompt lists them."""
    lines = []
    for name, info in schema.model_fields.items():
        key = info.alias or name
        description = f" - {info.description}" if info.description else ""
        lines.append(f'- "{key}": {_describe_type(info.annotation, info)}{description}')
    return "\n".join(lines)


def _describe_type(annotation: Any, info: FieldInfo | None) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(choice) for choice in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(json.dumps(member.value) for member in annotation)
    if annotation is bool:
        return "true or false"
    if annotation in (int, float):
        kind = "integer" if annotation is int else "number"
        low, high = _bounds(info)
        if low is not None and high is not None:
            return f"{kind} from {low} to {high}"
        if low is not None:
            return f"{kind} >= {low}"
        if high is not None:
            return f"{kind} <= {high}"
        return kind
    if annotation is str:
        return "string"
    if origin in (list, tuple, set, frozenset):
        args = typing.get_args(annotation)
        return f"list of {_describe_type(args[0], None)}" if args else "list"
    if origin in (typing.Union, types.UnionType):
        arms = [arm for arm in typing.get_args(annotation) if arm is not type(None)]
        return " or ".join(_describe_type(arm, info) for arm in arms) + " (or null)"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object with keys " + ", ".join(f'"{key}"' for key in annotation.model_fields)
    return "value"


def _bounds(info: FieldInfo | None) -> tuple[Any, Any]:
    low = high = None
    for item in info.metadata if info is not None else ():
        low = next((v for v in (getattr(item, "ge", None), getattr(item, "gt", None)) if v is not None), low)
        high = next(
            (v for v in (getattr(item, "le", None), getattr(item, "lt", None)) if v is not None), high
        )
    return low, high
