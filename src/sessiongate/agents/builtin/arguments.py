"""Built-in tools declare their arguments as pydantic models: one definition gives the
JSON Schema a model sees and the checked values the tool uses.

The registry has already validated the arguments against the schema; parsing them again
here adds the rules JSON Schema cannot say simply (one of two ways to name a place) and
gives the tool typed values instead of a dict.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sessiongate.agents.tools import ToolFailed

Arguments = TypeVar("Arguments", bound=BaseModel)


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema without pydantic's `title`s (noise in every prompt)."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def parse_arguments(model: type[Arguments], arguments: dict[str, Any]) -> Arguments:
    """The arguments as `model`, or ToolFailed with what is wrong (the model reads it)."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:3]:
            where = ".".join(str(p) for p in error.get("loc", ()))
            message = str(error.get("msg", "invalid"))
            problems.append(f"{where}: {message}" if where else message)
        raise ToolFailed("invalid arguments: " + "; ".join(problems)) from None
