"""The Anthropic Messages API wire shapes: the model port's neutral messages and options
(models/base.py) as a request.

The API wants the system prompt apart from the messages, strictly alternating roles and a
user message first; tool results travel as `tool_result` blocks of a user message, right
after the assistant message whose `tool_use` blocks they answer. A message of text only
stays a plain string, so a text-only request is what it always was.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sessiongate.models.base import ModelOptions, WireMessage, text_of

#: Stands in when the context window starts on an assistant message.
LEADING_USER_PLACEHOLDER = "(earlier conversation omitted)"
#: Tool results with these statuses are marked `is_error` for the model.
_ERROR_STATUSES = frozenset({"error", "interrupted"})

#: A turn's content: plain text, or a list of content blocks.
Content = str | list[dict[str, Any]]


def to_anthropic(messages: Sequence[WireMessage]) -> tuple[str, list[dict[str, Any]]]:
    """`(system, messages)`: system texts joined; same-role neighbours merged (tool results
    and the user message after them become one user turn, results first); empty messages
    dropped (the API rejects empty text); a user message first."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role", "user")
        if role == "system":
            text = text_of(message.get("content", ""))
            if text.strip():
                system.append(text)
        elif role == "tool":
            _append(turns, "user", [_tool_result(message)])
        elif role == "assistant":
            _append(turns, "assistant", _assistant(message))
        else:
            _append(turns, "user", _user(message.get("content", "")))
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": LEADING_USER_PLACEHOLDER})
    return "\n\n".join(system), turns


def _append(turns: list[dict[str, Any]], role: str, content: Content) -> None:
    if not content or (isinstance(content, str) and not content.strip()):
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"] = _merge(turns[-1]["content"], content)
    else:
        turns.append({"role": role, "content": content})


def _merge(before: Content, after: Content) -> Content:
    if isinstance(before, str) and isinstance(after, str):
        return before + "\n\n" + after
    return _blocks(before) + _blocks(after)


def _blocks(content: Content) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _user(content: object) -> Content:
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text":
            text = str(part.get("text", ""))
            if text.strip():  # the API rejects empty text blocks
                blocks.append({"type": "text", "text": text})
        elif part.get("type") == "image":
            source = {
                "type": "base64",
                "media_type": str(part.get("media_type", "")),
                "data": str(part.get("data", "")),
            }
            blocks.append({"type": "image", "source": source})
    return blocks


def _assistant(message: WireMessage) -> Content:
    text = text_of(message.get("content", ""))
    calls = message.get("tool_calls")
    thinking = _thinking(message.get("reasoning"))
    if not calls and not thinking:
        return text
    blocks: list[dict[str, Any]] = [*thinking]
    if text.strip():
        blocks.append({"type": "text", "text": text})
    blocks += [
        {
            "type": "tool_use",
            "id": str(call.get("id", "")),
            "name": str(call.get("name", "")),
            "input": _input(call.get("arguments")),
        }
        for call in calls or ()
    ]
    return blocks


def _thinking(reasoning: object) -> list[dict[str, Any]]:
    """The signed thinking blocks an assistant message carries, replayed first in its
    content as the API requires; a block without a signature is not taken back."""
    blocks: list[dict[str, Any]] = []
    for block in reasoning if isinstance(reasoning, list) else ():
        if not isinstance(block, Mapping):
            continue
        text, signature = block.get("text"), block.get("signature")
        if isinstance(text, str) and isinstance(signature, str) and signature:
            blocks.append({"type": "thinking", "thinking": text, "signature": signature})
    return blocks


def _input(arguments: object) -> dict[str, Any]:
    """A call's arguments as the object the API wants. Arguments that are not a JSON object
    were already answered with an error result; `{}` keeps the thread valid."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {}


def _tool_result(message: WireMessage) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": str(message.get("tool_call_id", "")),
    }
    content = text_of(message.get("content", ""))
    if content:  # optional in the API, and an empty text is what it rejects
        block["content"] = content
    if message.get("status") in _ERROR_STATUSES:
        block["is_error"] = True
    return block


def tool_fields(options: ModelOptions) -> dict[str, Any]:
    """The `tools` and `tool_choice` arguments `options` ask for; none without tools (a
    tool_choice means nothing then, and the OpenAI adapter must drop it too)."""
    if not options.tools:
        return {}
    fields: dict[str, Any] = {
        "tools": [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": dict(tool.parameters),
            }
            for tool in options.tools
        ]
    }
    if options.tool_choice is not None:
        fields["tool_choice"] = tool_choice(options.tool_choice)
    return fields


def tool_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    return {"type": "tool", "name": choice}


def json_instruction(response_format: Mapping[str, Any] | None) -> str:
    """A system instruction standing in for OpenAI's `response_format`, or "".

    The Messages API has no `response_format` parameter. Its structured outputs
    (`output_config.format`) need a schema and a model that supports them, while a JSON
    object without a schema is what the planner asks for, so an instruction it is: every
    model follows it, and the caller validates what comes back anyway."""
    if response_format is None:
        return ""
    kind = response_format.get("type")
    if kind not in ("json_object", "json_schema"):
        return ""
    instruction = "Answer with one JSON object only: no text before or after it, no code fences."
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if kind == "json_schema" and isinstance(schema, Mapping):
        instruction += " It must match this JSON Schema: " + json.dumps(
            schema, separators=(",", ":")
        )
    return instruction
