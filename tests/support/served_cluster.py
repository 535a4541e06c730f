"""Several `sessiongate serve` processes on one fresh PostgreSQL database (each its own
port and data_dir), for tests of what must reach another process through the database.
The users are made once, with the first gateway's configuration."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import asyncpg

from tests.support.pg import _drop, server_url, with_database
from tests.support.served import CLI, Served, add_user, free_port, serve_process, wait_healthy


@contextmanager
def fresh_database_sync(prefix: str = "sg_test_cluster_") -> Iterator[str]:
    """An empty database of its own for a synchronous test (dropped afterwards)."""
    server = server_url()
    name = f"{prefix}{uuid.uuid4().hex[:12]}"

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
        asyncio.run(_drop(server, name))


@contextmanager
def served_cluster(
    directory: Path, config_text: str, users: tuple[str, ...], count: int = 2
) -> Iterator[list[Served]]:
    """`count` gateways serving `config_text` on one fresh database."""
    with fresh_database_sync() as database_url, ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            port = free_port()
            if port not in ports:
                ports.append(port)
        configs = []
        for n, port in enumerate(ports):
            home = directory / f"gw{n}"
            home.mkdir(parents=True, exist_ok=True)
            config = home / "sg.toml"
            config.write_text(
                f"data_dir = {json.dumps(str(home / 'data'))}\n"
                f"{config_text}\n"
                f"[server]\nport = {port}\n"
                f"[database]\nurl = {json.dumps(database_url)}\npool_size = 4\n"
                '[lifecycle]\ntimezone = "UTC"\n',
                encoding="utf-8",
            )
            configs.append(config)
        keys = {name: add_user(configs[0], name) for name in users}
        gateways = []
        for config, port in zip(configs, ports, strict=True):
            log = config.parent / "serve.log"
            proc = stack.enter_context(serve_process([*CLI, "serve", "--config", str(config)], log))
            gateways.append(Served(f"http://127.0.0.1:{port}", config, log, proc, keys))
        for served in gateways:
            wait_healthy(served)
        yield gateways
