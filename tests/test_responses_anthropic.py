"""The Responses API for an agent whose model speaks Anthropic's Messages API (DESIGN.md
§14: the translation to the upstream's wire is the gateway's): the official SDK's
`responses.create` and `previous_response_id` against a gateway whose model is the
Anthropic adapter pointed at a local fake server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai

from sessiongate.models.anthropic.adapter import AnthropicModel
from sessiongate.models.base import ReplyModel
from tests.support.fake_providers import FakeServer, Reply, anthropic_events, sse
from tests.support.gateway import gateway_settings, running_gateway


async def test_responses_over_an_anthropic_upstream(tmp_path: Path) -> None:
    async with FakeServer(Reply(events=anthropic_events(["Bonjour", " Ada"]))) as server:
        claude = AnthropicModel(
            "claude", model="fake-claude", base_url=server.url, max_retries=0, read_timeout=5.0
        )
        settings = gateway_settings(
            tmp_path,
            agents={
                "defaults": {"model": "claude", "users": ["*"]},
                "main": {"system_prompt": "Be kind."},
            },
        )
        models: dict[str, ReplyModel] = {"claude": claude}
        with running_gateway(settings, models) as gw:
            async with openai.AsyncOpenAI(
                base_url=gw.url + "/v1", api_key=gw.keys["alice"], max_retries=0, timeout=10
            ) as client:
                first = await client.responses.create(
                    model="main", input="hi", instructions="Short."
                )
                second = await client.responses.create(
                    model="main", input="again", previous_response_id=first.id
                )
    assert first.output_text == second.output_text == "Bonjour Ada"
    assert first.usage is not None and first.usage.input_tokens == 13
    opening, later = server.requests[0].body, server.requests[1].body
    assert "Be kind." in str(opening["system"]) and "Short." in str(opening["system"])
    assert "Short." not in str(later["system"])
    roles = [(m["role"], str(m["content"])) for m in later["messages"]]
    assert [r for r, _ in roles] == ["user", "assistant", "user"]
    assert "again" in roles[-1][1] and "Bonjour Ada" in roles[1][1]


def _thinking_then_call() -> list[str]:
    """A reply that thinks (a signed thinking block), then calls the client's tool."""
    message: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "fake-claude",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 9, "output_tokens": 1},
    }

    def block(index: int, kind: str, **fields: object) -> str:
        start = {"type": "content_block_start", "index": index, "content_block": fields}
        start["content_block"] = {"type": kind, **fields}
        return sse(start, "content_block_start")

    def delta(index: int, **fields: object) -> str:
        return sse({"type": "content_block_delta", "index": index, "delta": fields})

    return [
        sse({"type": "message_start", "message": message}, "message_start"),
        block(0, "thinking", thinking=""),
        delta(0, type="thinking_delta", thinking="The user wants "),
        delta(0, type="thinking_delta", thinking="the weather."),
        delta(0, type="signature_delta", signature="sig-123"),
        sse({"type": "content_block_stop", "index": 0}),
        block(1, "tool_use", id="toolu_1", name="weather", input={}),
        delta(1, type="input_json_delta", partial_json='{"city": "Paris"}'),
        sse({"type": "content_block_stop", "index": 1}),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 12},
            }
        ),
        sse({"type": "message_stop"}),
    ]


def _cut_at_max_tokens() -> list[str]:
    frames = anthropic_events(["It was a dark"])
    return [f.replace('"end_turn"', '"max_tokens"') for f in frames]


async def test_signed_thinking_is_an_item_and_goes_back_with_the_tool_result(
    tmp_path: Path,
) -> None:
    """Anthropic's signed thinking: a `reasoning` item (its signature as
    `encrypted_content` only when `include` asks), kept with the turn and replayed first
    in the assistant message when the client's tool result continues it, as the API
    requires; `max_output_tokens` is the request's `max_tokens` and a `max_tokens` stop
    is `incomplete`."""
    replies = [
        Reply(events=_thinking_then_call()),
        Reply(events=anthropic_events(["Sunny."])),
        Reply(events=_cut_at_max_tokens()),
    ]
    async with FakeServer(*replies) as server:
        claude = AnthropicModel(
            "claude", model="fake-claude", base_url=server.url, max_retries=0, read_timeout=5.0
        )
        settings = gateway_settings(
            tmp_path, agents={"defaults": {"model": "claude", "users": ["*"]}, "main": {}}
        )
        tool = {
            "type": "function",
            "name": "weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
        with running_gateway(settings, {"claude": claude}) as gw:
            async with openai.AsyncOpenAI(
                base_url=gw.url + "/v1", api_key=gw.keys["alice"], max_retries=0, timeout=10
            ) as client:
                first = await client.responses.create(
                    model="main",
                    input="Weather in Paris?",
                    tools=[tool],  # type: ignore[list-item]
                    include=["reasoning.encrypted_content"],
                )
                call = first.output[-1]
                assert call.type == "function_call"
                second = await client.responses.create(
                    model="main",
                    previous_response_id=first.id,
                    tools=[tool],  # type: ignore[list-item]
                    input=[
                        {"type": "function_call_output", "call_id": call.call_id, "output": "20C"}
                    ],
                )
                cut = await client.responses.create(
                    model="main", input="A story", max_output_tokens=100
                )
    assert [item.type for item in first.output] == ["reasoning", "function_call"]
    thought = first.output[0]
    assert thought.type == "reasoning"
    assert [s.text for s in thought.summary] == ["The user wants the weather."]
    assert thought.encrypted_content == "sig-123"
    assert second.output_text == "Sunny."
    replayed = server.requests[1].body["messages"]
    assistant = [m for m in replayed if m["role"] == "assistant"][-1]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants the weather.",
        "signature": "sig-123",
    }
    assert assistant["content"][-1]["type"] == "tool_use"
    assert server.requests[2].body["max_tokens"] == 100
    assert cut.status == "incomplete"
    assert cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"
