"""`sessiongate users list | revoke | rotate-key`: a rotated or revoked key is dead at
once, against a real gateway; the service answers alike on both stores."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from sessiongate.cli.main import app
from sessiongate.config import Settings
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.modes import UserNotFound
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

SESSIONGATE = [sys.executable, "-m", "sessiongate.cli.main"]


@pytest.fixture
async def engine(tmp_path: Path, database_url: str) -> AsyncIterator[Engine]:
    built = build_engine(
        Settings(data_dir=tmp_path, database={"url": database_url, "pool_size": 4}),
        models={"scripted": ScriptedModel()},
    )
    await built.start()
    yield built
    await built.aclose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_rotate_and_revoke_on_both_stores(engine: Engine) -> None:
    users = engine.users
    _, first = await users.add("ann", admin=True)
    second = await users.new_key("ann")
    _, other = await users.add("ben")
    assert [(u.name, n) for u, n in await users.list_with_keys()] == [("ann", 2), ("ben", 1)]

    new, revoked = await users.rotate_key("ann")
    assert revoked == 2 and new.startswith("sg_")
    assert await users.authenticate(first) is None and await users.authenticate(second) is None
    ann = await users.authenticate(new)
    assert ann is not None and ann.admin
    assert await users.authenticate(other) is not None  # nobody else's keys change

    assert await users.revoke("ann") == 1
    assert await users.authenticate(new) is None
    assert await users.revoke("ann") == 0
    assert [(u.name, n) for u, n in await users.list_with_keys()] == [("ann", 0), ("ben", 1)]
    again, revoked = await users.rotate_key("ann")  # a revoked user gets a key back
    assert revoked == 0 and await users.authenticate(again) is not None
    with pytest.raises(UserNotFound):
        await users.rotate_key("nobody")
    with pytest.raises(UserNotFound):
        await users.revoke("nobody")


def test_a_rotated_key_is_refused_by_the_running_gateway_at_once(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n', encoding="utf-8")
    with running_gateway(gateway_settings(tmp_path), {"scripted": ScriptedModel()}) as gw:
        old = gw.keys["alice"]

        def sessions(key: str) -> int:
            headers = {"Authorization": f"Bearer {key}"}
            return httpx.get(f"{gw.url}/v1/sessions", headers=headers, timeout=10).status_code

        assert sessions(old) == 200
        rotated = subprocess.run(
            [*SESSIONGATE, "users", "rotate-key", "alice", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
        )
        assert rotated.returncode == 0, rotated.stderr
        new = rotated.stdout.strip().splitlines()[-1]
        assert new.startswith("sg_") and " " not in new
        assert "revoked 1 old key(s) of alice" in rotated.stdout
        assert sessions(old) == 401  # immediately: no cache stands between
        assert sessions(new) == 200

        listed = CliRunner().invoke(app, ["users", "list", "--config", str(config)])
        assert listed.exit_code == 0, listed.output
        rows = [line.split("\t") for line in listed.output.splitlines()]
        assert rows[0] == ["name", "roles", "modes", "live keys"]
        assert ["alice", "user", "", "1"] in rows and ["root", "admin", "", "1"] in rows
        assert ["prime", "primary", "", "1"] in rows

        revoked = CliRunner().invoke(app, ["users", "revoke", "alice", "--config", str(config)])
        assert revoked.exit_code == 0 and "revoked 1 key(s) of alice" in revoked.output
        assert sessions(new) == 401
        assert sessions(gw.keys["bob"]) == 200

        unknown = CliRunner().invoke(app, ["users", "rotate-key", "zed", "--config", str(config)])
        assert unknown.exit_code == 1 and "no user 'zed'" in unknown.output
