"""The OpenAI Agents SDK (`openai-agents`) against the gateway (DESIGN.md §14, issue 25):
`Runner.run` with the SDK's default model (the Responses API) pointed at the gateway, a
function tool the SDK runs itself, `previous_response_id` runs, and
`OpenAIConversationsSession` keeping a conversation across runs in the Conversations API.

Skipped when `agents` is not importable (it is in the `bench` extra)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import openai
import pytest

from sessiongate.models.base import (
    NO_OPTIONS,
    ModelCapabilities,
    ModelChunk,
    ModelOptions,
    ReplyModel,
    TextDelta,
    ToolCallChunk,
    Usage,
    WireMessage,
    text_of,
)
from tests.support.gateway import Gateway, gateway_settings, running_gateway

agents = pytest.importorskip("agents")


class AgentModel:
    """Calls `weather` when offered and the last message is the user's asking for it;
    answers a tool result; otherwise repeats what it was told, with how many user
    messages it saw (so a test can tell whether history reached it)."""

    name = "agentish"
    capabilities = ModelCapabilities(tools=True)

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        last = messages[-1]
        users = [m for m in messages if m["role"] == "user"]
        if options.tools and last["role"] == "user" and "weather" in text_of(last["content"]):
            yield ToolCallChunk("call_w1", "weather", json.dumps({"city": "Paris"}))
        elif last["role"] == "tool":
            yield TextDelta(f"The tool said: {last['content']}")
        else:
            yield TextDelta(f"heard {text_of(last['content'])} ({len(users)} user messages)")
        yield Usage(prompt_tokens=3, completion_tokens=3)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("agents_sdk"),
        agents={"defaults": {"model": "agentish", "users": ["*"]}, "main": {}},
    )
    models: dict[str, ReplyModel] = {"agentish": AgentModel()}
    with running_gateway(settings, models) as gateway:
        yield gateway


def _client(gw: Gateway) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=gw.keys["alice"], max_retries=0)


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _agent(gw: Gateway) -> Any:
    model = agents.OpenAIResponsesModel(model="main", openai_client=_client(gw))
    tool = agents.function_tool(weather)
    return agents.Agent(name="helper", instructions="Help.", model=model, tools=[tool])


def test_runner_with_a_function_tool_and_previous_response_id(gw: Gateway) -> None:
    agents.set_tracing_disabled(True)

    async def run() -> tuple[str, str]:
        agent = _agent(gw)
        first = await agents.Runner.run(agent, "what is the weather?")
        second = await agents.Runner.run(
            agent, "and tomorrow?", previous_response_id=first.last_response_id
        )
        return str(first.final_output), str(second.final_output)

    first, second = asyncio.run(run())
    assert first == "The tool said: sunny in Paris"
    # The second run continued the first one's key: both user messages reached the model.
    assert second == "heard and tomorrow? (2 user messages)"


def test_conversations_session_keeps_history_across_runs(gw: Gateway) -> None:
    agents.set_tracing_disabled(True)

    async def run() -> tuple[str, str, list[Any]]:
        client = _client(gw)
        session = agents.OpenAIConversationsSession(openai_client=client)
        agent = _agent(gw)
        first = await agents.Runner.run(agent, "hello", session=session)
        second = await agents.Runner.run(agent, "again", session=session)
        items = await session.get_items()
        return str(first.final_output), str(second.final_output), items

    first, second, items = asyncio.run(run())
    assert first == "heard hello (1 user messages)"
    assert second == "heard again (2 user messages)"
    said = [item.get("content") for item in items if item.get("role") == "user"]
    assert len(said) == 2
