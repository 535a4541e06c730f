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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from sessiongate.api.turns import begin_turn
from sessiongate.config import load_settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.events import EndEvent, StartEvent
from sessiongate.core.segments import Role
from sessiongate.core.users import Caller
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.idempotency import IdempotentRequest, idempotent_request
from sessiongate.service.turn.pipeline import InboundTurn
from tests.conftest import START, make_settings
from tests.support import helpers
from tests.support.example_stubs import last_text, text_of
from tests.support.helpers import ScriptedModel
from tests.support.hook_receiver import Receiver
from tests.support.openai_wire_server import WireAnswer, openai_wire_server
from tests.support.pg import fresh_database, fresh_database_sync
from tests.support.served import (
    CLI,
    ROOT,
    Served,
    free_port,
    relay_model,
    serve_process,
    served_gateway,
    wait_healthy,
)
from tests.support.served_cluster import served_cluster

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


def gateway_config(directory: Path, hook_url: str) -> str:
    """What every gateway of a cluster under `directory` serves: the one relay model (its
    calls counted in `directory/calls.jsonl`), the hook and the retention settings."""
    relay = directory / "relay.py"
    calls = directory / "calls.jsonl"
    command = json.dumps([sys.executable, str(relay), str(calls)])
    return (
        f'[models.relay]\nprovider = "command"\ncommand = {command}\n'
        '[agents.defaults]\nmodel = "relay"\n'
        '[retention]\nidle_after = "30d"\naction = "archive"\ninterval = "1s"\n'
        f'[[hooks]]\nname = "audit"\nurl = {json.dumps(hook_url)}\nsecret = "{SECRET}"\n'
        'events = ["turn.completed", "session.rotated"]\nbackoff = "1s"\n'
    )


@contextmanager
def cluster(directory: Path, count: int) -> Iterator[Cluster]:
    (directory / "relay.py").write_text(RELAY, encoding="utf-8")
    receiver = Receiver(SECRET.encode()).start()
    try:
        with (
            fresh_database_sync() as database_url,
            served_cluster(
                directory,
                gateway_config(directory, receiver.url),
                {"alice": (), "bob": ()},
                count,
                database_url,
            ) as gateways,
        ):
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
    await helpers.eventually(check, within)


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
    # The killed turn had stored its question: the retry answered that one, so the
    # question is kept once with its answer right after it.
    assert [(role, content) for role, content, _ in stored] == [
        ("user", "slow 100"),
        ("assistant", "".join(f"w{i} " for i in range(100))),
    ]


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


# -- the example ------------------------------------------------------------------------------


def test_the_two_gateways_example_serves_one_conversation_through_both(tmp_path: Path) -> None:
    """examples/two-gateways/gateway.toml, untouched, served twice as its walk-through
    says: only the database and model URLs, each gateway's data_dir and port from outside."""
    example = ROOT / "examples" / "two-gateways" / "gateway.toml"

    def respond(body: dict[str, Any]) -> WireAnswer:
        return WireAnswer(text=f"reply to: {last_text(body)}")

    with fresh_database_sync() as database_url, openai_wire_server(respond) as model:
        base = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONGATE_")}
        base.update(
            {
                "SESSIONGATE_DATABASE__URL": database_url,
                "SESSIONGATE_MODELS__REPLY__BASE_URL": f"{model.url}/v1",
                "SESSIONGATE_MODELS__REPLY__MAX_RETRIES": "0",
            }
        )
        settings = load_settings(example)
        assert settings.artifacts.store == "database"
        assert settings.lifecycle.timezone == "UTC"
        added = subprocess.run(
            [*CLI, "users", "add", "alice", "--config", str(example)],
            cwd=ROOT,
            env={**base, "SESSIONGATE_DATA_DIR": str(tmp_path / "a")},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert added.returncode == 0, added.stderr
        key = added.stdout.strip().splitlines()[-1]
        with ExitStack() as stack:
            served = []
            for name in ("a", "b"):
                port = free_port()
                proc = stack.enter_context(
                    serve_process(
                        [*CLI, "serve", "--config", str(example), "--port", str(port)],
                        tmp_path / f"{name}.log",
                        env={**base, "SESSIONGATE_DATA_DIR": str(tmp_path / name)},
                    )
                )
                gateway = Served(
                    f"http://127.0.0.1:{port}", example, tmp_path / f"{name}.log", proc, {}
                )
                wait_healthy(gateway)
                served.append(gateway)
            headers = {"Authorization": f"Bearer {key}"}
            first = httpx.post(
                f"{served[0].url}/v1/sessions/notes/messages",
                json={"content": "my name is Ada", "stream": False},
                headers=headers,
                timeout=30,
            )
            second = httpx.post(
                f"{served[1].url}/v1/sessions/notes/messages",
                json={"content": "what is my name?", "stream": False},
                headers=headers,
                timeout=30,
            )
        assert first.status_code == second.status_code == 200, second.text
        assert second.json()["reply"] == "reply to: what is my name?"
        assert second.json()["session_id"] == first.json()["session_id"]
        # Gateway b sent gateway a's turn to the model: one conversation, in the database.
        sent = [text_of(m["content"]) for m in model.requests[-1]["messages"]]
        assert sent[-3:] == ["my name is Ada", "reply to: my name is Ada", "what is my name?"]
        # Neither gateway wrote the conversation under its own data_dir.
        for name in ("a", "b"):
            assert not list((tmp_path / name).glob("*.db")), name


# -- an abandoned idempotency row, in the engine ------------------------------------------------


async def drive(engine: Engine, inbound: InboundTurn) -> None:
    """Run one turn to its end."""
    async for _ in engine.turns.run_turn(inbound):
        pass


async def test_an_abandoned_row_is_answered_from_its_stored_reply_or_run_again(
    tmp_path: Path,
) -> None:
    """A gateway died after its turn stored the reply but before it kept the outcome on
    the idempotency row: a retry elsewhere must answer that reply, not run the turn a
    second time. One that died before storing a reply: the retry runs the turn."""
    async with fresh_database() as url:
        model = ScriptedModel()
        settings = make_settings(tmp_path, database_url=url)
        engine = build_engine(settings, clock=ManualClock(START), models={"scripted": model})
        await engine.start()
        try:
            assert engine.idempotency is not None
            rows = engine.idempotency.rows
            inbound = InboundTurn("dead:a", Caller("alice"), "finished")
            ran = [event async for event in engine.turns.run_turn(inbound)]
            assert isinstance(ran[0], StartEvent) and isinstance(ran[-1], EndEvent)
            turn_id, message_id = ran[0].turn_id, ran[-1].message_id
            calls = len(model.requests)

            async def abandon(idem: str, content: str, dead_turn: str) -> IdempotentRequest:
                request = idempotent_request("alice", idem, None, "test", {"content": content})
                assert request is not None
                stale = START - timedelta(minutes=10)
                assert await rows.claim("alice", idem, request.fingerprint, START, stale) is None
                # Claimed by a process that is gone: nobody holds this liveness token.
                dead = json.dumps({"claimed_by": 2**31 - 7, "turn_id": dead_turn})
                await engine.store.pool.execute(  # type: ignore[attr-defined]
                    "UPDATE idempotency_keys SET result = $1 WHERE idem_key = $2", dead, idem
                )
                return request

            request = await abandon("dead-1", "finished", turn_id)
            _, first, rest = await begin_turn(engine, inbound, request)
            replayed = [first, *[event async for event in rest]]
            assert [e.type for e in replayed] == ["start", "token", "end"]
            assert isinstance(replayed[0], StartEvent) and isinstance(replayed[-1], EndEvent)
            assert replayed[0].turn_id == turn_id
            assert replayed[-1].message_id == message_id
            assert len(model.requests) == calls  # not run again
            kept = await rows.get("alice", "dead-1")
            assert kept is not None and kept.status == "done"

            # Its turn never stored a reply: the retry runs it.
            never = "01890000-0000-7000-8000-0000000000ab"
            request = await abandon("dead-2", "again", never)
            again = InboundTurn("dead:a", Caller("alice"), "again")
            _, first, rest = await begin_turn(engine, again, request)
            fresh = [first, *[event async for event in rest]]
            assert isinstance(fresh[0], StartEvent) and fresh[-1].type == "end"
            assert fresh[0].turn_id != never
            assert len(model.requests) == calls + 1

            # Its turn stored the question and died before answering: the retry answers
            # that question, under the dead turn's id, instead of storing it a second time.
            asked = InboundTurn("dead:b", Caller("alice"), "what was stored")
            [
                event
                async for event in engine.turns.run_turn(InboundTurn("dead:b", asked.caller, "hi"))
            ]
            segment = await engine.store.latest_segment(asked.caller.key("dead:b"))
            dying = "01890000-0000-7000-8000-0000000000cd"
            await engine.sessions.append_message(
                asked.caller.key("dead:b"),
                segment.session_id,
                role=Role.USER,
                content=asked.content,
                now=START,
                metadata={"turn_id": dying},
            )
            request = await abandon("dead-3", asked.content, dying)
            _, first, rest = await begin_turn(engine, asked, request)
            answered = [first, *[event async for event in rest]]
            assert isinstance(answered[0], StartEvent) and answered[0].turn_id == dying
            assert answered[-1].type == "end"
            stored = await engine.store.list_messages(segment.session_id)
            assert [(m.role, m.content) for m in stored][-2:] == [
                (Role.USER, "what was stored"),
                (Role.ASSISTANT, "reply to: what was stored"),
            ]
            assert sum(m.content == "what was stored" for m in stored) == 1
            assert {m.metadata.get("turn_id") for m in stored[-2:]} == {dying}

            # Something came after the stored question: it is asked again (stored again).
            later = InboundTurn("dead:b", Caller("alice"), "asked twice")
            dead_again = "01890000-0000-7000-8000-0000000000ef"
            await engine.sessions.append_message(
                later.caller.key("dead:b"),
                segment.session_id,
                role=Role.USER,
                content=later.content,
                now=START,
                metadata={"turn_id": dead_again},
            )
            [
                event
                async for event in engine.turns.run_turn(InboundTurn("dead:b", later.caller, "x"))
            ]
            request = await abandon("dead-4", later.content, dead_again)
            _, first, rest = await begin_turn(engine, later, request)
            assert [first, *[event async for event in rest]][-1].type == "end"
            assert first.turn_id != dead_again  # type: ignore[union-attr]
            stored = await engine.store.list_messages(segment.session_id)
            assert sum(m.content == "asked twice" for m in stored) == 2
        finally:
            await engine.aclose()
