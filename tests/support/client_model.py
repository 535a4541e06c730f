"""A reply model for tests of OpenAI-compatible clients (chat completions, the Responses
API): it does what each client feature needs and records every request it gets."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sessiongate.models.base import (
    NO_OPTIONS,
    ModelCapabilities,
    ModelChunk,
    ModelOptions,
    TextDelta,
    ToolCallChunk,
    Usage,
    WireMessage,
    text_of,
)

#: What the model writes when a response format (structured output) is asked for.
PERSON = {"name": "Ada Lovelace", "age": 36}


class ClientModel:
    """Calls the first tool offered (the forced one when `tool_choice` names it; `Person`
    gets `PERSON` as its arguments) when the last message is the user's, answers from a
    tool result, writes `PERSON` as JSON when a response format is asked for, streams
    dots until cancelled when the user says `slow`, and otherwise numbers its answers
    (each one differs, as a real model's do)."""

    def __init__(self, name: str = "client", *, images: bool = True) -> None:
        self.name = name
        self.capabilities = ModelCapabilities(tools=True, images=images, json_output=True)
        self.requests: list[tuple[list[dict[str, Any]], ModelOptions]] = []
        self.count = itertools.count(1)

    def reset(self) -> None:
        self.requests.clear()

    @property
    def last(self) -> list[dict[str, Any]]:
        return self.requests[-1][0]

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        self.requests.append(([dict(m) for m in messages], options))
        last = messages[-1]
        if options.tools and options.tool_choice != "none" and last["role"] == "user":
            names = [t.name for t in options.tools]
            name = options.tool_choice if options.tool_choice in names else names[0]
            arguments = PERSON if name == "Person" else {"city": "Paris"}
            yield ToolCallChunk(f"call_{next(self.count)}", str(name), json.dumps(arguments))
        elif options.response_format is not None:
            yield TextDelta(json.dumps(PERSON))
        elif last["role"] == "user" and text_of(last["content"]) == "slow":
            for _ in range(200):  # until cancelled
                await asyncio.sleep(0.05)
                yield TextDelta(".")
        else:
            text = (
                f"It is {last['content']}."
                if last["role"] == "tool"
                else f"answer {next(self.count)} to: {text_of(last['content'])}"
            )
            for index, word in enumerate(text.split(" ")):
                yield TextDelta(word if index == 0 else " " + word)
        yield Usage(prompt_tokens=len(messages), completion_tokens=5)
