"""A background response whose gateway process died (DESIGN.md §14, §15; issues 23, 25):
it no longer stays `in_progress` forever. Its kept body names the process running it;
whoever reads it while that process is gone (PostgreSQL: its liveness lock is not held;
SQLite: a process that is not this one) ends it `failed` with `server_error`, keeping
what its turn stored, and GET, cancel, stream resume and `previous_response_id` all see
that end.

Through `sessiongate serve`: two gateways on one PostgreSQL, the one running a slow
background response killed with SIGKILL; and one SQLite gateway killed and served again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from sessiongate.core.responses import ABANDONED_ERROR, abandoned_response
from tests.support.pg import fresh_database_sync
from tests.support.served import CLI, Served, serve_process, served_gateway, wait_healthy
from tests.support.served_cluster import served_cluster

#: Streams `slow N` as N words, 50 ms apart; anything else at once.
SLOW_RELAY = """\
import json, sys, time
body = json.load(sys.stdin)
content = str(body["messages"][-1].get("content", ""))
if content.startswith("slow "):
    for i in range(int(content.split()[1])):
        sys.stdout.write(f"w{i} ")
        sys.stdout.flush()
        time.sleep(0.05)
else:
    sys.stdout.write(f"quick answer to: {content}")
"""

USERS: dict[str, tuple[str, ...]] = {"alice": (), "bob": ()}


def _config(directory: Path) -> str:
    relay = directory / "relay.py"
    relay.write_text(SLOW_RELAY, encoding="utf-8")
    command = json.dumps([sys.executable, str(relay)])
    return f'[models.relay]\nprovider = "command"\ncommand = {command}\n' + (
        '[agents.defaults]\nmodel = "relay"\n'
    )


def _kill(served: Served) -> None:
    """SIGKILL the gateway (and its model relay): nothing of it runs its shutdown."""
    os.killpg(served.proc.pid, signal.SIGKILL)
    served.proc.wait(timeout=10)


def _start_slow(client: httpx.Client) -> str:
    started = client.post(
        "/v1/responses", json={"model": "main", "input": "slow 600", "background": True}
    )
    assert started.status_code == 200, started.text
    assert started.json()["status"] == "in_progress"
    return str(started.json()["id"])


def _ended(client: httpx.Client, response_id: str, within: float = 15) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        answer = client.get(f"/v1/responses/{response_id}")
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        if body["status"] != "in_progress" or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def _check_ended_everywhere(client: httpx.Client, bob: httpx.Client, response_id: str) -> None:
    """The dead response as every route now answers it."""
    body = _ended(client, response_id)
    assert body["status"] == "failed", body
    assert body["error"] == ABANDONED_ERROR
    assert body["background"] is True and body["id"] == response_id
    assert not any(k.startswith("sessiongate_") for k in body), body
    # Cancel answers it as it is, at once.
    asked = time.monotonic()
    cancelled = client.post(f"/v1/responses/{response_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json() == body
    assert time.monotonic() - asked < 5
    # A stream resume ends with `response.failed` carrying the same response.
    streamed = client.get(f"/v1/responses/{response_id}", params={"stream": "true"})
    assert streamed.status_code == 200
    events = [
        json.loads(line[len("data: ") :])
        for line in streamed.text.splitlines()
        if line.startswith("data: ")
    ]
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"] == body
    # The key is free again: a response continues from it.
    after = client.post(
        "/v1/responses",
        json={"model": "main", "input": "after", "previous_response_id": response_id},
    )
    assert after.status_code == 200, after.text
    assert after.json()["output"][0]["content"][0]["text"] == "quick answer to: after"
    # Another user: exactly as an id that never existed.
    theirs = bob.get(f"/v1/responses/{response_id}")
    never = bob.get("/v1/responses/resp_00000000000070008000000000000000")
    assert theirs.status_code == never.status_code == 404
    assert theirs.json()["error"]["code"] == never.json()["error"]["code"]


def _pg_user_messages(url: str) -> list[str]:
    async def fetch() -> list[str]:
        conn = await asyncpg.connect(url)
        try:
            rows = await conn.fetch("SELECT content FROM messages WHERE role = 'user'")
            return [r[0] for r in rows]
        finally:
            await conn.close()

    return asyncio.run(fetch())


@pytest.mark.postgres
def test_a_killed_gateways_background_response_ends_failed_on_the_other(tmp_path: Path) -> None:
    with (
        fresh_database_sync() as url,
        served_cluster(tmp_path, _config(tmp_path), USERS, database_url=url) as gateways,
    ):
        first, second = gateways
        with first.client("alice") as on_first:
            response_id = _start_slow(on_first)  # ~30 s of words
        time.sleep(1.0)
        with second.client("alice") as on_second, second.client("bob") as bob:
            # Its process alive, the other gateway leaves it running.
            assert on_second.get(f"/v1/responses/{response_id}").json()["status"] == ("in_progress")
            _kill(first)
            _check_ended_everywhere(on_second, bob, response_id)
        # What the turn stored is kept: its user message, once.
        assert _pg_user_messages(url).count("slow 600") == 1


def test_a_background_response_of_a_killed_sqlite_gateway_ends_failed_after_restart(
    tmp_path: Path,
) -> None:
    with served_gateway(tmp_path, _config(tmp_path), USERS) as served:
        with served.client("alice") as alice:
            response_id = _start_slow(alice)
        time.sleep(1.0)
        _kill(served)
        log = tmp_path / "serve-again.log"
        command = [*CLI, "serve", "--config", str(served.config)]
        with serve_process(command, log) as proc:
            again = Served(served.url, served.config, log, proc, served.keys)
            wait_healthy(again)
            with again.client("alice") as alice, again.client("bob") as bob:
                _check_ended_everywhere(alice, bob, response_id)
    database = tmp_path / "data" / "sessiongate.db"
    with sqlite3.connect(database) as conn:
        stored = [r[0] for r in conn.execute("SELECT content FROM messages WHERE role = 'user'")]
    assert stored.count("slow 600") == 1


# --- the pure rule -------------------------------------------------------------------------

_BODY: dict[str, Any] = {
    "id": "resp_0192",
    "object": "response",
    "status": "in_progress",
    "error": None,
    "incomplete_details": None,
    "output": [],
    "usage": None,
    "background": True,
}


def test_an_abandoned_response_keeps_what_its_turn_stored() -> None:
    nothing = abandoned_response(_BODY, "", end_status=None, usage=None, cancelled=False)
    assert nothing["status"] == "failed" and nothing["error"]["code"] == "server_error"
    assert nothing["output"] == [] and nothing["background"] is True
    partial = abandoned_response(_BODY, "half of it", end_status=None, usage=None, cancelled=False)
    assert partial["status"] == "failed"
    assert partial["output"][0]["status"] == "incomplete"
    assert partial["output"][0]["content"][0]["text"] == "half of it"
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    whole = abandoned_response(_BODY, "all", end_status="complete", usage=usage, cancelled=False)
    assert whole["status"] == "completed" and whole["error"] is None
    assert whole["output"][0]["id"] == "msg_0192"
    assert whole["output"][0]["content"][0]["text"] == "all"
    assert whole["usage"]["total_tokens"] == 7
    cut = abandoned_response(_BODY, "cut", end_status="truncated", usage=None, cancelled=False)
    assert cut["status"] == "incomplete"
    assert cut["incomplete_details"] == {"reason": "max_output_tokens"}
    asked = abandoned_response(_BODY, "some", end_status=None, usage=None, cancelled=True)
    assert asked["status"] == "cancelled" and asked["error"] is None
    assert asked["output"][0]["content"][0]["text"] == "some"
    assert _BODY["status"] == "in_progress"  # the kept body is not changed in place
