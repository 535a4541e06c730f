"""`sessiongate serve` with several worker processes on one PostgreSQL database."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest

from sessiongate.config import load_settings
from sessiongate.errors import ConfigError
from tests.support.pg import fresh_database

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from sessiongate.cli.main import app; app()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: The Prometheus scraper's token (`server.metrics_token`): /metrics is not for every user.
SCRAPER = "scraper-token-for-tests"


def write_config(path: Path, database_url: str, port: int, workers: int) -> Path:
    path.write_text(
        f'data_dir = "{path.parent / "data"}"\n'
        f'[server]\nport = {port}\nworkers = {workers}\nmetrics_token = "{SCRAPER}"\n'
        f'[database]\nurl = "{database_url}"\npool_size = 4\n'
        '[lifecycle]\ntimezone = "UTC"\n',
        encoding="utf-8",
    )
    return path


@contextmanager
def serving(config: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [*CLI, "serve", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def wait_healthy(url: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited early: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail("the workers never answered /health")


def test_several_workers_need_postgresql(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text("[server]\nworkers = 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"server.workers = 2 needs database.url"):
        load_settings(config)
    result = subprocess.run(
        [*CLI, "serve", "--config", str(config)], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2 and "needs database.url" in result.stderr
    plain = tmp_path / "plain.toml"
    plain.write_text(f'data_dir = "{tmp_path}"\n', encoding="utf-8")
    flagged = subprocess.run(
        [*CLI, "serve", "--config", str(plain), "--workers", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert flagged.returncode == 2 and "server.workers = 3 needs database.url" in flagged.stderr


async def stored_roles(database_url: str, key: str) -> list[str]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT m.role FROM messages m JOIN session_keys k"
            " ON k.latest_session_id = m.segment_id WHERE k.key = $1 ORDER BY m.seq",
            key,
        )
    finally:
        await conn.close()
    return [str(r["role"]) for r in rows]


@pytest.mark.postgres
async def test_two_workers_serialise_one_key_and_share_metrics(tmp_path: Path) -> None:
    async with fresh_database() as database_url:
        port = free_port()
        config = write_config(tmp_path / "sg.toml", database_url, port, workers=2)
        added = await asyncio.to_thread(
            subprocess.run,
            [*CLI, "users", "add", "alice", "--config", str(config)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert added.returncode == 0, added.stderr
        api_key = added.stdout.strip().splitlines()[-1]
        url = f"http://127.0.0.1:{port}"
        with serving(config) as proc:
            await asyncio.to_thread(wait_healthy, url, proc)
            headers = {"Authorization": f"Bearer {api_key}"}
            # Separate connections, so the kernel spreads them over both workers.
            clients = [
                httpx.AsyncClient(base_url=url, headers=headers, timeout=30) for _ in range(12)
            ]
            try:

                async def turn(client: httpx.AsyncClient, key: str, n: int) -> int:
                    response = await client.post(
                        f"/v1/sessions/{key}/messages",
                        json={"content": f"message {n}", "stream": False},
                    )
                    return response.status_code

                shared = [turn(c, "shared:one", n) for n, c in enumerate(clients)]
                own = [turn(c, f"own:{n}", n) for n, c in enumerate(clients)]
                statuses = await asyncio.gather(*shared, *own)
                assert statuses == [200] * 24
                refused = await clients[0].get("/metrics")
                assert refused.status_code == 403  # alice is no admin and no scraper
                metrics = (
                    await clients[0].get("/metrics", headers={"Authorization": f"Bearer {SCRAPER}"})
                ).text
            finally:
                for client in clients:
                    await client.aclose()
        roles = await stored_roles(database_url, "alice/shared:one")
        # 12 turns from two processes on one key: never two user messages in a row.
        assert roles == ["user", "assistant"] * 12
        total = sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("sessiongate_turns_total{")
        )
        assert total == 24  # both workers' turns, whichever answered /metrics
