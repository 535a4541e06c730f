"""Several gateways that are separate `sessiongate serve` processes, each on its own port
with its own data_dir (as on separate hosts: no shared parent, files or local sockets),
cooperating through one PostgreSQL database alone (DESIGN.md §15, issue 23).

Proved here, through the served gateways: per-key order across gateways, an
`Idempotency-Key` replayed (and joined while running) on the other gateway, a turn
running on one gateway resumed on the other, a WebSocket on one gateway hearing the turns
made on the other, hook deliveries sent exactly once, retention archiving each idle key
once; and a second gateway on one SQLite file refused.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.support.hook_receiver import Receiver
from tests.support.pg import _drop as drop_database
from tests.support.pg import server_url, with_database
from tests.support.served import (
    CLI,
    ROOT,
    Served,
    add_user,
    free_port,
    relay_model,
    serve_process,
    served_gateway,
    wait_healthy,
)

pytestmark = pytest.mark.postgres

SECRET = "multi-gateway-hook-secret"
TIMEOUT = 30.0

#: The model: `slow N` answers N words `w0 … w<N-1>`, one every 50 ms; anything else
#: `reply to: <message>`, a word at a time. Every call appends its message to the file
#: named by its first argument, so a test counts the calls whichever gateway made them.
RELAY = """\
import json, sys, time
body = json.load(sys.stdin)
content = str(body["messages"][-1].get("content", ""))
with open(sys.argv[1], "a", encoding="utf-8") as calls:
    calls.write(json.dumps(content) + "\\n")
if content.startswith("slow "):
    pieces = [f"w{i} " for i in range(int(content.split()[1]))]
    pause = 0.05
else:
    words = f"reply to: {content}".split(" ")
    pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
    pause = 0.002
for piece in pieces:
    sys.stdout.write(piece)
    sys.stdout.flush()
    time.sleep(pause)
"""


@dataclass
class Cluster:
    database_url: str
    gateways: list[Served]
    receiver: Receiver
    calls: Path

    @property
    def keys(self) -> dict[str, str]:
        return self.gateways[0].keys

    def model_calls(self, content: str) -> int:
        if not self.calls.exists():
            return 0
        lines = self.calls.read_text(encoding="utf-8").splitlines()
        return sum(json.loads(line) == content for line in lines)


def gateway_config(directory: Path, database_url: str, port: int, hook_url: str) -> Path:
    """One gateway's configuration: its own data_dir and port, the shared database, the
    same model, hook and retention settings as every other gateway."""
    directory.mkdir(parents=True, exist_ok=True)
    relay = directory.parent / "relay.py"
    calls = directory.parent / "calls.jsonl"
    command = json.dumps([sys.executable, str(relay), str(calls)])
    config = directory / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(directory / 'data'))}\n"
        f"[server]\nport = {port}\n"
        f"[database]\nurl = {json.dumps(database_url)}\npool_size = 4\n"
        '[lifecycle]\ntimezone = "UTC"\n'
        f'[models.relay]\nprovider = "command"\ncommand = {command}\n'
        '[agents.defaults]\nmodel = "relay"\n'
        '[retention]\nidle_after = "30d"\naction = "archive"\ninterval = "1s"\n'
        f'[[hooks]]\nname = "audit"\nurl = {json.dumps(hook_url)}\nsecret = "{SECRET}"\n'
        'events = ["turn.completed", "session.rotated"]\nbackoff = "1s"\n',
        encoding="utf-8",
    )
    return config


@contextmanager
def database() -> Iterator[str]:
    """`fresh_database`'s empty database, for a module-scoped (synchronous) fixture."""
    server = server_url()
    name = f"sg_test_multi_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        admin = await asyncpg.connect(server)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()

    asyncio.run(create())
    try:
        yield with_database(server, name)
    finally:
        asyncio.run(drop_database(server, name))


@contextmanager
def cluster(directory: Path, count: int) -> Iterator[Cluster]:
    (directory / "relay.py").write_text(RELAY, encoding="utf-8")
    receiver = Receiver(SECRET.encode()).start()
    try:
        with database() as database_url, ExitStack() as stack:
            ports: list[int] = []
            while len(ports) < count:
                port = free_port()
                if port not in ports:
                    ports.append(port)
            configs = [
                gateway_config(directory / f"gw{n}", database_url, port, receiver.url)
                for n, port in enumerate(ports)
            ]
            # Users are made once, on the first gateway's configuration: the database holds
            # them for every gateway.
            keys = {name: add_user(configs[0], name) for name in ("alice", "bob")}
            gateways = []
            for config, port in zip(configs, ports, strict=True):
                log = config.parent / "serve.log"
                proc = stack.enter_context(
                    serve_process([*CLI, "serve", "--config", str(config)], log)
                )
                gateways.append(Served(f"http://127.0.0.1:{port}", config, log, proc, keys))
            for served in gateways:
                wait_healthy(served)
            yield Cluster(database_url, gateways, receiver, directory / "calls.jsonl")
    finally:
        receiver.stop()


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("two-gateways"), 2) as found:
        yield found


@asynccontextmanager
async def clients(found: Cluster, user: str = "alice") -> AsyncIterator[list[httpx.AsyncClient]]:
    """One client per gateway, in the gateways' order."""
    made = [
        httpx.AsyncClient(base_url=g.url, headers=g.auth(user), timeout=TIMEOUT)
        for g in found.gateways
    ]
    try:
        yield made
    finally:
        for client in made:
            await client.aclose()


async def history(database_url: str, key: str) -> list[tuple[str, str, str]]:
    """(role, content, turn_id) of every message of the key's chain, in order."""
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT m.role, m.content, m.metadata::text AS metadata FROM messages m"
            " JOIN segments s ON s.session_id = m.segment_id WHERE s.key = $1"
            " ORDER BY s.pos, m.seq",
            key,
        )
    finally:
        await conn.close()
    return [
        (str(r["role"]), str(r["content"]), str(json.loads(r["metadata"]).get("turn_id", "")))
        for r in rows
    ]


async def eventually(check: Callable[[], bool | Awaitable[bool]], within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            pytest.fail("the condition never held")
        await asyncio.sleep(0.05)


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def tokens(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(data["content"] for kind, data in events if kind == "token")


# -- per-key order --------------------------------------------------------------------------


async def test_turns_on_one_key_from_both_gateways_never_interleave(two: Cluster) -> None:
    async with clients(two) as (a, b):

        async def turn(client: httpx.AsyncClient, n: int) -> str:
            response = await client.post(
                "/v1/sessions/order:shared/messages",
                json={"content": f"message {n}", "stream": False},
            )
            assert response.status_code == 200, response.text
            return str(response.json()["reply"])

        replies = await asyncio.gather(*(turn((a, b)[n % 2], n) for n in range(16)))
    assert replies == [f"reply to: message {n}" for n in range(16)]
    stored = await history(two.database_url, "alice/order:shared")
    # Every user message exactly once, its own answer right after it.
    assert [role for role, _, _ in stored] == ["user", "assistant"] * 16
    pairs = [(stored[i][1], stored[i + 1][1]) for i in range(0, 32, 2)]
    assert sorted(pairs) == sorted((f"message {n}", f"reply to: message {n}") for n in range(16))
    assert all(stored[i][2] == stored[i + 1][2] != "" for i in range(0, 32, 2))


# -- idempotency ----------------------------------------------------------------------------


async def test_an_idempotent_retry_on_the_other_gateway_replays_the_turn(two: Cluster) -> None:
    async with clients(two) as (a, b):
        body = {"content": "exactly once please", "stream": False}
        first = await a.post(
            "/v1/sessions/idem:one/messages", json=body, headers={"Idempotency-Key": "retry-1"}
        )
        again = await b.post(
            "/v1/sessions/idem:one/messages", json=body, headers={"Idempotency-Key": "retry-1"}
        )
        assert first.status_code == again.status_code == 200, again.text
        fields = ("turn_id", "message_id", "session_id", "reply")
        assert {k: again.json()[k] for k in fields} == {k: first.json()[k] for k in fields}
        assert two.model_calls("exactly once please") == 1
        # The same key with another body is refused there too.
        other = await b.post(
            "/v1/sessions/idem:one/messages",
            json={"content": "something else", "stream": False},
            headers={"Idempotency-Key": "retry-1"},
        )
        assert (
            other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"
        )
        # Another user's equal key is another turn.
        async with clients(two, "bob") as (_, bob_b):
            bobs = await bob_b.post(
                "/v1/sessions/idem:one/messages", json=body, headers={"Idempotency-Key": "retry-1"}
            )
        assert bobs.status_code == 200 and bobs.json()["turn_id"] != first.json()["turn_id"]
    assert [c for _, c, _ in await history(two.database_url, "alice/idem:one")] == [
        "exactly once please",
        "reply to: exactly once please",
    ]


async def test_a_retry_on_the_other_gateway_while_the_turn_runs_waits_for_it(
    two: Cluster,
) -> None:
    async with clients(two) as (a, b):
        body = {"content": "slow 40", "stream": False}
        headers = {"Idempotency-Key": "running-1"}
        first = asyncio.create_task(
            a.post("/v1/sessions/idem:two/messages", json=body, headers=headers)
        )
        # The turn is running on A (its user message is stored) before B is asked.
        await eventually(lambda: two.model_calls("slow 40") == 1)
        second = await b.post("/v1/sessions/idem:two/messages", json=body, headers=headers)
        one = await first
    assert one.status_code == second.status_code == 200, second.text
    assert second.json()["turn_id"] == one.json()["turn_id"]
    assert second.json()["reply"] == one.json()["reply"] == "".join(f"w{i} " for i in range(40))
    assert two.model_calls("slow 40") == 1
    assert len(await history(two.database_url, "alice/idem:two")) == 2


# -- stream resume --------------------------------------------------------------------------


async def test_a_turn_running_on_one_gateway_resumes_on_the_other(two: Cluster) -> None:
    async with clients(two) as (a, b):
        async with a.stream(
            "POST", "/v1/sessions/resume:x/messages", json={"content": "slow 30"}
        ) as response:
            assert response.status_code == 200
            chunks = response.aiter_text()
            buffer = ""
            while "event: token" not in buffer:
                buffer += await anext(chunks)
            start = sse(buffer)[0]
            assert start[0] == "start"
            turn_id = start[1]["turn_id"]
            # B never ran this turn: it finds it in the database and answers it once the
            # reply is stored, while A is still streaming it.
            resumed_task = asyncio.create_task(b.get(f"/v1/turns/{turn_id}/events"))
            rest = ""
            async for chunk in chunks:
                rest += chunk
        direct = sse(buffer + rest)
        resumed = await resumed_task
        assert resumed.status_code == 200
        replayed = sse(resumed.text)
        assert [kind for kind, _ in replayed] == ["start", "token", "end"]
        assert replayed[0][1]["turn_id"] == turn_id
        assert tokens(replayed) == tokens(direct) == "".join(f"w{i} " for i in range(30))
        assert replayed[-1][1]["message_id"] == direct[-1][1]["message_id"]
        # Another user's turn is answered as one that never existed, on either gateway.
        async with clients(two, "bob") as (bob_a, bob_b):
            for client in (bob_a, bob_b):
                hidden = await client.get(f"/v1/turns/{turn_id}/events")
                assert (
                    hidden.status_code == 404 and hidden.json()["error"]["code"] == "turn_not_found"
                )


# -- WebSocket broadcast ----------------------------------------------------------------------


@asynccontextmanager
async def socket(served: Served, user: str, key: str) -> AsyncIterator[ClientConnection]:
    ws_url = served.url.replace("http://", "ws://")
    async with connect(
        f"{ws_url}/v1/ws?session_id={key}", open_timeout=10, close_timeout=2, proxy=None
    ) as ws:
        await ws.send(served.keys[user])
        assert await asyncio.wait_for(ws.recv(), 10) == "authenticated"
        ready = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert ready["type"] == "ready" and ready["session_id"] == key
        yield ws


async def frames_until_end(ws: ClientConnection) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        frames.append(frame)
        if frame["type"] in ("complete", "error"):
            return frames


async def test_a_socket_on_one_gateway_hears_turns_made_on_the_other(two: Cluster) -> None:
    gw_a, gw_b = two.gateways
    async with socket(gw_b, "alice", "cast:one") as listener:
        # A REST turn on A: announced to B's socket once it ends, read from the database.
        async with clients(two) as (a, _):
            response = await a.post(
                "/v1/sessions/cast:one/messages", json={"content": "from rest", "stream": False}
            )
        assert response.status_code == 200
        heard = await frames_until_end(listener)
        assert [f["type"] for f in heard] == ["user_message", "message", "complete"]
        assert heard[0]["content"] == "from rest"
        assert heard[1]["content"] == "reply to: from rest"
        assert heard[-1]["message_id"] == response.json()["message_id"]
        # A WebSocket turn on A: relayed live, chunk by chunk.
        async with socket(gw_a, "alice", "cast:one") as sender:
            await sender.send(json.dumps({"content": "slow 12"}))
            sent = await frames_until_end(sender)
            heard = await frames_until_end(listener)
        assert heard[0]["type"] == "user_message" and heard[0]["content"] == "slow 12"
        chunks = [f["content"] for f in heard if f["type"] == "message"]
        assert len(chunks) > 1  # live pieces, not one message read back at the end
        assert "".join(chunks) == "".join(f["content"] for f in sent if f["type"] == "message")
        assert heard[-1]["type"] == "complete"
        assert heard[-1]["message_id"] == sent[-1]["message_id"]
    # Bob's socket on B hears nothing of alice's key of the same name.
    async with socket(gw_b, "bob", "cast:one") as bobs, clients(two) as (a, _):
        await a.post("/v1/sessions/cast:one/messages", json={"content": "private", "stream": False})
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(bobs.recv(), 1.0)


# -- hooks and retention run once ---------------------------------------------------------------


def deliveries(found: Cluster, event: str, key_prefix: str) -> list[dict[str, Any]]:
    return [
        r.body
        for r in list(found.receiver.received)
        if r.event == event and str(r.body["data"]["key"]).startswith(key_prefix)
    ]


async def test_each_hook_delivery_arrives_once_with_two_gateways_sending(two: Cluster) -> None:
    async with clients(two) as (a, b):
        for n in range(20):
            client = (a, b)[n % 2]
            response = await client.post(
                f"/v1/sessions/hooked:{n % 4}/messages",
                json={"content": f"hook {n}", "stream": False},
            )
            assert response.status_code == 200
    await eventually(lambda: len(deliveries(two, "turn.completed", "hooked:")) >= 20)
    await asyncio.sleep(3)  # both senders poll every second: time for a second sending
    sent = deliveries(two, "turn.completed", "hooked:")
    assert len(sent) == 20
    assert len({d["id"] for d in sent}) == len({d["data"]["turn_id"] for d in sent}) == 20
    assert all(r.signature_ok for r in two.receiver.received)


async def test_retention_archives_each_idle_key_once_with_two_gateways(two: Cluster) -> None:
    async with clients(two) as (a, b):
        for n in range(6):
            response = await (a, b)[n % 2].post(
                f"/v1/sessions/idle:{n}/messages", json={"content": "old", "stream": False}
            )
            assert response.status_code == 200
        # A key that stays in use is never archived.
        await a.post("/v1/sessions/idle:busy/messages", json={"content": "new", "stream": False})
    conn = await asyncpg.connect(two.database_url)
    try:
        # Forty days without a word, as far as the database knows: both gateways' next
        # scheduled runs (every second) find the six keys idle.
        await conn.execute(
            "UPDATE segments SET last_activity_at = last_activity_at - interval '40 days'"
            " WHERE key LIKE 'alice/idle:_'"
        )

        async def rotated() -> int:
            return int(
                await conn.fetchval("SELECT count(*) FROM rotations WHERE key LIKE 'alice/idle:%'")
            )

        async def all_rotated() -> bool:
            return await rotated() >= 6

        await eventually(all_rotated, within=30)
        await eventually(lambda: len(deliveries(two, "session.rotated", "idle:")) >= 6, 30)
        await asyncio.sleep(3)  # several more runs on both gateways
        assert await rotated() == 6
        per_key = await conn.fetch(
            "SELECT key, count(*) AS n FROM rotations WHERE key LIKE 'alice/idle:%' GROUP BY key"
        )
    finally:
        await conn.close()
    assert {r["key"]: r["n"] for r in per_key} == {f"alice/idle:{n}": 1 for n in range(6)}
    announced = deliveries(two, "session.rotated", "idle:")
    assert sorted(d["data"]["key"] for d in announced) == [f"idle:{n}" for n in range(6)]
    assert {d["data"]["reason"] for d in announced} == {"idle"}


# -- a gateway killed mid-turn ------------------------------------------------------------------


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Cluster]:
    """Two gateways of the test's own (it kills one)."""
    with cluster(tmp_path, 2) as found:
        yield found


async def test_a_retry_after_its_gateway_was_killed_runs_on_the_other_at_once(
    pair: Cluster,
) -> None:
    """SIGKILL the gateway running an idempotent turn: the client's retry on the other
    gateway must not wait out `stale_after` (ten minutes) on a row no process will ever
    finish; the claimer's liveness lock went with it, so the row is taken over."""
    found = pair
    gw_b = found.gateways[1]
    async with clients(found) as (a, b):
        body = {"content": "slow 100", "stream": False}
        headers = {"Idempotency-Key": "killed-1"}
        doomed = asyncio.create_task(
            b.post("/v1/sessions/killed:one/messages", json=body, headers=headers)
        )
        await eventually(lambda: found.model_calls("slow 100") == 1)
        os.killpg(gw_b.proc.pid, signal.SIGKILL)
        with pytest.raises(httpx.TransportError):
            await doomed
        began = time.monotonic()
        retried = await a.post(
            "/v1/sessions/killed:one/messages",
            json={"content": "slow 100", "stream": False},
            headers=headers,
        )
        waited = time.monotonic() - began
        assert retried.status_code == 200, retried.text
        assert retried.json()["reply"] == "".join(f"w{i} " for i in range(100))
        assert waited < 20  # the run itself takes about 5 s
        # Answered once: a retry now replays it, on either gateway still up.
        again = await a.post("/v1/sessions/killed:one/messages", json=body, headers=headers)
        assert again.json()["turn_id"] == retried.json()["turn_id"]
    assert found.model_calls("slow 100") == 2  # the killed run, and the retry's
    stored = await history(found.database_url, "alice/killed:one")
    # What the killed turn had stored stays (its user message, as after any crash);
    # the retry's question and answer follow.
    assert [(role, content) for role, content, _ in stored][-2:] == [
        ("user", "slow 100"),
        ("assistant", "".join(f"w{i} " for i in range(100))),
    ]
    assert [role for role, _, _ in stored] == ["user", "user", "assistant"]


# -- what a gateway on a vanished host leaves behind ------------------------------------------


async def test_lock_sessions_ask_the_server_to_notice_a_vanished_host(two: Cluster) -> None:
    """A key lock ends only with its session: the server must learn within seconds, not
    Linux's two hours of TCP keepalive, that a gateway's host is gone."""
    from sessiongate.store.postgres.locks import HOLDER_SETTINGS
    from sessiongate.store.postgres.store import PostgresStore

    store = PostgresStore(two.database_url, pool_size=1)
    await store.start()
    try:
        async with store.lock_pool.acquire() as conn:
            shown = {name: await conn.fetchval(f"SHOW {name}") for name in HOLDER_SETTINGS}
        async with store.pool.acquire() as conn:
            plain = await conn.fetchval("SHOW tcp_keepalives_idle")
    finally:
        await store.stop()
    assert shown == {
        "tcp_keepalives_idle": "10",
        "tcp_keepalives_interval": "5",
        "tcp_keepalives_count": "3",
    }
    assert plain != "10"  # only the sessions that hold locks are probed this often


# -- one gateway per SQLite file ----------------------------------------------------------------


def test_a_second_gateway_on_one_sqlite_file_is_refused(tmp_path: Path) -> None:
    config_text = relay_model(tmp_path, "relay") + '[agents.defaults]\nmodel = "relay"\n'
    with served_gateway(tmp_path, config_text, {"alice": ()}) as first:
        second = subprocess.run(
            [*CLI, "serve", "--config", str(first.config), "--port", str(free_port())],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 2, second.stderr
        assert "another gateway already serves the SQLite database" in second.stderr
        assert "PostgreSQL" in second.stderr
        # Other commands still run beside the gateway, and it still answers.
        listed = first.cli("users", "list")
        assert listed.returncode == 0 and "alice" in listed.stdout
        with first.client("alice") as client:
            answer = client.post("/v1/sessions/s/messages", json={"content": "hi", "stream": False})
        assert answer.status_code == 200
    # Once it has stopped, the file may be served again.
    with served_gateway(tmp_path, config_text, {}) as again:
        assert httpx.get(f"{again.url}/health").status_code == 200
