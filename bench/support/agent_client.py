"""The gateway's side of agent_turns.py, run in the orchestrating process: turns over HTTP
and the seeding of long tool histories through the gateway's own export and import.

A turn is `POST /v1/sessions/{key}/messages {"content", "stream": true, "agent"}` on one
keep-alive connection per session (its own `httpx.AsyncClient`, like independent users;
the session slot `-sNNN` of the key picks it, so later phases reuse it). The SSE body is
read whole; the answer is the text of its `token` frames, and a turn is good only with an
`end` frame and no `error` frame.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx

from support.agent_load import TurnFn


class GatewayClient:
    def __init__(self, url: str, api_key: str) -> None:
        self.url = url
        self.headers = {"content-type": "application/json", "authorization": f"Bearer {api_key}"}
        self._clients: dict[str, httpx.AsyncClient] = {}
        #: Turns sent through this client (the profile is divided by what the gateway served).
        self.sent = 0

    def _client(self, key: str) -> httpx.AsyncClient:
        # One connection per session slot ("...-s007"), reused by the next phase's key.
        slot = key.rsplit("-s", 1)[-1]
        client = self._clients.get(slot)
        if client is None:
            client = self._clients[slot] = httpx.AsyncClient(
                base_url=self.url, headers=self.headers, timeout=httpx.Timeout(120, connect=10)
            )
        return client

    def turn_fn(self, agent: str) -> TurnFn:
        async def turn(key: str, content: str) -> str:
            self.sent += 1
            body = json.dumps({"content": content, "stream": True, "agent": agent})
            client = self._client(key)
            async with client.stream("POST", f"/v1/sessions/{key}/messages", content=body) as r:
                raw = await r.aread()
            if r.status_code != 200:
                raise RuntimeError(f"HTTP {r.status_code}: {raw[:200]!r}")
            return answer_of(raw)

        return turn

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = await self._client("_admin").request(method, path, **kwargs)
        response.raise_for_status()
        return response

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def answer_of(raw: bytes) -> str:
    """The token text of an SSE body; raises unless it ended well."""
    parts: list[str] = []
    ended = False
    for frame in raw.split(b"\n\n"):
        if frame.startswith(b"event: token\n"):
            parts.append(json.loads(frame.split(b"data: ", 1)[1])["content"])
        elif frame.startswith(b"event: end\n"):
            ended = True
        elif frame.startswith(b"event: error\n"):
            raise RuntimeError(f"error event: {frame[:300]!r}")
    if not ended:
        raise RuntimeError("no end event")
    return "".join(parts)


# -- long histories, seeded through export and import ----------------------------------------


#: A tool turn's messages: user, assistant with two calls, two results, the answer.
TURN_MESSAGES = 5


def replicate_export(export: str, key: str, turns: int) -> str:
    """An import file for `key` whose thread is the exported key's tool turns repeated
    until `turns` of them (one segment). Each copy gets its own message seqs, tool-call ids
    and turn ids, so every call still has exactly one result."""
    lines = [json.loads(line) for line in export.splitlines() if line.strip()]
    header = next(line for line in lines if line["type"] == "key")
    segment = next(line for line in lines if line["type"] == "segment")
    template = [m for m in lines if m["type"] == "message"]
    starts = [i for i, m in enumerate(template) if m["role"] == "user"]
    if len(starts) != 1 or len(template) != TURN_MESSAGES:
        raise ValueError(f"the template key should hold one tool turn: {len(template)} messages")
    out = [{**header, "key": key, "latest_session_id": segment["session_id"]}, segment]
    seq = 0
    for copy_index in range(turns):
        suffix = f"_h{copy_index}"
        for message in template:
            seq += 1
            metadata = copy.deepcopy(message["metadata"])
            if "turn_id" in metadata:
                metadata["turn_id"] += suffix
            for call in metadata.get("tool_calls") or ():
                call["id"] += suffix
            if "tool_call_id" in metadata:
                metadata["tool_call_id"] += suffix
            out.append({**message, "seq": seq, "metadata": metadata})
    return "\n".join(json.dumps(line, separators=(",", ":")) for line in out) + "\n"


async def seed_histories(
    client: GatewayClient, agent: str, keys: dict[str, int], label: str
) -> dict[str, float]:
    """Give each key of `keys` that many prior tool turns: one real tool turn on a template
    key, `GET /v1/sessions/{template}/export`, the turn repeated (`replicate_export`), then
    `POST /v1/import?key=...`. Returns the seconds each import took."""
    import time

    from support.agent_load import checked_turn

    template = f"{label}-template"
    await checked_turn(client.turn_fn(agent), template, 0, tools=True)
    export = (await client.request("GET", f"/v1/sessions/{template}/export")).text
    took: dict[str, float] = {}
    for key, turns in keys.items():
        body = replicate_export(export, key, turns).encode()
        started = time.perf_counter()
        await client.request("POST", "/v1/import", params={"key": key}, content=body)
        took[key] = time.perf_counter() - started
        latest = (await client.request("GET", f"/v1/sessions/{key}")).json()["latest"]
        if latest["message_count"] != turns * TURN_MESSAGES:
            raise RuntimeError(f"{key}: imported {latest['message_count']} messages")
    return took
