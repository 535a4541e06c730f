"""Hosted tools of the Responses API run as the agent's configured equivalent, through
`sessiongate serve` (a subprocess): `[agents.main] hosted_tools = {web_search =
"web__search"}` (an MCP web search server on stdio). The model is offered `web_search`
beside the client's function tools, the gateway runs its call on the MCP tool, and the
response shows a `web_search_call` item (streamed events as the SDK's types define
them); a call of the client's own tool still goes back to the client; a hosted tool with
no equivalent is left out and said."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.support.gateway import parse_sse
from tests.support.openai_wire_server import WireAnswer, WireServer, openai_wire_server
from tests.support.served import Served, served_gateway
from tests.support.served_fake_model import fake_model_config

SEARCH_SERVER = Path(__file__).parent / "support" / "web_search_server.py"
EVENTS: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)

CLIENT_TOOL = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a shell command on the client's machine.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}


BOTH_HOSTED: list[Any] = [{"type": "web_search"}, {"type": "file_search"}]


def _answer(body: dict[str, Any]) -> WireAnswer:
    messages = body["messages"]
    last = messages[-1]
    offered = [t["function"]["name"] for t in body.get("tools", [])]
    if last["role"] == "tool":
        return WireAnswer(f"From the web: {last['content'][:40]}")
    if last["content"] == "search marathon" and "web_search" in offered:
        arguments = json.dumps({"query": "marathon training"})
        return WireAnswer("", calls=(("call_ws1", "web_search", arguments),))
    if last["content"] == "list files":
        return WireAnswer("", calls=(("call_ls", "exec_command", '{"cmd": "ls"}'),))
    return WireAnswer(f"heard: {last['content']} with {sorted(offered)}")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, WireServer]]:
    directory = tmp_path_factory.mktemp("hosted")
    more = (
        '[agents.main]\nhosted_tools = {web_search = "web__search"}\n'
        '[agents.plain]\nusers = ["*"]\n'
        f"[mcp.web]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SEARCH_SERVER))}]\n"
    )
    with openai_wire_server(_answer) as wire:
        config = fake_model_config(wire.url, more)
        with served_gateway(directory, config, {"alice": ()}) as served:
            yield served, wire


def _client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=served.url + "/v1", api_key=served.keys["alice"], max_retries=0, timeout=60
    )


def test_web_search_runs_as_the_agents_mcp_tool(gateway: tuple[Served, WireServer]) -> None:
    served, wire = gateway
    with _client(served) as client:
        raw = client.responses.with_raw_response.create(
            model="main",
            input="search marathon",
            tools=[{"type": "web_search"}, CLIENT_TOOL],  # type: ignore[list-item]
        )
        response = raw.parse()
        assert "X-Hosted-Tools-Dropped" not in raw.headers
        assert "sessiongate_hosted_tools_dropped" not in (response.metadata or {})
        first, second = wire.requests[-2], wire.requests[-1]
        offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
        assert set(offered) == {"exec_command", "web_search"}
        # The equivalent's own description and parameters, under the hosted name.
        assert "Search the web" in offered["web_search"]["description"]
        assert "query" in offered["web_search"]["parameters"]["properties"]
        tool_message = second["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_ws1"
        assert "running.example/marathon-training-plan" in tool_message["content"]
        assert [item.type for item in response.output] == ["web_search_call", "message"]
        search = response.output[0]
        assert search.type == "web_search_call" and search.status == "completed"
        assert search.action.type == "search" and search.action.query == "marathon training"
        assert response.output_text.startswith("From the web: https://running.example")
        assert client.responses.retrieve(response.id).output[0].type == "web_search_call"

        # The client's own tool still goes back to the client, beside the hosted one.
        calls = client.responses.create(
            model="main",
            input="list files",
            tools=[{"type": "web_search"}, CLIENT_TOOL],  # type: ignore[list-item]
        )
        assert [item.type for item in calls.output] == ["function_call"]
        assert calls.output[0].type == "function_call"
        assert calls.output[0].name == "exec_command"

    # Streamed: the web_search_call item's events, each as the SDK's types define it.
    reply = httpx.post(
        served.url + "/v1/responses",
        json={
            "model": "main",
            "input": "search marathon",
            "tools": [{"type": "web_search"}],
            "stream": True,
        },
        headers={"Authorization": f"Bearer {served.keys['alice']}"},
        timeout=60,
    )
    events = [data for _, data in parse_sse(reply.text)]
    for event in events:
        EVENTS.validate_python(event)
    kinds = [e["type"] for e in events]
    start = kinds.index("response.web_search_call.in_progress")
    assert kinds[start - 1 : start + 4] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]
    final = Response.model_validate(events[-1]["response"])
    assert [item.type for item in final.output] == ["web_search_call", "message"]


def test_a_hosted_tool_without_an_equivalent_is_left_out_and_said(
    gateway: tuple[Served, WireServer],
) -> None:
    served, wire = gateway
    with _client(served) as client:
        raw = client.responses.with_raw_response.create(
            model="plain",
            input="search marathon",
            tools=BOTH_HOSTED,
        )
        response = raw.parse()
        assert raw.headers["X-Hosted-Tools-Dropped"] == "web_search,file_search"
        assert (response.metadata or {})["sessiongate_hosted_tools_dropped"] == (
            "web_search,file_search"
        )
        assert "tools" not in wire.requests[-1]
        assert response.output_text == "heard: search marathon with []"

        # main has web_search's equivalent, not file_search's.
        raw = client.responses.with_raw_response.create(
            model="main",
            input="hello",
            tools=BOTH_HOSTED,
        )
        assert raw.headers["X-Hosted-Tools-Dropped"] == "file_search"
        assert raw.parse().output_text == "heard: hello with ['web_search']"


def test_codex_way_with_a_hosted_search_keeps_one_thread(
    gateway: tuple[Served, WireServer],
) -> None:
    """Codex CLI's way (its session id in headers, `store: false`, the whole conversation
    as `input` each time, output items included): the turn with a hosted search and the
    next one land on one key, nothing duplicated."""
    served, _ = gateway
    headers = {"session-id": "codex-hosted-1"}
    tools: list[Any] = [{"type": "web_search"}, CLIENT_TOOL]
    items: list[Any] = [{"type": "message", "role": "user", "content": "search marathon"}]
    with _client(served) as client:
        first = client.responses.with_raw_response.create(
            model="main", input=items, store=False, tools=tools, extra_headers=headers
        )
        items += [i.model_dump(exclude_none=True) for i in first.parse().output]
        items.append({"type": "message", "role": "user", "content": "thanks"})
        second = client.responses.with_raw_response.create(
            model="main", input=items, store=False, tools=tools, extra_headers=headers
        )
    key = first.headers["X-Session-Key"]
    assert second.headers["X-Session-Key"] == key
    assert second.parse().output_text.startswith("heard: thanks")
    with httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.keys['alice']}"}
    ) as rest:
        sid = rest.get(f"/v1/sessions/{key}").json()["latest"]["session_id"]
        page = rest.get(f"/v1/sessions/{key}/segments/{sid}/messages").json()
    roles = [m["role"] for m in page["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [m["content"] for m in page["messages"] if m["role"] == "user"] == [
        "search marathon",
        "thanks",
    ]
