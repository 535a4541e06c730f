"""The tool-calling stub model of agent_turns.py: OpenAI chat completions (streamed or not)
that, deterministically, asks for two tools and then answers from their results.

Every stack in agent_turns.py talks to this one server (raw asyncio HTTP/1.1, the request
handling of stub.py's `StubModel`, every reply written at once). What it answers depends
only on the request, so any history and any client get the same behaviour:

* **a plan**: the request asks for JSON (`response_format`), as sessiongate's
  `plan_execute` planner does: `{"plan": [lookup, add, synthesize]}` as streamed text;
* **the two tool calls**: tools are offered, `tool_choice` is not `"none"`, the last
  message is the user's and does not contain `NO_TOOLS`: `lookup {"key": "alpha"}` and
  `add {"a": 1200, "b": 34}` as parallel calls, streamed in pieces the way OpenAI sends them
  (id and name first, then the arguments), `finish_reason: "tool_calls"`;
* **the answer**: otherwise, `ANSWER_TOKENS` text tokens. The first ones repeat the
  `alpha=…` / `sum=…` values found in the trailing tool results (or, for a plan's
  explainer, in the last user message), so a client can check that the tools really ran.

It runs as its own process: `agent_turns.py --role stub`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from typing import Any

from support.stub import StubModel, _raw_chunk, _sse_chunk, serve_handler

#: A user message holding this marker is answered in text at once: the no-tool baseline.
NO_TOOLS = "[no tools]"
ANSWER_TOKENS = 20
LOOKUP = {"alpha": 4217, "beta": 1001}
LOOKUP_ARGS = {"key": "alpha"}
ADD_ARGS = {"a": 1200, "b": 34}
#: What a turn's answer must contain once both tools ran.
EXPECTED = ("alpha=4217", "sum=1234")
PLAN = {
    "plan": [
        {"step": 1, "tool": "lookup", "tool_input": LOOKUP_ARGS},
        {"step": 2, "tool": "add", "tool_input": ADD_ARGS},
        {"step": 3, "tool": None, "description": "Synthesize"},
    ]
}
_RESULT = re.compile(r"(?:alpha|sum)=\d+")


def reply_kind(request: dict[str, Any]) -> str:
    """ "plan", "tools" or "text": what this request is answered with."""
    if request.get("response_format"):
        return "plan"
    messages = request.get("messages") or [{}]
    last = messages[-1]
    wants_tools = bool(request.get("tools")) and request.get("tool_choice") != "none"
    if wants_tools and last.get("role") == "user" and NO_TOOLS not in _text(last):
        return "tools"
    return "text"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def answer_tokens(request: dict[str, Any]) -> list[str]:
    """The text answer: the tool results the request carries, then filler words."""
    messages = request.get("messages") or [{}]
    trailing: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        trailing.append(_text(message))
    source = " ".join(reversed(trailing)) if trailing else _text(messages[-1])
    found = sorted(set(_RESULT.findall(source)))
    head = ["Found ", *(f"{value} " for value in found)] if found else []
    return head + [f"w{i} " for i in range(ANSWER_TOKENS - len(head))]


def plan_texts() -> list[str]:
    """The plan as streamed text pieces."""
    text = json.dumps(PLAN)
    return [text[i : i + 40] for i in range(0, len(text), 40)]


def tool_calls(n: int) -> list[dict[str, str]]:
    """The two calls of the `n`th reply (ids unique per reply)."""
    return [
        {"id": f"call_{n}_1", "name": "lookup", "arguments": json.dumps(LOOKUP_ARGS)},
        {"id": f"call_{n}_2", "name": "add", "arguments": json.dumps(ADD_ARGS)},
    ]


class AgentStub(StubModel):
    """`StubModel`'s HTTP handling, `reply_kind`'s answers, always instant."""

    def __init__(self) -> None:
        super().__init__(ANSWER_TOKENS, 0.0, 0.0)
        self.mode = "instant"
        self.kinds: dict[str, int] = {"plan": 0, "tools": 0, "text": 0}

    async def route(
        self, method: bytes, path: bytes, body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        if path == b"/_stats":
            stats = {"requests": self.requests, "connections": self.connections}
            self.json_response(writer, {**stats, "kinds": self.kinds})
            return
        await super().route(method, path, body, writer)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse_chunk({**self.base, "choices": [choice]})

    async def completions(self, request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        kind = reply_kind(request)
        self.kinds[kind] += 1
        prompt_chars = sum(len(json.dumps(m)) for m in request.get("messages", []))
        if not request.get("stream"):
            self.json_response(writer, self.whole(kind, request, prompt_chars))
            return
        parts: list[bytes] = []
        if kind == "tools":
            for index, call in enumerate(tool_calls(self.requests)):
                head = {
                    "index": index,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": ""},
                }
                first: dict[str, Any] = {"tool_calls": [head]}
                if index == 0:
                    first = {"role": "assistant", "content": None, **first}
                parts.append(self._chunk(first))
                arguments = {"index": index, "function": {"arguments": call["arguments"]}}
                parts.append(self._chunk({"tool_calls": [arguments]}))
            finish = "tool_calls"
        else:
            texts = plan_texts() if kind == "plan" else answer_tokens(request)
            for i, text in enumerate(texts):
                delta = {"role": "assistant", "content": text} if i == 0 else {"content": text}
                parts.append(self._chunk(delta))
            finish = "stop"
        parts.append(self._chunk({}, finish))
        if (request.get("stream_options") or {}).get("include_usage"):
            parts.append(self.usage_chunk(prompt_chars))
        parts.append(_raw_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        writer.write(self.HEAD + b"".join(parts))
        await writer.drain()

    def whole(self, kind: str, request: dict[str, Any], prompt_chars: int) -> dict[str, Any]:
        """A non-streamed reply (`stream: false`)."""
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if kind == "tools":
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in tool_calls(self.requests)
            ]
            finish = "tool_calls"
        elif kind == "plan":
            message["content"] = json.dumps(PLAN)
        else:
            message["content"] = "".join(answer_tokens(request))
        return {
            **self.base,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": ANSWER_TOKENS,
                "total_tokens": prompt_chars // 4 + ANSWER_TOKENS,
            },
        }


def serve_agent_stub(args: argparse.Namespace) -> None:
    stub = AgentStub()

    serve_handler(stub.handle, args.ready_file)
