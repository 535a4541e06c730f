"""OpenAI's Responses API in the gateway's terms, pure (DESIGN.md §14): a request's
`input` items as chat-completions messages (what service/conversation/ reconciles), its
tools split into function tools (client tools) and hosted ones (left out and said),
`text.format` as a `response_format`, and the answer as a `response` object with its
output items. The streamed events are in core/response_events.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The roles a message item may have; `developer` and `system` become system messages.
MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})
#: Input items read but not sent on (the upstream takes none of them back).
SKIPPED_ITEMS = frozenset({"reasoning", "item_reference"})


class InvalidResponseInput(ValueError):
    """A request the Responses API cannot take; `param` names the field (OpenAI's
    error shape)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class ToolSplit:
    #: Function tools in chat-completions' shape (client tools).
    functions: tuple[dict[str, Any], ...]
    #: The types of the hosted tools left out (`web_search`, …).
    dropped: tuple[str, ...]


@dataclass(slots=True)
class _Assistant:
    """Assistant items gathered into one chat message (text, then tool calls)."""

    texts: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"role": "assistant", "content": "".join(self.texts)}
        if self.calls:
            entry["tool_calls"] = list(self.calls)
        return entry


def _text_of(content: object, where: str) -> str | list[dict[str, Any]]:
    """A message item's content: a string, or its parts (text parts joined; an image
    kept as chat's image_url part)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidResponseInput(f"{where}.content must be a string or a list of parts", where)
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise InvalidResponseInput(f"{where}.content[{index}] must be an object", where)
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidResponseInput(
                    f"{where}.content[{index}] needs a string `text`", f"{where}.content"
                )
            texts.append(text)
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            images.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        # Other parts (files, refusals, audio) are left out.
    if not images:
        return "\n".join(texts)
    text_parts = [{"type": "text", "text": t} for t in texts]
    return [*text_parts, *images]


def _output_text(value: object, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text") for p in value if isinstance(p, Mapping)]
        return "\n".join(p for p in parts if isinstance(p, str))
    raise InvalidResponseInput(f"{where}.output must be a string or a list of parts", where)


def input_messages(raw: object, instructions: str | None = None) -> list[dict[str, Any]]:
    """`instructions` and `input` as a chat-completions message list. Assistant message
    items and the function calls after them become one assistant message; reasoning
    items and references are left out."""
    messages: list[dict[str, Any]] = []
    if instructions is not None and instructions.strip():
        messages.append({"role": "system", "content": instructions})
    if isinstance(raw, str):
        if not raw.strip():
            raise InvalidResponseInput("input must not be empty", "input")
        return [*messages, {"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise InvalidResponseInput("input must be a string or a non-empty list of items", "input")
    pending: _Assistant | None = None
    for index, item in enumerate(raw):
        where = f"input[{index}]"
        if not isinstance(item, Mapping):
            raise InvalidResponseInput(f"{where} must be an object", "input")
        kind = item.get("type", "message")
        if kind in SKIPPED_ITEMS:
            continue
        if kind == "message" and item.get("role") == "assistant":
            pending = pending or _Assistant()
            text = _text_of(item.get("content"), where)
            pending.texts.append(text if isinstance(text, str) else "")
            continue
        if kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            arguments = item.get("arguments", "")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
                raise InvalidResponseInput(f"{where} needs a `call_id` and a `name`", "input")
            if not isinstance(arguments, str):
                raise InvalidResponseInput(f"{where}.arguments must be a string", "input")
            pending = pending or _Assistant()
            pending.calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
            continue
        if pending is not None:
            messages.append(pending.message())
            pending = None
        if kind == "message":
            role = item.get("role")
            if role not in MESSAGE_ROLES:
                raise InvalidResponseInput(
                    f"{where}.role must be user, assistant, system or developer", "input"
                )
            messages.append({"role": role, "content": _text_of(item.get("content"), where)})
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidResponseInput(f"{where} needs the `call_id` it answers", "input")
            output = _output_text(item.get("output", ""), where)
            messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        elif isinstance(kind, str) and kind.endswith(("_call", "_call_output")):
            # A hosted or custom tool's call or output (web_search_call,
            # custom_tool_call_output, …): such tools are never offered, nothing to send on.
            continue
        else:
            raise InvalidResponseInput(f"{where}.type {str(kind)[:40]!r} is not supported", "input")
    if pending is not None:
        messages.append(pending.message())
    return messages


def split_tools(tools: object) -> ToolSplit:
    """Function tools (Responses' flat shape) as chat-completions tools; every other
    tool type is hosted and left out."""
    if tools is None:
        return ToolSplit((), ())
    if not isinstance(tools, list):
        raise InvalidResponseInput("tools must be a list", "tools")
    functions: list[dict[str, Any]] = []
    dropped: list[str] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("type"), str):
            raise InvalidResponseInput(f"tools[{index}] needs a `type`", "tools")
        if tool["type"] != "function":
            dropped.append(str(tool["type"])[:64])
            continue
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        functions.append({"type": "function", "function": function})
    return ToolSplit(tuple(functions), tuple(dict.fromkeys(dropped)))


def tool_choice_of(choice: object) -> str | dict[str, Any] | None:
    """`tool_choice` in chat-completions' shape (`{"type": "function", "name"}` is
    Responses' flat form)."""
    if choice is None or isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    raise InvalidResponseInput(
        "tool_choice must be auto, none, required or a function", "tool_choice"
    )


def response_format_of(text: object) -> dict[str, Any] | None:
    """`text.format` as chat-completions' `response_format` (structured output)."""
    if text is None:
        return None
    if not isinstance(text, Mapping):
        raise InvalidResponseInput("text must be an object", "text")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or fmt.get("type") not in (
        "text",
        "json_object",
        "json_schema",
    ):
        raise InvalidResponseInput(
            "text.format.type must be text, json_object or json_schema", "text.format"
        )
    if fmt["type"] != "json_schema":
        return {"type": fmt["type"]}
    schema = {k: fmt[k] for k in ("name", "schema", "description", "strict") if k in fmt}
    if not isinstance(schema.get("name"), str) or not isinstance(schema.get("schema"), Mapping):
        raise InvalidResponseInput(
            "text.format of type json_schema needs a `name` and a `schema`", "text.format"
        )
    return {"type": "json_schema", "json_schema": schema}


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def call_item(item_id: str, call: Mapping[str, str], status: str = "completed") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call["id"],
        "name": call["name"],
        "arguments": call["arguments"],
        "status": status,
    }


def output_items(
    response_id: str, text: str, calls: Sequence[Mapping[str, str]], status: str = "completed"
) -> list[dict[str, Any]]:
    """The answer's output: its text as one message (when there is text), then one
    `function_call` item per call of the client's tools."""
    suffix = response_id.removeprefix("resp_")
    items = [message_item(f"msg_{suffix}", text, status)] if text or not calls else []
    items.extend(call_item(f"fc_{suffix}_{i}", call) for i, call in enumerate(calls))
    return items


#: The error of a background response whose gateway process stopped while it ran.
ABANDONED_ERROR = {
    "code": "server_error",
    "message": "the gateway process running this response stopped before it ended",
}


def abandoned_response(
    body: Mapping[str, Any],
    text: str,
    *,
    end_status: str | None,
    usage: Mapping[str, Any] | None,
    cancelled: bool,
) -> dict[str, Any]:
    """A background response left `in_progress` by a process that died, ended as its
    turn's stored reply says, the stored text kept: `completed` (`incomplete` when cut)
    when the turn had stored its whole reply (`end_status` complete or truncated), else
    `failed` with a `server_error` (as OpenAI ends a response its server could not
    finish), or `cancelled` when a cancel had been asked for."""
    ended = dict(body)
    response_id = str(body["id"])
    if end_status in ("complete", "truncated") and not cancelled:
        cut = end_status == "truncated"
        ended.update(
            status="incomplete" if cut else "completed",
            error=None,
            incomplete_details={"reason": "max_output_tokens"} if cut else None,
            output=output_items(response_id, text, [], "incomplete" if cut else "completed"),
            usage=usage_of(usage),
        )
        return ended
    suffix = response_id.removeprefix("resp_")
    ended.update(
        status="cancelled" if cancelled else "failed",
        error=None if cancelled else dict(ABANDONED_ERROR),
        output=[message_item(f"msg_{suffix}", text, "incomplete")] if text else [],
    )
    return ended


def usage_of(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """The turn's usage (chat-completions' names) in the Responses API's shape, with
    `estimated: true` kept when the gateway counted it (models/base.py `Usage`)."""
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    shaped: dict[str, Any] = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": int(usage.get("total_tokens") or prompt + completion),
    }
    if usage.get("estimated") is True:
        shaped["estimated"] = True
    return shaped


def as_chat_message(output: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A stored response's output as the assistant message a chat-completions client
    would have shown (what a `previous_response_id` continues)."""
    found = input_messages([dict(item) for item in output] or [_EMPTY_ANSWER])
    assistant = [m for m in found if m["role"] == "assistant"]
    return assistant[0] if assistant else {"role": "assistant", "content": ""}


_EMPTY_ANSWER = {"type": "message", "role": "assistant", "content": ""}


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            texts = [p.get("text") for p in content or [] if isinstance(p, Mapping)]
            return "\n".join(t for t in texts if isinstance(t, str))
    return None


def listed_items(raw: object, response_id: str) -> list[dict[str, Any]]:
    """The request's input as `input_items` lists it: each item with an `id` (the
    client's own, else one derived from the response's) and message content as parts."""
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    suffix = response_id.removeprefix("resp_")
    items: list[dict[str, Any]] = []
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(item, Mapping):
            continue
        shown = dict(item)
        shown.setdefault("type", "message")
        shown.setdefault("id", f"item_{suffix}_{index}")
        if shown["type"] == "message":
            shown.setdefault("status", "completed")
            if isinstance(shown.get("content"), str):
                part = "output_text" if shown.get("role") == "assistant" else "input_text"
                shown["content"] = [{"type": part, "text": shown["content"]}]
        items.append(shown)
    return items
