"""A local OpenAI-wire model that enforces a small context window the way OpenAI does: a
request whose prompt passes `window - max_tokens` tokens is answered 400 with the
`context_length_exceeded` error body; any other gets a streamed reply whose usage reports
the prompt tokens it counted (its own tokenizer: a token per `chars_per_token`
characters, 3.5 unless told, and 3 per message, so the gateway's estimate is off and has
something to correct).

A request that offers tools and whose last message is a user message containing
`TOOL_MARKER` is answered with one call of the `lookup` tool instead; the request after
its result gets the text reply. Summaries and other tool-less requests always get text.

    async with WindowStub(window=4096) as stub:
        ...  # stub.url; stub.prompt_tokens: what each request held; stub.overflows
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from tests.support.fake_providers import (
    FakeCall,
    FakeServer,
    Reply,
    _read_request,
    _respond,
    openai_events,
    openai_tool_events,
)

#: In a user message, asks the stub for a `lookup` tool call (when the request has tools).
TOOL_MARKER = "[tool]"


def count_prompt(body: Any, chars_per_token: float = 3.5) -> int:
    """The stub's tokenizer over a chat request's messages (text and tool calls)."""
    total = 0
    for message in body.get("messages", []):
        content = message.get("content") or ""
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        total += 3 + math.ceil(len(str(content)) / chars_per_token)
        for call in message.get("tool_calls") or []:
            total += 3 + math.ceil(len(str(call)) / chars_per_token)
    return total


def context_length_exceeded(window: int, tokens: int) -> dict[str, Any]:
    return {
        "error": {
            "message": (
                f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {tokens} tokens. Please reduce the length of the "
                "messages."
            ),
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def wants_tool(body: Any) -> bool:
    """A request offering tools whose last message is a user message with the marker."""
    messages = body.get("messages") or []
    if not body.get("tools") or not messages:
        return False
    last = messages[-1]
    content = last.get("content") or ""
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return last.get("role") == "user" and TOOL_MARKER in str(content)


class WindowStub(FakeServer):
    def __init__(self, window: int, reply: str = "noted", chars_per_token: float = 3.5) -> None:
        super().__init__()
        self.window = window
        self.chars_per_token = chars_per_token
        self.reply = reply
        #: The prompt tokens of every chat request, in order, and those refused.
        self.prompt_tokens: list[int] = []
        self.overflows = 0
        self.tool_calls = 0

    async def __aenter__(self) -> WindowStub:
        await super().__aenter__()
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            seen = await _read_request(reader)
            if seen is None:
                return
            self.requests.append(seen)
            tokens = count_prompt(seen.body or {}, self.chars_per_token)
            self.prompt_tokens.append(tokens)
            limit = self.window - int((seen.body or {}).get("max_tokens") or 0)
            if tokens > limit:
                self.overflows += 1
                answer = Reply(status=400, json_body=context_length_exceeded(self.window, tokens))
            elif wants_tool(seen.body or {}):
                self.tool_calls += 1
                call = FakeCall(
                    f"call_{self.tool_calls}",
                    "lookup",
                    (json.dumps({"key": f"k{self.tool_calls}"}),),
                )
                answer = Reply(events=openai_tool_events([], [call], usage=(tokens, 9)))
            else:
                answer = Reply(events=openai_events([self.reply], usage=(tokens, 2)))
            await _respond(writer, answer, self._closing)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
