"""`sessiongate migrate --to postgresql://…` (issue 23): a SQLite gateway's database, filled
through the real gateway, copied into an empty PostgreSQL database with every table's
count and checksum verified; a database that is not empty refused; the copy then served
by two `sessiongate serve` processes, each reading the old chains and seeing what the
other writes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from sessiongate.cli.main import app
from sessiongate.service.migrate import ChecksumMismatch, migrate
from tests.support.gateway import gateway_settings, run_sync, running_gateway
from tests.support.helpers import ScriptedModel
from tests.support.pg import fresh_database_sync
from tests.support.served import CLI, Served, free_port, relay_model, serve_process, wait_healthy

pytestmark = pytest.mark.postgres  # every test here migrates into the test server

#: Tables the filled database must hold rows in (the copy is checked for each).
FILLED = (
    "users",
    "api_keys",
    "session_keys",
    "segments",
    "messages",
    "rotations",
    "notes",
    "note_chunks",
    "notes_versions",
    "tasks",
    "artifacts",
    "idempotency_keys",
    "conversation_nodes",
    "conversation_heads",
    "compactions",
    "artifact_chunks",
    "quota_counters",
    "memory_items",
    "memory_vectors",
    "memory_tombstones",
)


@dataclass(frozen=True)
class Filled:
    database: Path
    data_dir: Path
    keys: dict[str, str]
    #: (user, key) → the key's export as the SQLite gateway gave it
    exports: dict[tuple[str, str], str]


def turn(client: httpx.Client, key: str, text: str, **headers: str) -> None:
    answer = client.post(
        f"/v1/sessions/{key}/messages", json={"content": text, "stream": False}, headers=headers
    )
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    data = tmp_path_factory.mktemp("sqlite")
    settings = gateway_settings(
        data,
        notes={"embeddings": "builtin"},  # the chunks get vectors (float32 blobs)
        artifacts={"store": "database"},  # artifact bytes as chunk rows (bytea there)
        quotas={"requests_per_minute": 1000},  # a counter row per user and minute
        models={"scripted": {"provider": "command", "command": ["true"], "context_window": 2000}},
    )
    with running_gateway(settings, {"scripted": ScriptedModel()}) as gw:
        alice = httpx.Client(base_url=gw.url, headers=gw.auth("alice"), timeout=30)
        bob = httpx.Client(base_url=gw.url, headers=gw.auth("bob"), timeout=30)
        turn(alice, "chain", "first, with an idempotency key", **{"Idempotency-Key": "idem-1"})
        turn(alice, "chain", "second")
        for n in range(3):  # three rotations: three archived segments, then the latest
            assert alice.post("/v1/sessions/chain/new").status_code == 200
            turn(alice, "chain", f"after rotation {n}")
        turn(alice, "other", "another key")
        assert alice.post("/v1/sessions/other/new").status_code == 200
        turn(bob, "bobs", "bob's own key")
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        }
        tools = [{"type": "function", "function": {"name": "weather", "parameters": {}}}]
        question = {"role": "user", "content": "weather in Paris?"}
        result = {"role": "tool", "tool_call_id": "call_w", "content": "sunny"}
        for messages in ([question], [question, call, result]):
            answer = alice.post(
                "/v1/chat/completions",
                json={"model": "main", "messages": messages, "tools": tools},
                headers={"X-Session-Key": "tools"},
            )
            assert answer.status_code == 200, answer.text
        for n in range(8):  # a thread long enough to compact: a compaction record
            turn(alice, "long", f"turn {n} " + "words " * 60)
        compacted = alice.post("/v1/sessions/long/compact", json={})
        assert compacted.status_code == 200, compacted.text
        note = {"content": "The boiler is serviced in May.\n\nKeep the receipt.", "title": "home"}
        assert alice.post("/v1/notes", json=note).status_code == 201
        task = {"title": "book the boiler service", "due": "2026-05-01"}
        assert alice.post("/v1/tasks", json=task).status_code == 201
        # Memory: a pinned item, one superseded by an edit (its history), one forgotten
        # (a tombstone); with the builtin embeddings each kept item has a vector.
        kept = alice.post("/v1/memory", json={"text": "Prefers tea", "pinned": True})
        assert kept.status_code == 201, kept.text
        edited = alice.post("/v1/memory", json={"text": "Lives in Lyon"}).json()["id"]
        assert alice.patch(f"/v1/memory/{edited}", json={"text": "Lives in Nantes"}).is_success
        gone = alice.post("/v1/memory", json={"text": "Owns a kayak"}).json()["id"]
        assert alice.delete(f"/v1/memory/{gone}").status_code == 204
        assert gw.engine.artifacts is not None
        run_sync(gw.engine.artifacts.save("alice", b"\x89PNG fake", "image/png", key="chain"))
        # Three chunks (256 KiB, 256 KiB, the rest): copied a few rows at a time.
        large = bytes(range(256)) * 2600
        run_sync(gw.engine.artifacts.save("alice", large, "application/octet-stream"))
        exports = {
            (user, key): client.get(f"/v1/sessions/{key}/export").text
            for user, client, key in (
                ("alice", alice, "chain"),
                ("alice", alice, "other"),
                ("alice", alice, "tools"),
                ("alice", alice, "long"),
                ("bob", bob, "bobs"),
            )
        }
        alice.close()
        bob.close()
        # The documented path: a backup made while the gateway serves, then migrated.
        backup = data / "backup.db"
        made = subprocess.run(
            [*CLI, "backup", str(backup), "--config", str(config_for(data))],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        with httpx.Client(base_url=gw.url, headers=gw.auth("bob"), timeout=30) as late:
            turn(late, "late", "written after the backup")
    return Filled(backup, data, dict(gw.keys), exports)


def config_for(data: Path) -> Path:
    config = data / "sg.toml"
    config.write_text(f"data_dir = {json.dumps(str(data))}\n", encoding="utf-8")
    return config


def test_migrate_copies_every_table_and_verifies_it(filled: Filled) -> None:
    with fresh_database_sync() as url:
        result = CliRunner().invoke(app, ["migrate", "--to", url, "--from", str(filled.database)])
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        table = {line.split("\t")[0]: line.split("\t") for line in lines[1:] if "\t" in line}
        for name in FILLED:
            assert table[name][3] == "yes" and int(table[name][1]) > 0, (name, table.get(name))
        assert "copied messages:" in result.stderr  # plain progress lines off a terminal
        assert "every table's row count and checksum agree" in result.stdout

        async def inspect() -> tuple[int, int, int, int]:
            pg = await asyncpg.connect(url)
            try:
                indexed = await pg.fetchval("SELECT count(*) FROM message_search")
                archived = await pg.fetchval(
                    "SELECT count(*) FROM messages m JOIN segments s"
                    " ON s.session_id = m.segment_id WHERE s.archived_at IS NOT NULL"
                )
                vectors = await pg.fetchval(
                    "SELECT count(*) FROM note_chunks WHERE length(embedding) > 0"
                )
                assert vectors > 0
                top = await pg.fetchval("SELECT max(id) FROM messages")
                next_id = await pg.fetchval(
                    "SELECT nextval(pg_get_serial_sequence('messages', 'id'))"
                )
                return indexed, archived, top, next_id
            finally:
                await pg.close()

        indexed, archived, top, next_id = asyncio.run(inspect())
        assert indexed == archived > 0  # the archive trigger indexed the archived segments
        assert next_id > top  # new messages get new ids


def test_a_target_that_is_not_empty_is_refused(filled: Filled) -> None:
    with fresh_database_sync() as url:
        # The configured database itself (no --from): the gateway's file, `late` included.
        config = str(config_for(filled.data_dir))
        first = CliRunner().invoke(app, ["migrate", "--to", url, "--config", config])
        assert first.exit_code == 0, first.output
        with closing(sqlite3.connect(filled.database)) as backup:
            in_backup = backup.execute("SELECT count(*) FROM session_keys").fetchone()[0]
        assert f"\nsession_keys\t{in_backup + 1}\t" in first.stdout  # `late` is not in it
        again = CliRunner().invoke(app, ["migrate", "--to", url, "--from", str(filled.database)])
        assert again.exit_code == 3
        assert "not empty" in again.stderr and "schema_migrations" in again.stderr
        not_postgres = CliRunner().invoke(app, ["migrate", "--to", "sqlite:///x.db"])
        assert not_postgres.exit_code == 2 and "PostgreSQL URL" in not_postgres.stderr


def test_a_copy_that_differs_is_not_committed(
    filled: Filled, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversion that loses something shows in the checksum, and nothing stays."""
    import sessiongate.service.migrate_chain as chain
    from sessiongate.store.migration_rows import to_postgres as real

    monkeypatch.setattr(
        chain,
        "to_postgres",
        lambda kind, value: (
            (value + "!") if kind == "text" and value == "second" else real(kind, value)
        ),
    )
    with fresh_database_sync() as url:
        with pytest.raises(ChecksumMismatch, match="messages"):
            asyncio.run(migrate(filled.database, url))

        async def left() -> bool:
            pg = await asyncpg.connect(url)
            try:
                return bool(await pg.fetchval("SELECT to_regclass('schema_migrations') IS NULL"))
            finally:
                await pg.close()

        assert asyncio.run(left())  # rolled back: the target is as empty as it was


def test_two_gateways_serve_the_migrated_database(filled: Filled, tmp_path: Path) -> None:
    with fresh_database_sync() as url:
        result = CliRunner().invoke(app, ["migrate", "--to", url, "--from", str(filled.database)])
        assert result.exit_code == 0, result.output
        with (
            serving(tmp_path / "one", url, filled) as one,
            serving(tmp_path / "two", url, filled) as two,
        ):
            for gateway in (one, two):
                for (user, key), export in filled.exports.items():
                    got = gateway.client(user).get(f"/v1/sessions/{key}/export")
                    assert got.status_code == 200 and got.text == export, (gateway.url, key)
            turn(one.client("alice"), "chain", "continued on gateway one")
            rotated = two.client("bob").post("/v1/sessions/bobs/new")  # a new rotation id
            assert rotated.status_code == 200, rotated.text
            turn(two.client("bob"), "bobs", "after the move")
            bobs = one.client("bob").get("/v1/sessions/bobs/export").text
            assert "after the move" in bobs and bobs.startswith(
                filled.exports[("bob", "bobs")][:40]
            )
            latest = two.client("alice").get("/v1/sessions/chain").json()["latest"]["session_id"]
            page = two.client("alice").get(f"/v1/sessions/chain/segments/{latest}/messages")
            assert page.status_code == 200, page.text
            contents = json.dumps(page.json())
            assert "continued on gateway one" in contents


@contextmanager
def serving(directory: Path, url: str, filled: Filled) -> Iterator[Served]:
    directory.mkdir()
    port = free_port()
    config = directory / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(filled.data_dir))}\n"
        f"{relay_model(directory, 'scripted')}"
        '[agents.defaults]\nmodel = "scripted"\n'
        f"[database]\nurl = {json.dumps(url)}\npool_size = 3\n"
        f"[server]\nport = {port}\n"
        '[lifecycle]\ntimezone = "UTC"\n',
        encoding="utf-8",
    )
    log = directory / "serve.log"
    with serve_process([*CLI, "serve", "--config", str(config)], log) as proc:
        served = Served(f"http://127.0.0.1:{port}", config, log, proc, filled.keys)
        wait_healthy(served)
        yield served


def test_a_terminal_gets_a_progress_bar(filled: Filled, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    import sessiongate.cli.migrate as command

    screen = io.StringIO()
    monkeypatch.setattr(command, "console", Console(file=io.StringIO(), force_terminal=True))
    monkeypatch.setattr(command, "errors", Console(file=screen, force_terminal=True, width=100))
    with fresh_database_sync() as url:
        result = CliRunner().invoke(app, ["migrate", "--to", url, "--from", str(filled.database)])
        assert result.exit_code == 0, result.output
    drawn = screen.getvalue()
    assert "━" in drawn and "messages" in drawn  # rich's bar, one per table
    assert "copied messages" not in result.stderr  # the plain lines are for pipes only


def copy_of(filled: Filled, directory: Path) -> Path:
    copy = directory / "copy.db"
    copy.write_bytes(filled.database.read_bytes())
    return copy


def test_a_table_a_new_migration_adds_is_copied_too(
    filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables are found in the schema when migrate runs: one added on both sides (here
    by a PostgreSQL migration this test adds) is copied, converted and verified."""
    from sessiongate.store import migrations

    source = copy_of(filled, tmp_path)
    with closing(sqlite3.connect(source)) as db, db:
        db.execute("CREATE TABLE extra (id INTEGER PRIMARY KEY, at INTEGER, flag INTEGER)")
        db.executemany(
            "INSERT INTO extra VALUES (?, ?, ?)", [(1, 1_780_000_000_000_001, 1), (2, None, 0)]
        )
    real = migrations.load_migrations

    def with_extra(dialect: str) -> list[migrations.Migration]:
        known = real(dialect)
        if dialect == "postgres":
            sql = "CREATE TABLE extra (id BIGINT PRIMARY KEY, at TIMESTAMPTZ, flag BOOLEAN);"
            known.append(migrations.Migration(len(known) + 1, "extra", sql))
        return known

    monkeypatch.setattr(migrations, "load_migrations", with_extra)
    with fresh_database_sync() as url:
        report = asyncio.run(migrate(source, url))
        extra = next(t for t in report.tables if t.name == "extra")
        assert extra.source_rows == extra.target_rows == 2 and extra.matches

        async def rows() -> list[tuple[object, ...]]:
            pg = await asyncpg.connect(url)
            try:
                return [tuple(r) for r in await pg.fetch("SELECT flag FROM extra ORDER BY id")]
            finally:
                await pg.close()

        assert asyncio.run(rows()) == [(True,), (False,)]


def test_a_table_postgresql_lacks_or_an_older_source_is_refused(
    filled: Filled, tmp_path: Path
) -> None:
    (tmp_path / "mystery").mkdir()
    mystery = copy_of(filled, tmp_path / "mystery")
    with closing(sqlite3.connect(mystery)) as db, db:
        db.execute("CREATE TABLE mystery (id INTEGER PRIMARY KEY)")
    older = copy_of(filled, tmp_path)
    with closing(sqlite3.connect(older)) as db, db:
        db.execute(
            "DELETE FROM schema_migrations"
            " WHERE version = (SELECT max(version) FROM schema_migrations)"
        )
    with fresh_database_sync() as url:
        lacking = CliRunner().invoke(app, ["migrate", "--to", url, "--from", str(mystery)])
        assert lacking.exit_code == 1 and "mystery" in lacking.stderr
        behind = CliRunner().invoke(app, ["migrate", "--to", url, "--from", str(older)])
        assert behind.exit_code == 1 and "older than this sessiongate" in behind.stderr
        # Neither left anything behind: the target still takes a migration.
        taken = CliRunner().invoke(app, ["migrate", "--to", url, "--from", str(filled.database)])
        assert taken.exit_code == 0, taken.output
