"""`sessiongate backup PATH` and `sessiongate restore PATH` against a SQLite gateway
under load: the copy is consistent and holds every message committed before it began;
restore refuses what it must."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from sessiongate.cli.main import app
from sessiongate.store.sqlite.backup import BackupError, backup_database, restore_database
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

Row = tuple[str, int, str]


def sessiongate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiongate.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )


def config_for(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "sg.toml"
    config.write_text(f'data_dir = "{folder}"\n', encoding="utf-8")
    return config


def messages(path: Path) -> set[Row]:
    conn = sqlite3.connect(path)
    try:
        return {
            (str(r[0]), int(r[1]), str(r[2]))
            for r in conn.execute("SELECT segment_id, seq, content FROM messages")
        }
    finally:
        conn.close()


def integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def test_backup_under_load_then_restore(tmp_path: Path) -> None:
    live = tmp_path / "live"
    config = config_for(live)
    copy = tmp_path / "copy.db"
    with running_gateway(gateway_settings(live), {"scripted": ScriptedModel()}) as gw:
        stop = threading.Event()
        failures: list[str] = []

        def load(worker: int) -> None:
            with httpx.Client(base_url=gw.url, headers=gw.auth("alice"), timeout=30) as client:
                turn = 0
                while not stop.is_set():
                    turn += 1
                    answer = client.post(
                        f"/v1/sessions/load:{worker}/messages",
                        json={"content": f"worker {worker} turn {turn}", "stream": False},
                    )
                    if answer.status_code != 200:
                        failures.append(answer.text)

        workers = [threading.Thread(target=load, args=(n,)) for n in range(4)]
        for worker in workers:
            worker.start()
        try:
            deadline = time.monotonic() + 20
            while len(messages(gw.sqlite_file)) < 80 and time.monotonic() < deadline:
                time.sleep(0.05)
            committed = messages(gw.sqlite_file)  # committed before the backup begins
            assert len(committed) >= 80
            result = sessiongate("backup", str(copy), "--config", str(config))
            assert result.returncode == 0, result.stderr
            assert "backed up" in result.stdout
            during = len(messages(gw.sqlite_file))
            # The gateway's own database is in use: restoring over it needs --force.
            refused = CliRunner().invoke(app, ["restore", str(copy), "--config", str(config)])
            assert refused.exit_code == 1 and "in use" in refused.stderr
        finally:
            stop.set()
            for worker in workers:
                worker.join()
        assert not failures
        assert during > len(committed)  # the turns kept running while the copy was made

    assert integrity(copy) == "ok"
    copied = messages(copy)
    assert committed <= copied
    assert copy.stat().st_mode & 0o077 == 0
    assert not Path(f"{copy}-wal").exists()  # one self-contained file

    restored_config = config_for(tmp_path / "restored")
    restored = CliRunner().invoke(app, ["restore", str(copy), "--config", str(restored_config)])
    assert restored.exit_code == 0, restored.output
    target = tmp_path / "restored" / "sessiongate.db"
    assert messages(target) == copied and integrity(target) == "ok"
    again = CliRunner().invoke(app, ["restore", str(copy), "--config", str(restored_config)])
    assert again.exit_code == 1 and "already holds data" in again.stderr
    forced = CliRunner().invoke(
        app, ["restore", str(copy), "--config", str(restored_config), "--force"]
    )
    assert forced.exit_code == 0, forced.output
    assert messages(target) == copied


def test_restore_checks_the_backup_first(tmp_path: Path) -> None:
    target = tmp_path / "data" / "sessiongate.db"
    stranger = tmp_path / "other.db"
    sqlite3.connect(stranger).execute("CREATE TABLE notes (x)").connection.close()
    with pytest.raises(BackupError, match="not a sessiongate database"):
        restore_database(stranger, target)
    with pytest.raises(BackupError, match="does not exist"):
        restore_database(tmp_path / "missing.db", target)

    # A backup of a newer sessiongate (a migration this version does not know).
    config = config_for(tmp_path / "source")
    assert CliRunner().invoke(app, ["users", "add", "ann", "--config", str(config)]).exit_code == 0
    newer = tmp_path / "newer.db"
    backup_database(tmp_path / "source" / "sessiongate.db", newer)
    conn = sqlite3.connect(newer)
    conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', 'x', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(BackupError, match="newer than this sessiongate"):
        restore_database(newer, target)
    with pytest.raises(BackupError, match="exists"):
        backup_database(tmp_path / "source" / "sessiongate.db", newer)
    assert not target.exists() or messages(target) == set()


def test_postgres_is_refused_with_a_pointer_to_pg_dump(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text('[database]\nurl = "postgresql://sg@127.0.0.1:1/sg"\n', encoding="utf-8")
    for command in (["backup", str(tmp_path / "b.db")], ["restore", str(tmp_path / "b.db")]):
        result = CliRunner().invoke(app, [*command, "--config", str(config)])
        assert result.exit_code == 2
        assert "pg_dump" in result.output
