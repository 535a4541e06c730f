"""Quotas and exactly-once turns together (DESIGN.md §11, §15; issue 23): a retry with the
same `Idempotency-Key` that is replayed (its turn ended) or joined (its turn still runs)
runs nothing and is not counted against the requests-per-minute quota, even once the user
is over it; a request with a new key is counted and refused as before, before anything
is stored. The WebSocket's refusal frame says when to come back (`retry_after`). A
stateless request (a one-shot reply kept nowhere) counts like any other.

Through `sessiongate serve`, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from websockets.sync.client import connect

from tests.support.pg import fresh_database_sync
from tests.support.served import Served, served_gateway

#: A reply model that takes a while on a message saying `slow`, so a retry can join it.
SLOW_RELAY = """\
import json, sys, time
body = json.load(sys.stdin)
content = body["messages"][-1].get("content", "")
if isinstance(content, list):
    content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
if "slow" in content:
    time.sleep(2.5)
sys.stdout.write(f"echo: {content}")
"""


def _config(
    directory: Path, database_url: str | None, quotas: str = "requests_per_minute = 2"
) -> str:
    script = directory / "slow_relay.py"
    script.write_text(SLOW_RELAY, encoding="utf-8")
    command = json.dumps([sys.executable, str(script)])
    text = f'[models.relay]\nprovider = "command"\ncommand = {command}\n'
    text += '[agents.defaults]\nmodel = "relay"\n'
    if database_url is not None:
        text += f"[database]\nurl = {json.dumps(database_url)}\npool_size = 4\n"
    return text + f"[quotas]\n{quotas}\n"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Served, str]]:
    users: dict[str, tuple[str, ...]] = {"alice": (), "bob": (), "carol": ()}
    if request.param == "sqlite":
        with served_gateway(tmp_path, _config(tmp_path, None), users) as g:
            yield g, "sqlite"
        return
    with (
        fresh_database_sync() as url,
        served_gateway(tmp_path, _config(tmp_path, url), users) as g,
    ):
        yield g, url


@contextmanager
def _no_database() -> Iterator[None]:
    yield None


def _user_messages(served: Served, where: str) -> list[str]:
    sql = "SELECT content FROM messages WHERE role = 'user' ORDER BY content"
    if where == "sqlite":
        path = served.config.parent / "data" / "sessiongate.db"
        with sqlite3.connect(path) as conn:
            return [r[0] for r in conn.execute(sql).fetchall()]

    async def fetch() -> list[str]:
        conn = await asyncpg.connect(where)
        try:
            return [r[0] for r in await conn.fetch(sql)]
        finally:
            await conn.close()

    return asyncio.run(fetch())


def _fresh_minute(margin: float = 20.0) -> None:
    """A new UTC minute when this one has less than `margin` seconds left: every request
    of the test falls in one window."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.2)


def _turn(client: httpx.Client, content: str, key: str | None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    body = {"content": content, "stream": False}
    return client.post("/v1/sessions/k/messages", json=body, headers=headers)


def _used(client: httpx.Client) -> int:
    quotas: dict[str, Any] = client.get("/v1/me/quotas").json()["quotas"]
    return int(quotas["requests_per_minute"]["used"])


def test_replays_and_joins_are_free_and_new_turns_are_counted(
    gateway: tuple[Served, str],
) -> None:
    served, where = gateway
    _fresh_minute()
    with served.client("alice") as alice:
        # A slow turn, and a retry with its key while it runs: joined, not counted.
        answers: dict[str, httpx.Response] = {}

        def first() -> None:
            with served.client("alice") as own:
                answers["first"] = _turn(own, "slow one", "idem-a")

        runner = threading.Thread(target=first)
        runner.start()
        time.sleep(1.0)  # the turn is running (the model sleeps 2.5 s)
        joined = _turn(alice, "slow one", "idem-a")
        runner.join(timeout=30)
        assert answers["first"].status_code == 200, answers["first"].text
        assert joined.status_code == 200, joined.text
        assert joined.json()["reply"] == answers["first"].json()["reply"] == "echo: slow one"
        assert joined.json()["turn_id"] == answers["first"].json()["turn_id"]
        assert _used(alice) == 1
        # Replays of the ended turn: three more, none counted (the quota is 2).
        for _ in range(3):
            again = _turn(alice, "slow one", "idem-a")
            assert again.status_code == 200, again.text
            assert again.json()["reply"] == "echo: slow one"
            assert again.json()["turn_id"] == joined.json()["turn_id"]
        assert _used(alice) == 1
        # A new key is a new turn: counted, up to the quota and refused past it.
        assert _turn(alice, "two", "idem-b").status_code == 200
        assert _used(alice) == 2
        refused = _turn(alice, "three refused", "idem-c")
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "quota_exceeded"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        no_key = _turn(alice, "four refused", None)
        assert no_key.status_code == 429, no_key.text
        # Over the quota, a replay is still answered from its turn.
        late = _turn(alice, "two", "idem-b")
        assert late.status_code == 200, late.text
        assert late.json()["reply"] == "echo: two"
        # The refused key was released: its retry is refused again (counted as new),
        # not answered from anything.
        again_refused = _turn(alice, "three refused", "idem-c")
        assert again_refused.status_code == 429, again_refused.text
        assert _used(alice) == 2
    assert _user_messages(served, where) == ["slow one", "two"]


def _until(ws: Any, kinds: set[str]) -> dict[str, Any]:
    """The socket's next answer to one of its own frames of one of `kinds` (the frames
    before it, and the copies of other turns on the key, skipped)."""
    while True:
        frame: dict[str, Any] = json.loads(ws.recv(timeout=15))
        if frame["type"] in kinds and "frame" in frame:
            return frame


def test_the_websocket_refusal_frame_says_when_to_retry_and_a_resent_frame_is_free(
    gateway: tuple[Served, str],
) -> None:
    served, where = gateway
    _fresh_minute()
    ws_url = served.url.replace("http://", "ws://") + "/v1/ws"
    with connect(ws_url, proxy=None) as ws, served.client("bob") as bob:
        ws.send(served.keys["bob"])
        assert ws.recv(timeout=10) == "authenticated"
        sent = {"content": "by socket", "session_id": "k", "client_message_id": "m-1"}
        ws.send(json.dumps(sent))
        assert _until(ws, {"complete", "error"})["type"] == "complete"
        assert _turn(bob, "two", None).status_code == 200  # the quota (2) is used up
        expected = int(_turn(bob, "refused", None).headers["Retry-After"])
        ws.send(json.dumps({"content": "socket refused", "session_id": "k"}))
        frame = _until(ws, {"complete", "error"})
        assert frame["type"] == "error" and frame["code"] == "quota_exceeded", frame
        assert isinstance(frame["retry_after"], int)
        assert 1 <= frame["retry_after"] <= 60
        assert abs(frame["retry_after"] - expected) <= 2
        assert "requests per minute" in frame["message"]
        # The same frame again (a client that lost its answer): answered from its turn,
        # not refused, not counted.
        ws.send(json.dumps(sent))
        again = _until(ws, {"complete", "error"})
        assert again["type"] == "complete", again
        assert _used(bob) == 2
    assert _user_messages(served, where) == ["by socket", "two"]


def test_stateless_requests_count_against_the_quota(gateway: tuple[Served, str]) -> None:
    served, where = gateway
    _fresh_minute()
    with served.client("carol") as carol:
        # `store: false` without a conversation: a one-shot reply, kept nowhere.
        one_shot = {"model": "main", "input": "nothing kept", "store": False}
        for _ in range(2):
            answer = carol.post("/v1/responses", json=one_shot)
            assert answer.status_code == 200, answer.text
        refused = carol.post("/v1/responses", json=one_shot)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "quota_exceeded"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        # A task request (Open WebUI's title generation): stateless too, refused alike.
        task = carol.post(
            "/v1/chat/completions",
            json={"model": "main", "messages": [{"role": "user", "content": "a title"}]},
            headers={"X-OpenWebUI-Task": "title_generation"},
        )
        assert task.status_code == 429, task.text
        assert 1 <= int(task.headers["Retry-After"]) <= 60
        assert _used(carol) == 2
    assert _user_messages(served, where) == []


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_stateless_replys_tokens_count_against_the_day(store: str, tmp_path: Path) -> None:
    users: dict[str, tuple[str, ...]] = {"dave": ()}
    with fresh_database_sync() if store == "postgres" else _no_database() as url:
        config = _config(tmp_path, url, "tokens_per_day = 5")
        with served_gateway(tmp_path, config, users) as served, served.client("dave") as dave:
            one_shot = {"model": "main", "input": "count my tokens", "store": False}
            assert dave.post("/v1/responses", json=one_shot).status_code == 200
            deadline = time.monotonic() + 10
            while True:  # added in the background once the reply ended
                quotas = dave.get("/v1/me/quotas").json()["quotas"]
                if quotas["tokens_per_day"]["used"] > 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert quotas["tokens_per_day"]["used"] >= 5, quotas
            refused = dave.post("/v1/responses", json=one_shot)
            assert refused.status_code == 429, refused.text
            assert "tokens per day" in refused.json()["error"]["message"]
