"""The Responses API for an agent whose model speaks Anthropic's Messages API (DESIGN.md
§14: the translation to the upstream's wire is the gateway's): the official SDK's
`responses.create` and `previous_response_id` against a gateway whose model is the
Anthropic adapter pointed at a local fake server."""

from __future__ import annotations

from pathlib import Path

import openai

from sessiongate.models.anthropic.adapter import AnthropicModel
from sessiongate.models.base import ReplyModel
from tests.support.fake_providers import FakeServer, Reply, anthropic_events
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
