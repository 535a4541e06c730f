"""An OpenAI chat-completions request body read into the gateway's terms: the client's
system messages, its list as `ClientMessage`s (core/conversation.py) and as the model
port's wire messages, the new turn's text and images, and the model options it asks for.

Every shape a client may send is checked here, so a malformed request is a 400 naming
what is wrong and never reaches a turn; and the client's tools are fitted to what the
agent's model can do.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sessiongate.core.attachments import ImageAttachment, decode_image
from sessiongate.core.conversation import ClientCall, ClientMessage, Role, image_digest
from sessiongate.errors import InvalidInput
from sessiongate.models.base import ModelOptions, ToolChoice, ToolSpec
from sessiongate.service.agents import AgentProfile

log = logging.getLogger("sessiongate.openai")

#: Tool names models accept (DESIGN.md §7).
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_DATA_URL = re.compile(r"data:(?P<media>[\w.+-]+/[\w.+-]+)(?:;[^,]*)?;base64,(?P<data>.*)", re.S)
#: The text a user message holding only images is kept as.
IMAGE_ONLY_TEXT = "[image]"


class InvalidMessages(InvalidInput):
    code = "invalid_messages"


class InvalidTools(InvalidInput):
    code = "invalid_tools"


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    system: tuple[str, ...]
    messages: tuple[ClientMessage, ...]
    #: The same messages in the model port's wire form (images as image parts).
    wire: tuple[dict[str, Any], ...]
    #: The text of the list's last user message: the turn's own text.
    content: str
    #: The images of the list's last message when it is the user's.
    attachments: tuple[ImageAttachment, ...]
    options: ModelOptions | None


@dataclass(frozen=True, slots=True)
class _Content:
    text: str
    images: tuple[str, ...]  # URLs


def _content(value: object, where: str) -> _Content:
    """A message's `content`: a string, null, or a list of parts (text and image_url;
    other part types are left out)."""
    if value is None:
        return _Content("", ())
    if isinstance(value, str):
        return _Content(value, ())
    if not isinstance(value, list):
        raise InvalidMessages(f"{where}.content must be a string, a list of parts or null")
    texts: list[str] = []
    images: list[str] = []
    for part in value:
        if not isinstance(part, Mapping):
            raise InvalidMessages(f"{where}.content holds a part that is not an object")
        kind = part.get("type")
        if kind in ("text", "input_text"):
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidMessages(f"{where}: a text part needs a string `text`")
            texts.append(text)
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if not isinstance(url, str) or not url:
                raise InvalidMessages(f"{where}: an image_url part needs a `url`")
            images.append(url)
    return _Content("\n".join(texts), tuple(images))


def _calls(value: object, where: str) -> tuple[ClientCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidMessages(f"{where}.tool_calls must be a list")
    calls = []
    for index, item in enumerate(value):
        function = item.get("function") if isinstance(item, Mapping) else None
        call_id = item.get("id") if isinstance(item, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(call_id, str) or not call_id:
            raise InvalidMessages(f"{where}.tool_calls[{index}] needs an `id` and a `function`")
        name, arguments = function.get("name"), function.get("arguments", "")
        if not isinstance(name, str) or not isinstance(arguments, str | type(None)):
            raise InvalidMessages(
                f"{where}.tool_calls[{index}].function needs a `name` and `arguments` text"
            )
        calls.append(ClientCall(call_id, name, arguments or ""))
    return tuple(calls)


def _wire_user(content: _Content, vision: bool) -> dict[str, Any]:
    if not content.images:
        return {"role": "user", "content": content.text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": content.text}] if content.text else []
    for url in content.images:
        found = _DATA_URL.fullmatch(url)
        if vision and found is not None:
            parts.append({"type": "image", "media_type": found["media"], "data": found["data"]})
        else:
            parts.append({"type": "text", "text": f"[image: {_shown(url)}]"})
    return {"role": "user", "content": parts}


def _shown(url: str) -> str:
    """An image URL as text: a web address as it is, inline data only by its type."""
    found = _DATA_URL.fullmatch(url)
    return f"inline {found['media']} not shown" if found else url[:500]


def parse_messages(
    raw: Sequence[Mapping[str, Any]], *, vision: bool
) -> tuple[tuple[str, ...], tuple[ClientMessage, ...], tuple[dict[str, Any], ...]]:
    """(system texts, the list, its wire form)."""
    system: list[str] = []
    messages: list[ClientMessage] = []
    wire: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for index, item in enumerate(raw):
        where = f"messages[{index}]"
        role = item.get("role")
        content = _content(item.get("content"), where)
        if role in ("system", "developer"):
            if content.text.strip():
                system.append(content.text)
        elif role == "user":
            messages.append(
                ClientMessage(
                    Role.USER,
                    content.text,
                    images=tuple(image_digest(u) for u in content.images),
                )
            )
            wire.append(_wire_user(content, vision))
        elif role == "assistant":
            calls = _calls(item.get("tool_calls"), where)
            names.update((c.call_id, c.name) for c in calls)
            messages.append(ClientMessage(Role.ASSISTANT, content.text, calls=calls))
            entry: dict[str, Any] = {"role": "assistant", "content": content.text}
            if calls:
                entry["tool_calls"] = [
                    {"id": c.call_id, "name": c.name, "arguments": c.arguments} for c in calls
                ]
            wire.append(entry)
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidMessages(f"{where}: a tool message needs its `tool_call_id`")
            name = names.get(call_id)
            if name is None:
                raise InvalidMessages(
                    f"{where}: tool_call_id {call_id[:64]!r} answers no call made before it"
                )
            messages.append(ClientMessage(Role.TOOL, content.text, call_id=call_id, name=name))
            wire.append(
                {"role": "tool", "tool_call_id": call_id, "name": name, "content": content.text}
            )
        else:
            raise InvalidMessages(
                f"{where}.role must be system, developer, user, assistant or tool"
            )
    if not messages or messages[-1].role is Role.ASSISTANT:
        raise InvalidMessages(
            "the last message must be the user's new message (or the results of the tools"
            " the model called)"
        )
    if not any(m.role is Role.USER for m in messages):
        raise InvalidMessages("the messages hold no user message")
    return tuple(system), tuple(messages), tuple(wire)


def new_images(
    raw: Sequence[Mapping[str, Any]], *, max_attachments: int, max_attachment_bytes: int
) -> tuple[ImageAttachment, ...]:
    """The inline images of the list's last message, when it is the user's, checked as
    any turn's attachments are; a web address is mentioned in the text, not fetched."""
    last = raw[-1]
    if last.get("role") != "user":
        return ()
    urls = [
        u for u in _content(last.get("content"), "messages[-1]").images if u.startswith("data:")
    ]
    if len(urls) > max_attachments:
        raise InvalidInput(
            f"a turn may carry at most {max_attachments} images (limits.max_attachments)",
            code="too_many_attachments",
        )
    images = []
    for url in urls:
        found = _DATA_URL.fullmatch(url)
        if found is None:
            raise InvalidMessages("an image's data URL must be base64 (data:<type>;base64,…)")
        images.append(
            decode_image(found["media"], found["data"], None, max_bytes=max_attachment_bytes)
        )
    return tuple(images)


def turn_text(messages: Sequence[ClientMessage], raw: Sequence[Mapping[str, Any]]) -> str:
    """The text of the last user message (what the turn's lifecycle, safety gate and
    hooks read); web images are named in it, an image alone reads `[image]`."""
    for index in range(len(raw) - 1, -1, -1):
        if raw[index].get("role") == "user":
            content = _content(raw[index].get("content"), f"messages[{index}]")
            text = content.text
            remote = [u for u in content.images if not u.startswith("data:")]
            if remote:
                text = "\n".join([text, *(f"[image: {_shown(u)}]" for u in remote)]).strip()
            return text if text.strip() else IMAGE_ONLY_TEXT
    raise InvalidMessages("the messages hold no user message")


def parse_options(
    tools: object, tool_choice: object, response_format: object
) -> ModelOptions | None:
    """The client's `tools`, `tool_choice` and `response_format` for the model port, or
    None when it asked for none of them."""
    specs: list[ToolSpec] = []
    if tools is not None:
        if not isinstance(tools, list):
            raise InvalidTools("tools must be a list")
        for index, tool in enumerate(tools):
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
                raise InvalidTools(f"tools[{index}] must be a function tool")
            if not isinstance(function, Mapping):
                raise InvalidTools(f"tools[{index}] needs a `function`")
            name = function.get("name")
            if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
                raise InvalidTools(
                    f"tools[{index}].function.name must match ^[a-zA-Z0-9_-]{{1,64}}$"
                )
            description = function.get("description") or ""
            parameters = function.get("parameters") or {"type": "object", "properties": {}}
            if not isinstance(description, str) or not isinstance(parameters, Mapping):
                raise InvalidTools(
                    f"tools[{index}].function: description must be text, parameters an object"
                )
            specs.append(ToolSpec(name, description, dict(parameters)))
    choice: ToolChoice | None = None
    if isinstance(tool_choice, str):
        if tool_choice not in ("auto", "none", "required"):
            raise InvalidTools("tool_choice must be auto, none, required or a function")
        choice = tool_choice
    elif isinstance(tool_choice, Mapping):
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not any(s.name == name for s in specs):
            raise InvalidTools("tool_choice names no tool of `tools`")
        choice = name
    elif tool_choice is not None:
        raise InvalidTools("tool_choice must be auto, none, required or a function")
    fmt: dict[str, Any] | None = None
    if response_format is not None:
        if not isinstance(response_format, Mapping) or not isinstance(
            response_format.get("type"), str
        ):
            raise InvalidInput(
                "response_format must be an object with a `type`", code="invalid_response_format"
            )
        if response_format["type"] not in ("text", "json_object", "json_schema"):
            raise InvalidInput(
                "response_format.type must be text, json_object or json_schema",
                code="invalid_response_format",
            )
        if response_format["type"] != "text":
            fmt = dict(response_format)
    if not specs and fmt is None:
        return None
    return ModelOptions(
        tools=tuple(specs), tool_choice=choice if specs else None, response_format=fmt
    )


def parse_request(
    raw: Sequence[Mapping[str, Any]],
    *,
    tools: object,
    tool_choice: object,
    response_format: object,
    vision: bool,
    max_attachments: int,
    max_attachment_bytes: int,
) -> ParsedRequest:
    system, messages, wire = parse_messages(raw, vision=vision)
    return ParsedRequest(
        system=system,
        messages=messages,
        wire=wire,
        content=turn_text(messages, raw),
        attachments=new_images(
            raw, max_attachments=max_attachments, max_attachment_bytes=max_attachment_bytes
        ),
        options=parse_options(tools, tool_choice, response_format),
    )


def fit_client_tools(
    agent: AgentProfile, model_calls_tools: bool, parsed: ParsedRequest
) -> tuple[ParsedRequest, dict[str, str]]:
    """The request as the agent's model can take it. A model that cannot call tools (by
    its adapter, or an agent with a hand-off, whose model is declared tool-less) answers in
    text when the client only offers tools (`tool_choice` absent, `auto` or `none`: Open
    WebUI 0.12 offers its 36 built-in tools with every chat request), and the response
    says so (`X-Client-Tools: dropped`); a client that requires a tool gets 400
    `tools_not_supported`, since no answer could honour it."""
    options = parsed.options
    if options is None or not options.tools or (model_calls_tools and agent.handoff is None):
        return parsed, {}
    if options.tool_choice not in (None, "auto", "none"):
        raise InvalidInput(
            f"agent {agent.name!r} answers with a model that cannot call tools, and the"
            " request requires one (tool_choice)",
            code="tools_not_supported",
        )
    log.info("client tools dropped", extra={"agent": agent.name, "tools": len(options.tools)})
    fitted = replace(options, tools=(), tool_choice=None)
    return replace(parsed, options=fitted), {"X-Client-Tools": "dropped"}
