"""Model server down, slow or broken, seen through the gateway with the real adapter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fake_providers import FakeServer, Reply, closed_port, openai_events
from tests.support.gateway import Gateway, gateway_settings, parse_sse, running_gateway


def settings_for(tmp_path: Path, base_url: str, fallbacks: list[str]) -> Any:
    return gateway_settings(
        tmp_path,
        models={
            "remote": {
                "provider": "openai",
                "base_url": base_url,
                "model": "m",
                "max_retries": 0,
                "read_timeout": "1s",
                "connect_timeout": "1s",
            }
        },
        agents={"defaults": {"model": "remote", "fallback_models": fallbacks}},
    )


async def turn(gw: Gateway, key: str, content: str) -> list[tuple[str, dict[str, Any]]]:
    async with httpx.AsyncClient(base_url=gw.url, timeout=20) as client:
        response = await client.post(
            f"/v1/sessions/{key}/messages", json={"content": content}, headers=gw.auth("alice")
        )
        return parse_sse(response.text)


async def stored(gw: Gateway, key: str) -> list[tuple[str, str]]:
    async with httpx.AsyncClient(base_url=gw.url, timeout=10) as client:
        shown = (await client.get(f"/v1/sessions/{key}", headers=gw.auth("alice"))).json()
        sid = shown["latest"]["session_id"]
        page = (
            await client.get(
                f"/v1/sessions/{key}/segments/{sid}/messages", headers=gw.auth("alice")
            )
        ).json()
    return [(m["role"], m["status"]) for m in page["messages"]]


@pytest.mark.parametrize(
    ("name", "replies", "code"),
    [
        ("down", None, "model_unavailable"),
        ("500", [Reply(status=500, json_body={"error": {"message": "boom"}})], "model_unavailable"),
        ("slow", [Reply(hang=True)], "model_timeout"),
        ("broken stream", [Reply(events=["data: {not json\n\n"])], "model_bad_response"),
    ],
)
async def test_failing_model_gives_error_event_and_keeps_user_message(
    tmp_path: Path, name: str, replies: list[Reply] | None, code: str
) -> None:
    server = FakeServer(*(replies or [Reply()]))
    async with server:
        url = f"http://127.0.0.1:{closed_port()}/v1" if replies is None else f"{server.url}/v1"
        with running_gateway(settings_for(tmp_path, url, []), {}) as gw:
            events = await turn(gw, "fault:k", "hello?")
            assert [e for e, _ in events] == ["start", "error"]
            assert events[-1][1]["code"] == code
            assert await stored(gw, "fault:k") == [("user", "complete")]


async def test_fallback_model_answers_when_the_server_is_down(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with running_gateway(settings_for(tmp_path, url, ["offline"]), {}) as gw:
        events = await turn(gw, "fault:fb", "hello?")
        assert events[-1][0] == "end"
        text = "".join(d["content"] for e, d in events if e == "token")
        assert "The model is unavailable" in text and "No model is configured" not in text
        assert await stored(gw, "fault:fb") == [("user", "complete"), ("assistant", "complete")]


async def test_real_adapter_streams_through_the_gateway(tmp_path: Path) -> None:
    async with FakeServer(Reply(events=openai_events(["Hel", "lo"]))) as server:
        with running_gateway(settings_for(tmp_path, f"{server.url}/v1", []), {}) as gw:
            events = await turn(gw, "fault:ok", "hi")
            assert "".join(d["content"] for e, d in events if e == "token") == "Hello"
            assert server.requests[0].body["messages"][-1] == {"role": "user", "content": "hi"}
            await asyncio.sleep(0)
