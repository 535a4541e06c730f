"""Header size and count, slow headers and slow bodies (api/http_protocol.py), against a
real `sessiongate serve` process on loopback, spoken to with raw sockets.

The server runs with `header_timeout` and `body_timeout` of 1s and a `command` relay as its
model (one that answers "slowly" over 2.4s, longer than either timeout).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.support.gateway import parse_sse
from tests.support.pg import fresh_database
from tests.support.served import serve_process

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from sessiongate.cli.main import app; app()"]
MIB = 1024 * 1024
TIMEOUT = 1.0  # header_timeout and body_timeout of the server under test
#: How late a deadline may be noticed on a busy test machine.
MARGIN = 1.5

RELAY = """\
import json, sys, time
content = json.load(sys.stdin)["messages"][-1].get("content", "")
if "slowly" in content:
    for n in range(6):
        sys.stdout.write(f"word{n} ")
        sys.stdout.flush()
        time.sleep(0.4)
else:
    sys.stdout.write("ok")
"""


@dataclass
class Served:
    port: int
    key: str
    pid: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def error_code(self) -> str:
        assert self.headers.get("content-type") == "application/json", self.headers
        error = json.loads(self.body)["error"]
        assert isinstance(error["message"], str) and error["message"]
        return str(error["code"])


# -- the server -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(directory: Path, port: int, extra: str = "") -> Path:
    relay = directory / "relay.py"
    relay.write_text(RELAY, encoding="utf-8")
    config = directory / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(directory / 'data'))}\n"
        f"{extra}"
        f"[server]\nport = {port}\n"
        '[lifecycle]\ntimezone = "UTC"\n'
        "[models.relay]\n"
        f'provider = "command"\ncommand = {json.dumps([sys.executable, str(relay)])}\n'
        '[agents.defaults]\nmodel = "relay"\n'
        f'[limits]\nheader_timeout = "{TIMEOUT:g}s"\nbody_timeout = "{TIMEOUT:g}s"\n',
        encoding="utf-8",
    )
    return config


def add_user(config: Path) -> str:
    added = subprocess.run(
        [*CLI, "users", "add", "alice", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    return added.stdout.strip().splitlines()[-1]


@contextmanager
def serving(config: Path, log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    with serve_process([*CLI, "serve", "--config", str(config), *args], log) as proc:
        yield proc


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited early: {log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail("the gateway never answered /health")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("limits")
    port = free_port()
    config = write_config(directory, port)
    key = add_user(config)
    log = directory / "serve.log"
    with serving(config, log) as proc:
        wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        yield Served(port, key, proc.pid)


# -- raw HTTP ---------------------------------------------------------------------------


@asynccontextmanager
async def connection(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with suppress(ConnectionError):
            await writer.wait_closed()


async def read_response(reader: asyncio.StreamReader) -> Response:
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Response(int(status_line.split()[1]), headers, body)


async def exchange(port: int, request: bytes, within: float = 10) -> Response:
    async with connection(port) as (reader, writer):
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(read_response(reader), within)


async def closed_after(reader: asyncio.StreamReader, within: float) -> bytes:
    """Everything the server sends until it closes (fails if it does not within
    `within`)."""
    return await asyncio.wait_for(reader.read(), within)


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]
    return "\r\n".join(lines).encode()


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (its peak) of a process, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


async def still_serves(served: Served) -> None:
    response = await exchange(served.port, get("/health"))
    assert response.status == 200


# -- header size and count --------------------------------------------------------------


async def test_a_64_kib_header_gets_431_before_auth_and_the_server_serves_on(
    gateway: Served,
) -> None:
    started = time.monotonic()
    # /v1/sessions needs a key: 431 rather than 401 shows no handler or auth ran.
    response = await exchange(gateway.port, get("/v1/sessions", "X-Big: " + "a" * 65536))
    assert time.monotonic() - started < 2
    assert response.status == 431
    assert response.error_code() == "request_header_fields_too_large"
    assert response.headers["connection"] == "close"
    await still_serves(gateway)


async def test_headers_just_under_the_limit_are_served(gateway: Served) -> None:
    bearer = f"Authorization: Bearer {gateway.key}"
    response = await exchange(gateway.port, get("/v1/sessions", bearer, "X-Pad: " + "a" * 15000))
    assert response.status == 200, response.body


async def test_150_headers_get_431(gateway: Served) -> None:
    many = [f"X-H{n}: v" for n in range(150)]
    response = await exchange(gateway.port, get("/v1/sessions", *many))
    assert response.status == 431
    assert response.error_code() == "request_header_fields_too_large"
    assert "headers" in json.loads(response.body)["error"]["message"]
    await still_serves(gateway)


async def test_a_64_mib_header_is_refused_long_before_it_is_sent_without_growing_memory(
    gateway: Served,
) -> None:
    before = memory_kib(gateway.pid)
    total, piece = 64 * MIB, b"a" * 65536
    sent = 0
    async with connection(gateway.port) as (reader, writer):
        writer.write(b"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")

        async def send() -> None:
            nonlocal sent
            while sent < total:
                writer.write(piece)
                await writer.drain()
                sent += len(piece)
                await asyncio.sleep(0.001)  # ~1.2s for all of it, unless answered first

        sender = asyncio.create_task(send())
        started = time.monotonic()
        try:
            response = await asyncio.wait_for(read_response(reader), 60)
        finally:
            sent_when_answered = sent
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
    assert response.status == 431
    assert response.error_code() == "request_header_fields_too_large"
    assert time.monotonic() - started < 1
    assert sent_when_answered < 8 * MIB
    await still_serves(gateway)
    after = memory_kib(gateway.pid)
    assert after["VmRSS"] - before["VmRSS"] < 50 * 1024
    assert after["VmHWM"] - before["VmHWM"] < 50 * 1024


async def test_a_websocket_handshake_has_the_same_header_limits(gateway: Served) -> None:
    upgrade = [
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    ]
    accepted = await exchange(gateway.port, get("/v1/ws", *upgrade))
    assert accepted.status == 101  # the same request, within the limits, upgrades
    too_many = await exchange(
        gateway.port, get("/v1/ws", *upgrade, *(f"X-{n}: v" for n in range(150)))
    )
    assert too_many.status == 431
    assert too_many.error_code() == "request_header_fields_too_large"
    too_large = await exchange(gateway.port, get("/v1/ws", *upgrade, "X-Big: " + "a" * 65536))
    assert too_large.status == 431


# -- slow clients -----------------------------------------------------------------------


async def test_headers_trickled_byte_by_byte_get_408_after_header_timeout(
    gateway: Served,
) -> None:
    request = get("/health")
    async with connection(gateway.port) as (reader, writer):

        async def trickle() -> None:
            for byte in request:  # never complete within 1s: 0.3s a byte
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.3)

        sender = asyncio.create_task(trickle())
        started = time.monotonic()
        try:
            answer = await closed_after(reader, TIMEOUT + MARGIN)
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
    elapsed = time.monotonic() - started
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + MARGIN
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b'"code": "request_timeout"' in answer


async def test_a_connection_that_sends_nothing_is_closed_after_header_timeout(
    gateway: Served,
) -> None:
    async with connection(gateway.port) as (reader, _):
        started = time.monotonic()
        answer = await closed_after(reader, TIMEOUT + MARGIN)
    assert TIMEOUT * 0.9 <= time.monotonic() - started < TIMEOUT + MARGIN
    assert answer == b""  # nothing was asked, nothing is answered


async def test_a_body_that_stops_midway_gets_408_after_body_timeout(gateway: Served) -> None:
    head = (
        "POST /v1/sessions/limits:stalled/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {gateway.key}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n"
    ).encode()
    async with connection(gateway.port) as (reader, writer):
        writer.write(head + b'{"content": "hello", "pad": "' + b"a" * 100)
        await writer.drain()
        started = time.monotonic()
        answer = await closed_after(reader, TIMEOUT + MARGIN)
    assert TIMEOUT * 0.9 <= time.monotonic() - started < TIMEOUT + MARGIN
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b'"code": "request_timeout"' in answer
    await still_serves(gateway)


# -- normal requests are unaffected -----------------------------------------------------


async def test_a_slow_but_steady_body_is_served(gateway: Served) -> None:
    body = json.dumps({"content": "hello", "stream": False}).encode()
    head = (
        "POST /v1/sessions/limits:steady/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {gateway.key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    async with connection(gateway.port) as (reader, writer):
        writer.write(head)
        started = time.monotonic()
        for n in range(4):  # 2.4s in all, longer than body_timeout; no gap as long
            await asyncio.sleep(0.6)
            writer.write(body[n * len(body) // 4 : (n + 1) * len(body) // 4])
            await writer.drain()
        response = await asyncio.wait_for(read_response(reader), 10)
    assert time.monotonic() - started > 2 * TIMEOUT
    assert response.status == 200, response.body
    assert json.loads(response.body)["reply"] == "ok"


async def test_a_streamed_reply_longer_than_both_timeouts_is_not_cut(gateway: Served) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        started = time.monotonic()
        response = await client.post(
            "/v1/sessions/limits:sse/messages",
            json={"content": "answer slowly", "stream": True},
            headers={"Authorization": f"Bearer {gateway.key}"},
        )
        elapsed = time.monotonic() - started
        again = await client.get("/health")  # the same kept-alive connection, still good
    assert response.status_code == 200
    assert elapsed > 2 * TIMEOUT
    events = parse_sse(response.text)
    tokens = "".join(data["content"] for kind, data in events if kind == "token")
    assert tokens == "".join(f"word{n} " for n in range(6))
    assert events[-1][0] == "end" and events[-1][1]["status"] == "complete"
    assert again.status_code == 200


async def test_a_kept_alive_connection_may_idle_past_header_timeout(gateway: Served) -> None:
    async with connection(gateway.port) as (reader, writer):
        writer.write(get("/health"))
        assert (await asyncio.wait_for(read_response(reader), 5)).status == 200
        await asyncio.sleep(TIMEOUT * 1.5)  # idle: uvicorn's keep-alive (5s) governs
        writer.write(get("/health"))
        assert (await asyncio.wait_for(read_response(reader), 5)).status == 200
        # ...and its next request's headers have their own deadline.
        writer.write(b"GET /health HTTP/1.1\r\n")
        started = time.monotonic()
        answer = await closed_after(reader, TIMEOUT + MARGIN)
    assert TIMEOUT * 0.9 <= time.monotonic() - started < TIMEOUT + MARGIN
    assert answer.startswith(b"HTTP/1.1 408 ")


async def test_a_websocket_outlives_both_timeouts(gateway: Served) -> None:
    async with connect(f"ws://127.0.0.1:{gateway.port}/v1/ws", proxy=None) as ws:
        await ws.send(gateway.key)
        assert await asyncio.wait_for(ws.recv(), 5) == "authenticated"
        ready = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert ready["type"] == "ready"
        await asyncio.sleep(TIMEOUT * 2.2)
        await ws.send(json.dumps({"content": "hello"}))
        frames: list[dict[str, Any]] = []
        while not frames or frames[-1]["type"] not in ("complete", "error"):
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
    assert frames[-1]["type"] == "complete", frames
    assert "".join(f["content"] for f in frames if f["type"] == "message") == "ok"


# -- several workers --------------------------------------------------------------------


@pytest.mark.postgres
async def test_workers_apply_the_configured_limits(tmp_path: Path) -> None:
    """Each spawned worker gets the protocol by name and its limits from its own settings:
    a 1s header_timeout (the default is 10s) is honoured whichever worker answers."""
    async with fresh_database() as database_url:
        port = free_port()
        extra = f"[database]\nurl = {json.dumps(database_url)}\npool_size = 2\n"
        config = write_config(tmp_path, port, extra)
        log = tmp_path / "serve.log"
        with serving(config, log, "--workers", "2") as proc:
            await asyncio.to_thread(wait_healthy, f"http://127.0.0.1:{port}", proc, log)

            async def big_header() -> int:
                return (await exchange(port, get("/health", "X-Big: " + "a" * 65536))).status

            async def stalled() -> tuple[float, bytes]:
                async with connection(port) as (reader, writer):
                    writer.write(b"GET /health HTTP/1.1\r\n")
                    started = time.monotonic()
                    answer = await closed_after(reader, TIMEOUT + MARGIN)
                    return time.monotonic() - started, answer

            # Separate connections, so the kernel spreads them over both workers.
            statuses = await asyncio.gather(*(big_header() for _ in range(8)))
            stalls = await asyncio.gather(*(stalled() for _ in range(8)))
    assert statuses == [431] * 8
    for elapsed, answer in stalls:
        assert elapsed < TIMEOUT + MARGIN and answer.startswith(b"HTTP/1.1 408 ")
