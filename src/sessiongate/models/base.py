"""The model port: what a request to a model holds and what a model streams back.

A request is a list of provider-neutral wire messages plus `ModelOptions` (the tools
offered, `tool_choice`, a JSON response format). Each adapter translates both into its
provider's own shapes. A model streams `TextDelta`s, whole `ToolCallChunk`s (the adapter
assembles argument deltas, keeping parallel calls apart) and, last, its `Usage`. Adapters
that see them also stream `ReasoningDelta`s (the model's reasoning text, apart from the
answer) and, before the usage, a `StopReason` when the model stopped for a reason a client
must hear (`length`: the output token limit).

Wire messages (plain dicts, so the hot text path builds no objects):

- `{"role": "system" | "user" | "assistant", "content": str}`
- a user message whose `content` is a list of parts: `{"type": "text", "text": str}` and
  `{"type": "image", "media_type": "image/png", "data": <base64>}`
- an assistant message that asked for tools: `{"role": "assistant", "content": str,
  "tool_calls": [{"id": str, "name": str, "arguments": <JSON text>}]}`
- a tool result: `{"role": "tool", "tool_call_id": str, "name": str, "content": str}`
- an assistant message may carry the reasoning the model returned with it:
  `"reasoning": [{"text": str, "signature": str | None}]`. The Anthropic adapter replays
  signed blocks as thinking blocks (the API requires them back in a tool-use turn);
  chat-completions servers take no reasoning back, so that adapter leaves it out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

# A tool as a model sees it is a record every layer shares, so it lives in the core.
from sessiongate.core.tool_calls import ToolSpec as ToolSpec


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (chat-completions `reasoning_content` or
    `reasoning` deltas; Anthropic thinking). `signature` is Anthropic's signature of the
    thinking block so far (sent once, at the block's end): the block is replayed with it,
    or the upstream refuses it."""

    text: str
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class StopReason:
    """Why the model stopped, when it matters to the client: `length` (it reached the
    request's `max_output_tokens`, or its own limit). Sent once, before `Usage`."""

    reason: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: The counts are sessiongate's own estimate (core/context.py `estimate_tokens`), not
    #: the provider's: the `command` and `offline` providers, and a server that reported
    #: none (or only part). Reported as `"estimated": true` wherever usage goes.
    estimated: bool = False

    def to_dict(self) -> dict[str, int]:
        """OpenAI's three counts, plus `"estimated": True` (a bool, so an int to the
        type checker) when they are an estimate; measured usage has no such key."""
        data = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.estimated:
            data["estimated"] = True
        return data

    def __add__(self, more: Usage) -> Usage:
        """Two calls' usage together: estimated when either was."""
        return Usage(
            self.prompt_tokens + more.prompt_tokens,
            self.completion_tokens + more.completion_tokens,
            self.estimated or more.estimated,
        )


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """One whole tool call the model asked for. `arguments` is the JSON text exactly as
    the model produced it (it may be invalid: the registry answers that, not the
    adapter)."""

    call_id: str
    name: str
    arguments: str
    #: The arguments' real length when `arguments` holds only their head: the adapter
    #: stopped keeping them past the request's `max_tool_argument_chars`. None: whole.
    argument_chars: int | None = None


#: "auto" (the model decides), "none", "required" (some tool), or a tool's name.
ToolChoice = Literal["auto", "none", "required"] | str


@dataclass(frozen=True, slots=True)
class ModelOptions:
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    #: `{"type": "json_object"}` or `{"type": "json_schema", "json_schema": {...}}`
    #: (OpenAI's shape; other adapters translate it).
    response_format: Mapping[str, Any] | None = None
    #: Tool-call arguments longer than this are not run (agents/tool_steps.py), so an
    #: adapter keeps only this much of a call's arguments and counts the rest; unset, it
    #: keeps up to its own ceiling (models/tool_arguments.py). Never sent to a provider.
    max_tool_argument_chars: int | None = None
    #: The most tokens the reply may have (a Responses API `max_output_tokens`): sent as
    #: the provider takes it (chat-completions `max_tokens` or `max_completion_tokens`,
    #: Anthropic `max_tokens`). Unset: the provider's (or adapter's) own limit.
    max_output_tokens: int | None = None


NO_OPTIONS = ModelOptions()

ModelChunk = TextDelta | ToolCallChunk | Usage | ReasoningDelta | StopReason
WireMessage = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    tools: bool = False
    images: bool = False
    json_output: bool = False


TEXT_ONLY = ModelCapabilities()


class ReplyModel(Protocol):
    """A named model that writes the assistant's answer.

    `stream` raises `sessiongate.errors.ModelError` on failure; `retryable=True` tells the
    caller that trying again (or trying the next fallback) is reasonable. A model without
    tool support is never given `options.tools` (agents that need tools are refused at
    start-up), so text-only adapters may ignore `options`.
    """

    name: str

    def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]: ...


def capabilities_of(model: object) -> ModelCapabilities:
    """What a model declares (`capabilities` attribute); text only when it says nothing."""
    found = getattr(model, "capabilities", None)
    return found if isinstance(found, ModelCapabilities) else TEXT_ONLY


def text_of(content: object) -> str:
    """The text of a wire message's content: a string as it is, the text parts of a part
    list joined by newlines (images are left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""
