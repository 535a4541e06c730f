"""A client that hangs up mid-stream (api/turn_stream.py): the turn's stream is written
without a disconnect listener, so the turn must still run to its end, its answer be
stored whole, and the key be free for the next turn — through `sessiongate serve`, on the
REST SSE route and on OpenAI's chat completions."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.fake_providers import FakeServer, Reply, openai_events
from tests.support.served_fake_model import serve_with_fake_model

WORDS = [f"w{n} " for n in range(120)]  # ~0.6 s of tokens, 5 ms apart


async def read_until_first_token(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    async with client.stream("POST", path, json=body) as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if '"w0' in line or "w0 " in line:
                return  # leaving the block closes the connection mid-turn
    raise AssertionError("no token came")


async def stored_answer(client: httpx.AsyncClient, key: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 20
    while True:
        shown = (await client.get(f"/v1/sessions/{key}")).json()
        segment = shown["segments"][-1]["session_id"]
        listed = await client.get(f"/v1/sessions/{key}/segments/{segment}/messages")
        messages: list[dict[str, Any]] = listed.json()["messages"]
        done = [m for m in messages if m["role"] == "assistant" and m["status"] == "complete"]
        if len(done) >= count or time.monotonic() > deadline:
            return messages
        await asyncio.sleep(0.1)


async def test_a_client_that_hangs_up_mid_stream_leaves_a_whole_turn(tmp_path: Path) -> None:
    replies = [Reply(events=openai_events(WORDS)) for _ in range(4)]
    async with FakeServer(*replies) as provider:
        with serve_with_fake_model(tmp_path, provider.url) as served:
            async with httpx.AsyncClient(
                base_url=served.url, headers=served.auth, timeout=30
            ) as client:
                path = "/v1/sessions/c:gone/messages"
                await read_until_first_token(client, path, {"content": "one", "stream": True})
                messages = await stored_answer(client, "c:gone", 1)
                (answer,) = [m for m in messages if m["role"] == "assistant"]
                assert answer["content"] == "".join(WORDS)
                assert answer["status"] == "complete"
                # The key is free: the next turn runs and answers whole.
                again = await client.post(path, json={"content": "two", "stream": False})
                assert again.status_code == 200
                assert again.json()["reply"] == "".join(WORDS)

                # OpenAI's route alike.
                chat = {
                    "model": "main",
                    "stream": True,
                    "messages": [{"role": "user", "content": "three"}],
                }
                await client.aclose()
            async with httpx.AsyncClient(
                base_url=served.url,
                headers={**served.auth, "X-Session-Key": "c:gone"},
                timeout=30,
            ) as client:
                await read_until_first_token(client, "/v1/chat/completions", chat)
                messages = await stored_answer(client, "c:gone", 3)
                answers = [m for m in messages if m["role"] == "assistant"]
                assert len(answers) == 3 and answers[-1]["content"] == "".join(WORDS)
                assert "Traceback" not in served.stderr()
