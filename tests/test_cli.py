"""The command line, run as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SESSIONGATE = [sys.executable, "-m", "sessiongate.cli.main"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A wide terminal so rich does not wrap the lines the assertions look for.
    env = {**os.environ, "COLUMNS": "250"}
    env.pop("SESSIONGATE_CONFIG", None)
    return subprocess.run(
        [*SESSIONGATE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_demo_shows_every_rotation_and_recall(tmp_path: Path) -> None:
    result = run("demo", "--data-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for reason in ("manual", "idle", "semantic", "revert", "day_boundary"):
        assert f"rotation {reason}" in out
    assert "4812" in out and "the user asks for a code given earlier" in out
    assert (tmp_path / "demo.db").exists()


def test_sessions_export_and_import_round_trip(tmp_path: Path) -> None:
    assert run("demo", "--data-dir", str(tmp_path), cwd=tmp_path).returncode == 0
    config = tmp_path / "sg.toml"
    config.write_text(f'database.url = "sqlite:///{tmp_path / "demo.db"}"\n', encoding="utf-8")
    listed = run("sessions", "list", "--config", str(config), cwd=tmp_path)
    assert "agent:main:main" in listed.stdout
    exported = run("sessions", "export", "agent:main:main", "--config", str(config), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines()
    assert json.loads(lines[0])["key"] == "agent:main:main"

    other = tmp_path / "other.toml"
    other.write_text(f'database.url = "sqlite:///{tmp_path / "copy.db"}"\n', encoding="utf-8")
    dump = tmp_path / "chain.jsonl"
    dump.write_text(exported.stdout, encoding="utf-8")
    imported = run("sessions", "import", str(dump), "--config", str(other), cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    shown = run("sessions", "show", "agent:main:main", "--config", str(other), cwd=tmp_path)
    assert "day_boundary" in shown.stdout and "revert" in shown.stdout


def test_config_check_reports_bad_fields(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[lifecycle]\ntimezone = "Nowhere/Land"\n', encoding="utf-8")
    result = run("config", "check", "--config", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert "lifecycle.timezone" in result.stderr
    good = run("config", "check", cwd=tmp_path)
    assert good.returncode == 0 and "configuration is valid" in good.stdout
    assert '"idle_window": "12h"' in good.stdout  # durations shown as they are written


def test_unknown_key_is_a_clean_error(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n', encoding="utf-8")
    result = run("sessions", "show", "no:such:key", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 1
    assert "no session with key" in result.stderr and "Traceback" not in result.stderr


def test_users_add_prints_the_key_alone_on_the_last_line(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n', encoding="utf-8")
    result = run("users", "add", "carol", "--primary", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("sg_") and " " not in last
    again = run("users", "add", "carol", "--config", str(config), cwd=tmp_path)
    assert again.returncode == 1 and "already exists" in again.stderr
    second_primary = run("users", "add", "dave", "--primary", "--config", str(config), cwd=tmp_path)
    assert second_primary.returncode == 1 and "primary" in second_primary.stderr


def test_serve_bootstraps_an_admin_and_answers(tmp_path: Path) -> None:
    import socket
    import time

    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n[server]\nport = {port}\n', encoding="utf-8")
    env = {**os.environ, "COLUMNS": "250"}
    proc = subprocess.Popen(
        [*SESSIONGATE, "serve", "--config", str(config)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        key = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not key:
            line = proc.stdout.readline()
            if line.startswith("sg_"):
                key = line.strip()
        assert key, "serve did not print a bootstrap key"
        url = f"http://127.0.0.1:{port}"
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        reply = httpx.post(
            f"{url}/v1/chat",
            json={"content": "hello", "stream": False},
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        ).json()
        assert reply["session_key"] == "agent:main:main"
        assert "No model is configured" in reply["reply"]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert proc.returncode in (0, -15)


def test_sessions_list_never_cuts_keys_when_not_a_terminal(tmp_path: Path) -> None:
    import asyncio

    from sessiongate.config import Settings
    from sessiongate.service.engine import build_engine
    from sessiongate.service.sessions import Caller

    long_key = "project:" + "k" * 150

    async def make_key() -> None:
        engine = build_engine(Settings(data_dir=tmp_path))
        try:
            await engine.sessions.rotate_now(long_key, Caller("alice"))
        finally:
            await engine.aclose()

    asyncio.run(make_key())
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n', encoding="utf-8")
    env = {**os.environ, "COLUMNS": "40"}  # a narrow terminal width must not matter
    result = subprocess.run(
        [*SESSIONGATE, "sessions", "list", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split("\t")[:2] == ["key", "owner"]
    assert row.split("\t")[:2] == [long_key, "alice"]


def test_sessions_list_reads_every_page_and_filters_by_owner(tmp_path: Path) -> None:
    """The listing is paginated (at most 1000 keys a page): the command reads every page,
    so nothing past the first is silently left out."""
    import asyncio
    from datetime import UTC, datetime

    from sessiongate.config import Settings
    from sessiongate.core.keys import KeyRef
    from sessiongate.service.engine import build_engine

    async def make_keys() -> None:
        engine = build_engine(Settings(data_dir=tmp_path))
        try:
            now = datetime.now(UTC)
            for n in range(1001):
                await engine.store.create_key(
                    KeyRef("alice", f"k{n:04d}"), engine.sessions.ids.new(), now
                )
            for name in ("only-bob", "zz-last"):
                await engine.store.create_key(KeyRef("bob", name), engine.sessions.ids.new(), now)
        finally:
            await engine.aclose()

    asyncio.run(make_keys())
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path}"\n', encoding="utf-8")
    listed = run("sessions", "list", "--config", str(config), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("\t")[:2] for line in listed.stdout.splitlines()[1:]]
    assert len(rows) == 1003 and rows[-1] == ["zz-last", "bob"]
    bobs = run("sessions", "list", "--owner", "bob", "--config", str(config), cwd=tmp_path)
    assert [line.split("\t")[:2] for line in bobs.stdout.splitlines()[1:]] == [
        ["only-bob", "bob"],
        ["zz-last", "bob"],
    ]
    # A key named without --owner is found among every page's keys.
    shown = run("sessions", "show", "zz-last", "--config", str(config), cwd=tmp_path)
    assert shown.returncode == 0 and "owned by bob" in shown.stdout


def test_config_check_shows_the_resolved_database(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sessiongate.cli.main import app

    runner = CliRunner()
    pg = tmp_path / "pg.toml"
    pg.write_text(
        '[database]\nurl = "postgresql://sg:hunter2@db.internal:5433/gate"\n', encoding="utf-8"
    )
    shown = runner.invoke(app, ["config", "check", "--config", str(pg)])
    assert shown.exit_code == 0, shown.output
    assert "database: postgresql://sg@db.internal:5433/gate (PostgreSQL)" in shown.output
    assert "hunter2" not in shown.output
    lite = tmp_path / "lite.toml"
    lite.write_text(f'data_dir = "{tmp_path / "d"}"\n', encoding="utf-8")
    shown = runner.invoke(app, ["config", "check", "--config", str(lite)])
    assert f"database: sqlite:///{tmp_path / 'd' / 'sessiongate.db'} (SQLite)" in shown.output


def test_scripts_test_stops_only_the_postgres_it_started(tmp_path: Path) -> None:
    """scripts/test in a stand-in checkout whose tools only record what they were asked."""
    import re
    import shutil

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "scripts").mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    script = (root / "scripts" / "test").read_text(encoding="utf-8")
    shutil.copy(root / "scripts" / "test", tmp_path / "scripts" / "test")
    log = tmp_path / "calls.log"
    for name in set(re.findall(r"scripts/([\w.-]+\.sh)", script)):
        (tmp_path / "scripts" / name).write_text(f'echo "{name} $*" >> "{log}"\n')
    (tmp_path / "scripts" / "postgres.sh").write_text(
        f'echo "postgres.sh $*" >> "{log}"\n'
        'if [ "${1:-}" = running ]; then exit "$PG_RUNNING_EXIT"; fi\n'
        'echo "postgresql://stub@127.0.0.1:1/stub"\n'
    )
    for tool in ("ruff", "mypy", "pytest"):
        path = tmp_path / ".venv" / "bin" / tool
        path.write_text(
            '#!/bin/sh\nexit "${STUB_EXIT:-0}"\n' if tool == "pytest" else "#!/bin/sh\n"
        )
        path.chmod(0o755)

    def run_tests(running: int, pytest_exit: int = 0) -> tuple[int, list[str]]:
        log.write_text("")
        env = {**os.environ, "PG_RUNNING_EXIT": str(running), "STUB_EXIT": str(pytest_exit)}
        done = subprocess.run(
            ["bash", "scripts/test"], cwd=tmp_path, env=env, capture_output=True, timeout=60
        )
        calls = [c for c in log.read_text().splitlines() if c.startswith("postgres.sh")]
        return done.returncode, calls

    # Not running before: started for this run, stopped at its end, even when tests fail.
    assert run_tests(running=1) == (0, ["postgres.sh running", "postgres.sh ", "postgres.sh stop"])
    assert run_tests(running=1, pytest_exit=3) == (
        3,
        ["postgres.sh running", "postgres.sh ", "postgres.sh stop"],
    )
    # Already running (a developer's server, or .ci/run's): left running.
    assert run_tests(running=0) == (0, ["postgres.sh running", "postgres.sh "])
