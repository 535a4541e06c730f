"""Seed 001's app across gateway processes sharing one PostgreSQL database: a turn run by
one process reaches the sockets another process holds (LISTEN/NOTIFY, long replies cut
into pieces and put back together), a turn from REST too, and the reconnect that names
no key and the endpoint binding hold whichever process answers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict

from tests.support.pg import fresh_database
from tests.support.seed001 import PhoneSocket, phone
from tests.test_serve_workers import CLI, ROOT, free_port

pytestmark = pytest.mark.postgres
RELAY = Path(__file__).resolve().parent / "support" / "seed001_relay.py"


def write_config(directory: Path, database_url: str, port: int, workers: int = 1) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(directory / 'data'))}\n"
        f"[server]\nport = {port}\nworkers = {workers}\n"
        f'[database]\nurl = "{database_url}"\npool_size = 4\n'
        '[lifecycle]\ntimezone = "UTC"\n'
        "[models.relay]\n"
        f'provider = "command"\ncommand = {json.dumps([sys.executable, str(RELAY)])}\n'
        '[agents.defaults]\nmodel = "relay"\n',
        encoding="utf-8",
    )
    return config


@contextmanager
def serving(config: Path) -> Iterator[Path]:
    """`sessiongate serve`, its log in a file (read by the test, never a full pipe)."""
    log = config.parent / "serve.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            [*CLI, "serve", "--config", str(config)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        yield log
    except BaseException:
        # Shown by pytest with the failure: what the gateway said meanwhile.
        print(f"--- {log} ---\n{log.read_text(errors='replace')[-5000:]}")
        raise
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


async def started(log: Path, url: str, workers: int = 1) -> None:
    """Until `workers` worker processes have finished starting and /health answers."""
    deadline = time.monotonic() + 90
    async with httpx.AsyncClient(timeout=1) as client:
        while time.monotonic() < deadline:
            text = await asyncio.to_thread(log.read_text, errors="replace")
            if text.count("Application startup complete.") >= workers:
                try:
                    if (await client.get(f"{url}/health")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
            await asyncio.sleep(0.1)
    text = await asyncio.to_thread(log.read_text, errors="replace")
    pytest.fail(f"the gateway did not start:\n{text[-3000:]}")


async def add_user(config: Path, name: str) -> str:
    added = await asyncio.to_thread(
        subprocess.run,
        [*CLI, "users", "add", name, "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert added.returncode == 0, added.stderr
    return added.stdout.strip().splitlines()[-1]


async def assert_mirrors(watcher: PhoneSocket, sent_text: str, content: str, device: str) -> None:
    seen = await watcher.until_end(wait=20)
    user = seen.frames[0]
    assert seen.types[0] == "user_message", seen.types
    assert (user["content"], user["device_id"], user["transport"]) == (content, device, "claude")
    assert seen.end["type"] == "complete" and "frame" not in seen.end
    assert seen.text == sent_text
    assert {f["turn_id"] for f in seen.frames} == {user["turn_id"]}


async def test_a_turn_on_one_process_reaches_the_sockets_of_another(tmp_path: Path) -> None:
    async with fresh_database() as database_url:
        port_a = port_b = free_port()
        while port_b == port_a:
            port_b = free_port()
        config_a = write_config(tmp_path / "a", database_url, port_a)
        config_b = write_config(tmp_path / "b", database_url, port_b)
        key = await add_user(config_a, "alice")
        url_a, url_b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
        ws_a, ws_b = f"ws://127.0.0.1:{port_a}", f"ws://127.0.0.1:{port_b}"
        with serving(config_a) as log_a, serving(config_b) as log_b:
            await asyncio.gather(started(log_a, url_a), started(log_b, url_b))
            async with (
                phone(ws_b, key, query="?session_id=shared", device_id="ipad") as watcher,
                phone(ws_a, key, session_id="shared", device_id="iphone") as sender,
            ):
                sent = await sender.turn("hello across processes")
                assert sent.text == "reply to: hello across processes"
                assert "user_message" not in sent.types and sent.end["frame"] == 1
                await assert_mirrors(watcher, sent.text, "hello across processes", "iphone")

                # A reply far over NOTIFY's 8000 bytes arrives whole and in order.
                long = await sender.turn("long 40000")
                assert len(long.text) == 40000
                await assert_mirrors(watcher, long.text, "long 40000", "iphone")

                # The other way round: the socket on B speaks, A's socket hears it.
                back = await watcher.turn("from the tablet", session_id="shared")
                assert back.end["message_count"] == 6
                await assert_mirrors(sender, back.text, "from the tablet", "ipad")

                # A turn from REST on process A reaches the socket on process B.
                async with httpx.AsyncClient(base_url=url_a, timeout=30) as client:
                    response = await client.post(
                        "/v1/sessions/shared/messages",
                        json={"content": "typed on a laptop", "stream": False},
                        headers={"Authorization": f"Bearer {key}"},
                    )
                assert response.status_code == 200
                seen = await watcher.until_end(wait=20)
                assert seen.types == ["user_message", "message", "complete"]
                assert seen.frames[0]["content"] == "typed on a laptop"
                assert seen.text == "reply to: typed on a laptop"
                assert seen.end["message_count"] == 8
                assert seen.end["message_id"] == response.json()["message_id"]
                assert (await sender.until_end(wait=20)).end["message_count"] == 8

            # The last key was recorded by whichever process ran the turn.
            async with phone(ws_a, key) as again:
                assert again.ready["session_id"] == "shared"
                assert len(again.ready["history"]) == 8
            # `shared` was created through /api/claude/ws: Codex may not continue it.
            async with phone(ws_b, key, "codex") as codex:
                refused = await codex.turn("mine now?", session_id="shared")
                assert refused.types == ["error"] and refused.end["code"] == "wrong_endpoint"

            async with httpx.AsyncClient(base_url=url_b, timeout=30) as client:
                health = (await client.get("/api/health")).json()
            assert health["sessions"] == {"total": 1, "by_agent": {"claude": 1, "codex": 0}}


def sockets_per_worker(tmp: Path) -> dict[str, int]:
    """Open claude sockets per worker process, from the WebSocket gauge's files that
    `serve` keeps for /metrics (one per pid) in its temporary directory under `tmp`."""
    counts: dict[str, int] = {}
    for path in tmp.glob("sessiongate-metrics-*/gauge_livesum_*.db"):
        pid = path.stem.rsplit("_", 1)[1]
        values = MmapedDict.read_all_values_from_file(str(path))  # type: ignore[no-untyped-call]
        for key, value, *_ in values:
            _name, sample, labels, _help = json.loads(key)
            if sample == "sessiongate_websocket_connections" and labels["endpoint"] == "claude":
                counts[pid] = counts.get(pid, 0) + int(value)
    return counts


async def test_several_workers_every_socket_on_the_key_hears_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # where `serve` puts the metrics files
    async with fresh_database() as database_url:
        port = free_port()
        config = write_config(tmp_path, database_url, port, workers=2)
        key = await add_user(config, "alice")
        url, ws_url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"
        with serving(config) as log:
            await started(log, url, workers=2)
            async with AsyncExitStack() as stack:
                # Connections opened at once, in rounds, until the kernel has given both
                # workers some (one idle worker tends to win every accept in turn).
                watchers: list[PhoneSocket] = []
                while len(sockets_per_worker(scratch)) < 2:
                    assert len(watchers) < 96, f"one worker took all: {sockets_per_worker(scratch)}"
                    opening = [
                        stack.enter_async_context(
                            phone(ws_url, key, query="?session_id=crowd", device_id="watcher")
                        )
                        for _ in range(16)
                    ]
                    watchers.extend(await asyncio.gather(*opening))
                spread = sockets_per_worker(scratch)
                assert len(spread) == 2 and sum(spread.values()) == len(watchers)
                sender = await stack.enter_async_context(
                    phone(ws_url, key, session_id="crowd", device_id="sender")
                )
                sent = await sender.turn("one for everyone")
                for watcher in watchers:
                    await assert_mirrors(watcher, sent.text, "one for everyone", "sender")
                async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                    health = (await client.get("/api/health")).json()
                # Every worker's sockets, whichever worker answered.
                assert health["connections"] == {"claude": len(watchers) + 1, "codex": 0}
