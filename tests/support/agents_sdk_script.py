"""The OpenAI Agents SDK driving a gateway, run by tests/test_agents_sdk.py in the SDK's
own venv (scripts/clients.sh agents-python): nothing here imports sessiongate.

    python agents_sdk_script.py BASE_URL API_KEY

`Runner.run` with the SDK's default model (the Responses API) pointed at the gateway, a
function tool the SDK runs itself, a second run with `previous_response_id`, and
`OpenAIConversationsSession` across two runs. Prints one JSON object with what came back.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import agents
from openai import AsyncOpenAI


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def main(base_url: str, api_key: str) -> dict[str, Any]:
    agents.set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    # The SDK's default model is the Responses API: set the client it uses, name an agent.
    agents.set_default_openai_client(client, use_for_tracing=False)
    agents.set_default_openai_api("responses")
    agent = agents.Agent(
        name="helper", instructions="Help.", model="main", tools=[agents.function_tool(weather)]
    )
    first = await agents.Runner.run(agent, "what is the weather?")
    second = await agents.Runner.run(
        agent, "and tomorrow?", previous_response_id=first.last_response_id
    )
    session = agents.OpenAIConversationsSession(openai_client=client)
    third = await agents.Runner.run(agent, "hello", session=session)
    fourth = await agents.Runner.run(agent, "again", session=session)
    items = await session.get_items()
    conversation_id = await session._get_session_id()
    return {
        "first": str(first.final_output),
        "first_items": [type(item).__name__ for item in first.new_items],
        "first_response_id": first.last_response_id,
        "second": str(second.final_output),
        "third": str(third.final_output),
        "fourth": str(fourth.final_output),
        "session_user_items": [i.get("content") for i in items if i.get("role") == "user"],
        "conversation_id": conversation_id,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
