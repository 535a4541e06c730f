"""Several `sessiongate serve` processes on one PostgreSQL database (each its own port and
data_dir), for tests of what must reach another process through the database. The users
are made once, with the first gateway's configuration.

The one place such a cluster is started: each test file says only what its gateways
serve."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.support.pg import fresh_database_sync
from tests.support.served import CLI, Served, add_user, free_port, serve_process, wait_healthy


@contextmanager
def served_cluster(
    directory: Path,
    config_text: str,
    users: Mapping[str, tuple[str, ...]],
    count: int = 2,
    database_url: str | None = None,
) -> Iterator[list[Served]]:
    """`count` gateways serving `config_text` (data_dir, port, database and timezone are
    added; the gateways' homes are `directory/gw<n>`) after creating `users` (name → CLI
    flags such as `--admin`) with the CLI. On `database_url` when given (a test that reads
    the database itself), else on a fresh database dropped afterwards."""
    with ExitStack() as stack:
        if database_url is None:
            database_url = stack.enter_context(fresh_database_sync())
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
        keys = {name: add_user(configs[0], name, *flags) for name, flags in users.items()}
        gateways = []
        for config, port in zip(configs, ports, strict=True):
            log = config.parent / "serve.log"
            proc = stack.enter_context(serve_process([*CLI, "serve", "--config", str(config)], log))
            gateways.append(Served(f"http://127.0.0.1:{port}", config, log, proc, keys))
        for served in gateways:
            wait_healthy(served)
        yield gateways
