"""The OpenAI Agents SDK (`openai-agents` 0.24.0) against `sessiongate serve` (DESIGN.md
§14, issue 25): `Runner.run` with the SDK's default model (the Responses API) pointed at
the gateway, a function tool the SDK runs itself, a `previous_response_id` run, and
`OpenAIConversationsSession` keeping a conversation across runs in the Conversations API.

The SDK needs websockets<17 and the dev venv has 17, so it lives in a venv of its own:
scripts/test makes it (`scripts/clients.sh agents-python`, into .client-tools/) and points
`SESSIONGATE_TEST_AGENTS_PYTHON` at its python, which runs tests/support/agents_sdk_script.py
as a subprocess. Skipped, and said, where that variable is not set."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.openai_wire_server import WireAnswer, openai_wire_server
from tests.support.served import served_gateway
from tests.support.served_fake_model import fake_model_config

PYTHON = os.environ.get("SESSIONGATE_TEST_AGENTS_PYTHON") or None
SCRIPT = Path(__file__).parent / "support" / "agents_sdk_script.py"

pytestmark = pytest.mark.skipif(
    PYTHON is None,
    reason="the Agents SDK's venv is not set up (bash scripts/clients.sh agents-python, then"
    " SESSIONGATE_TEST_AGENTS_PYTHON=<its python>)",
)


def _text(content: object) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _answer(body: dict[str, Any]) -> WireAnswer:
    """Calls `weather` when offered and the user asks for it; answers a tool result;
    otherwise repeats what it was told, with how many user messages it saw (so the test
    can tell whether history reached the model)."""
    messages = body["messages"]
    last = messages[-1]
    users = [m for m in messages if m["role"] == "user"]
    offered = [t["function"]["name"] for t in body.get("tools", [])]
    if last["role"] == "tool":
        return WireAnswer(f"The tool said: {_text(last['content'])}")
    if "weather" in offered and "weather" in _text(last["content"]):
        return WireAnswer("", calls=(("call_w1", "weather", json.dumps({"city": "Paris"})),))
    return WireAnswer(f"heard {_text(last['content'])} ({len(users)} user messages)")


def test_the_agents_sdk_runs_against_a_served_gateway(tmp_path: Path) -> None:
    assert PYTHON is not None
    with openai_wire_server(_answer) as wire:
        config = fake_model_config(wire.url, "[agents.main]\n")
        with served_gateway(tmp_path, config, {"alice": ()}) as served:
            key = served.keys["alice"]
            ran = subprocess.run(
                [PYTHON, str(SCRIPT), served.url + "/v1", key],
                capture_output=True,
                text=True,
                timeout=120,
                env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
            )
            assert ran.returncode == 0, ran.stderr[-4000:]
            found = json.loads(ran.stdout.strip().splitlines()[-1])
            with httpx.Client(base_url=served.url, headers=served.auth("alice")) as rest:
                conversation = rest.get(f"/v1/conversations/{found['conversation_id']}")
                items = rest.get(f"/v1/conversations/{found['conversation_id']}/items").json()
    # The function tool: the model's call went back to the SDK, which ran `weather` and
    # sent its output as function_call_output; the model read it.
    assert found["first"] == "The tool said: sunny in Paris"
    assert "ToolCallItem" in found["first_items"] and "ToolCallOutputItem" in found["first_items"]
    assert found["first_response_id"].startswith("resp_")
    # previous_response_id continued the first run's key: both user messages reached it.
    assert found["second"] == "heard and tomorrow? (2 user messages)"
    # The session's conversation lives in the gateway's Conversations API.
    assert found["third"] == "heard hello (1 user messages)"
    assert found["fourth"] == "heard again (2 user messages)"
    assert len(found["session_user_items"]) == 2
    assert conversation.status_code == 200
    said = [_text(i.get("content")) for i in items["data"] if i.get("role") == "user"]
    assert sorted(said) == ["again", "hello"]
    # The tool round trip reached the upstream as chat completions' tool message.
    tool_turns = [b for b in wire.requests if b["messages"][-1]["role"] == "tool"]
    assert tool_turns and tool_turns[0]["messages"][-1]["tool_call_id"] == "call_w1"
