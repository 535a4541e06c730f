"""Seed 002 end to end: its example query through `POST /chat`.

"What's in my notes about running? Also search the web for marathon training tips."

Every part is the real one except the hosted model: Markdown notes imported by
`sessiongate notes import`, the `notes_search` built-in, a web search tool from an MCP
server on the official SDK (stdio), the OpenAI adapter talking to a local server that
speaks OpenAI's streaming wire, the gateway on loopback, and httpx reading seed 002's
data-only SSE stream.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from sessiongate.cli.main import app as cli
from sessiongate.config import load_settings
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role
from tests.support.fake_providers import FakeServer, Reply, openai_events
from tests.support.gateway import running_gateway

QUERY = "What's in my notes about running? Also search the web for marathon training tips."
NOTES = {
    "fitness.md": "# Fitness\n\nMy running plan: Mon 3mi easy, Wed 5mi tempo, Sat 8mi long run."
    "\n\nStretch after every run.\n",
    "kitchen/recipes.md": "# Recipes\n\nPasta with tomatoes and basil; bake bread on Sundays.\n",
}
PLAN = {
    "plan": [
        {"step": 1, "tool": "notes_search", "tool_input": {"query": "running"}},
        {"step": 2, "tool": "web__search", "tool_input": {"query": "marathon training tips"}},
        {"step": 3, "tool": None, "description": "Synthesize"},
    ]
}
EXPLANATION = [
    "Your ",
    "notes ",
    "hold ",
    "a ",
    "running ",
    "plan; ",
    "the ",
    "web ",
    "says ",
    "taper.",
]
SERVER = Path(__file__).parent / "support" / "web_search_server.py"


def write_config(tmp_path: Path, model_url: str) -> Path:
    config = tmp_path / "sessiongate.toml"
    config.write_text(
        f"""
data_dir = {json.dumps(str(tmp_path / "data"))}

[models.hub]
provider = "openai"
base_url = "{model_url}/v1"
model = "lifehub-model"

[agents.main]
model = "hub"
runner = "plan_execute"
tools = ["notes_search", "web__*"]

[mcp.web]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}]

[compat]
lifehub_agent = "main"
"""
    )
    return config


def import_notes(tmp_path: Path, config: Path) -> None:
    folder = tmp_path / "notes"
    for name, text in NOTES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    result = CliRunner().invoke(
        cli, ["notes", "import", str(folder), "--user", "alice", "--config", str(config)]
    )
    assert result.exit_code == 0, result.output


def post_chat(url: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=30) as client:
        answer = client.post(
            "/chat", json={"messages": [{"role": "user", "content": QUERY}]}, headers=headers
        )
    assert answer.status_code == 200, answer.text
    assert "event:" not in answer.text  # seed 002's page reads `data:` lines only
    return [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")]


async def test_seed_002_example_query_end_to_end(tmp_path: Path) -> None:
    replies = [
        Reply(events=openai_events([json.dumps(PLAN)])),  # the planner
        Reply(events=openai_events(EXPLANATION)),  # the explainer, streamed
    ]
    async with FakeServer(*replies) as model:
        config = write_config(tmp_path, model.url)
        settings = load_settings(config)
        with running_gateway(settings, {}) as gw:
            await asyncio.to_thread(import_notes, tmp_path, config)
            data = await asyncio.to_thread(post_chat, gw.url, gw.auth("alice"))

            types = [d["type"] for d in data]
            tokens = [d for d in data if d["type"] == "token"]
            assert types[:7] == [
                "start",
                "plan",
                "tool_start",
                "tool_end",
                "tool_start",
                "tool_end",
                "context_log",
            ]
            assert types[7 : 7 + len(tokens)] == ["token"] * len(tokens)
            assert types[-1] == "end"
            assert [s["tool"] for s in data[1]["plan"]] == ["notes_search", "web__search", None]

            notes_end, web_end = (d for d in data if d["type"] == "tool_end")
            assert notes_end["name"] == "notes_search" and notes_end["status"] == "ok"
            assert "My running plan" in notes_end["output"] and "fitness.md" in notes_end["output"]
            assert "Pasta" not in notes_end["output"]
            assert web_end["name"] == "web__search" and web_end["status"] == "ok"
            assert "marathon-training-plan" in web_end["output"]

            log = data[6]["log"]
            assert [entry["step"] for entry in log] == [1, 2, 3]
            assert "notes_search" in log[0]["action"] and "fitness.md" in log[0]["result"]
            assert "marathon" in log[1]["result"].lower()
            assert "".join(t["content"] for t in tokens) == "".join(EXPLANATION)

            # Two model calls: the planner saw the tools; the explainer saw the log.
            assert len(model.requests) == 2
            planner = json.dumps(model.requests[0].body["messages"])
            assert "notes_search" in planner and "web__search" in planner
            explainer = json.dumps(model.requests[1].body["messages"])
            assert "My running plan" in explainer and "marathon-training-plan" in explainer
            assert model.requests[1].body["stream"] is True

            ref = KeyRef("alice", "lifehub:alice")
            latest = await gw.engine.store.latest_segment(ref)
            stored = await gw.engine.store.list_messages(latest.session_id)
            assert [m.role for m in stored] == [
                Role.USER,
                Role.ASSISTANT,
                Role.TOOL,
                Role.TOOL,
                Role.ASSISTANT,
            ]
            assert stored[0].content == QUERY
            assert stored[-1].content == "".join(EXPLANATION)
            assert stored[-1].metadata["context_log"] == log
