"""The OpenAI chat-completions wire shapes: the model port's neutral messages and options
(models/base.py) as a request body, and streamed tool-call pieces assembled into whole calls.

A plain text message becomes `{"role", "content"}` and nothing else, and options add fields
only when they ask for something, so the body of a text-only request is what it always was.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from sessiongate.models.base import ModelOptions, ToolCallChunk, WireMessage, text_of
from sessiongate.models.retry import BadChunk
from sessiongate.models.tool_arguments import ARGUMENT_CEILING, ArgumentBuffer


def to_openai(messages: Sequence[WireMessage]) -> list[dict[str, Any]]:
    """The `messages` of a chat-completions request."""
    return [_message(m) for m in messages]


def _message(message: WireMessage) -> dict[str, Any]:
    role = message.get("role", "user")
    content = message.get("content", "")
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": str(message.get("tool_call_id", "")),
            "content": text_of(content),
        }
    calls = message.get("tool_calls")
    if role == "assistant" and calls:
        return {
            "role": "assistant",
            # null, not "": the API's own shape for a step that only called tools.
            "content": text_of(content) or None,
            "tool_calls": [
                {
                    "id": str(call.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(call.get("name", "")),
                        # A call made without arguments is replayed as an empty object.
                        "arguments": str(call.get("arguments") or "{}"),
                    },
                }
                for call in calls
            ],
        }
    if isinstance(content, list):
        if role == "user":  # images are only accepted in user messages
            return {"role": role, "content": [p for p in map(_part, content) if p is not None]}
        return {"role": role, "content": text_of(content)}
    return {"role": role, "content": content}


def _part(part: object) -> dict[str, Any] | None:
    if not isinstance(part, Mapping):
        return None
    if part.get("type") == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if part.get("type") == "image":
        url = f"data:{part.get('media_type', '')};base64,{part.get('data', '')}"
        return {"type": "image_url", "image_url": {"url": url}}
    return None  # a part type this port does not define


def option_fields(options: ModelOptions) -> dict[str, Any]:
    """The request fields `options` ask for; none at all for `NO_OPTIONS`."""
    fields: dict[str, Any] = {}
    if options.tools:
        fields["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    # orjson encodes dicts, not any Mapping.
                    "parameters": dict(tool.parameters),
                },
            }
            for tool in options.tools
        ]
        # Only beside tools: the API rejects a tool_choice when no tool is offered.
        if options.tool_choice is not None:
            fields["tool_choice"] = tool_choice(options.tool_choice)
    if options.response_format is not None:
        fields["response_format"] = dict(options.response_format)
    return fields


def tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


class _Call:
    __slots__ = ("arguments", "call_id", "name")

    def __init__(self, max_argument_chars: int) -> None:
        self.call_id = ""
        self.name = ""
        self.arguments = ArgumentBuffer(max_argument_chars)


class ToolCallPieces:
    """The tool calls of one streamed choice, assembled from `delta.tool_calls` pieces.

    Each piece names its call by `index` (parallel calls interleave); the first piece of a
    call carries its `id` and `function.name`, later ones append to `function.arguments`.
    Servers that repeat the id or name on every piece are fine; a piece that contradicts
    its call, or has the wrong types, is a `BadChunk`. A few compatible servers send each
    call whole in one piece without an `index`: such a piece with a new id starts the next
    call, one without an id continues the last. Of each call's arguments, the first
    `max_argument_chars` are kept and the rest only counted (models/tool_arguments.py).
    """

    __slots__ = ("_calls", "_closed", "_last", "_max_argument_chars")

    def __init__(self, max_argument_chars: int = ARGUMENT_CEILING) -> None:
        self._calls: dict[int, _Call] = {}
        self._last: int | None = None
        self._closed = False
        self._max_argument_chars = max_argument_chars

    def add(self, pieces: object) -> None:
        if self._closed:
            raise BadChunk("a tool call piece after the finish_reason")
        if not isinstance(pieces, list):
            raise BadChunk("delta.tool_calls is not a list")
        for piece in pieces:
            if not isinstance(piece, dict):
                raise BadChunk("a tool call piece that is not an object")
            call_id = piece.get("id")
            function = piece.get("function")
            if function is None:
                function = {}
            if not isinstance(function, dict):
                raise BadChunk("a tool call piece whose function is not an object")
            name, arguments = function.get("name"), function.get("arguments")
            for value, what in ((call_id, "id"), (name, "name"), (arguments, "arguments")):
                if value is not None and not isinstance(value, str):
                    raise BadChunk(f"a tool call piece whose {what} is not a string")
            call = self._call(piece.get("index"), call_id)
            if call_id:
                if call.call_id and call.call_id != call_id:
                    raise BadChunk("a tool call piece with another call's id")
                call.call_id = call_id
            if name:
                if call.name and call.name != name:
                    raise BadChunk("a tool call piece with another name for its call")
                call.name = name
            if arguments:
                call.arguments.add(arguments)

    def _call(self, index: object, call_id: str | None) -> _Call:
        if index is None:
            last = self._calls.get(self._last) if self._last is not None else None
            if last is None or (call_id and call_id != last.call_id):
                index = max(self._calls, default=-1) + 1
            else:
                index = self._last
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise BadChunk("a tool call piece without a valid index")
        self._last = index
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _Call(self._max_argument_chars)
        return call

    def finish(self) -> list[ToolCallChunk]:
        """The whole calls in index order; no piece may follow."""
        self._closed = True
        calls: list[ToolCallChunk] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise BadChunk("a tool call without a name")
            # Some local servers send no id; the tool's result must still name its
            # call, uniquely within the thread.
            call_id = call.call_id or f"call_{secrets.token_hex(8)}"
            calls.append(call.arguments.chunk(call_id, call.name))
        return calls

    def argument_text(self) -> str:
        """What the calls' arguments hold so far, as kept (for a usage estimate)."""
        return "".join(call.arguments.text() for call in self._calls.values())
