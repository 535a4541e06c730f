"""Databases written before per-user key namespaces are moved by the migration (SQLite
0004, PostgreSQL 0002): each key becomes `owner/key`, chains, messages and rotations stay
linked, the guard triggers are back afterwards, and two users may then share a key name.

The old databases are built with the schema as it was (every migration before the
namespace one) and rows written in the old format, as the old store wrote them."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import RotationReason
from sessiongate.store import migrations
from sessiongate.store.base import Store
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.sqlite.store import SQLiteStore
from tests.support.pg import fresh_database

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
S1 = "01890000-0000-7000-8000-000000000001"
S2 = "01890000-0000-7000-8000-000000000002"
S3 = "01890000-0000-7000-8000-000000000003"


def _micros(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


def _before_namespaces(dialect: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the runner know only the migrations that came before namespaces."""
    known = migrations.load_migrations(dialect)
    older = [m for m in known if "key_namespaces" not in m.name]
    assert len(older) == len(known) - 1
    monkeypatch.setattr(migrations, "load_migrations", lambda _dialect: older)


# -- the old rows: alice's chat:alice with a manual rotation; prime's agent:main:main --------


def _old_sqlite(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    with monkeypatch.context() as patch:
        _before_namespaces("sqlite", patch)
        migrations.apply_sqlite_migrations(conn)
    t = [_micros(T0 + timedelta(minutes=n)) for n in range(6)]
    run = conn.execute
    run("BEGIN")
    run(
        "INSERT INTO segments (session_id, key, created_at, context_started_at,"
        " last_activity_at) VALUES (?, 'chat:alice', ?, ?, ?)",
        (S1, t[0], t[0], t[0]),
    )
    run(
        "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
        " VALUES ('chat:alice', 'alice', ?, ?)",
        (S1, t[0]),
    )
    run(
        "INSERT INTO segments (session_id, key, created_at, context_started_at,"
        " last_activity_at) VALUES (?, 'agent:main:main', ?, ?, ?)",
        (S3, t[0], t[0], t[0]),
    )
    run(
        "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
        " VALUES ('agent:main:main', 'prime', ?, ?)",
        (S3, t[0]),
    )
    run("COMMIT")
    for seq, (role, content) in enumerate([("user", "old otters"), ("assistant", "old reply")]):
        run(
            "INSERT INTO messages (segment_id, seq, role, content, status, created_at)"
            " VALUES (?, ?, ?, ?, 'complete', ?)",
            (S1, seq + 1, role, content, t[1]),
        )
    run(
        "UPDATE segments SET message_count = 2, last_activity_at = ? WHERE session_id = ?",
        (t[1], S1),
    )
    run("BEGIN")
    run("UPDATE segments SET archived_at = ? WHERE session_id = ?", (t[2], S1))
    run(
        "INSERT INTO segments (session_id, key, created_at, context_started_at,"
        " last_activity_at, parent_ids, created_reason)"
        " VALUES (?, 'chat:alice', ?, ?, ?, ?, 'manual')",
        (S2, t[2], t[2], t[2], f'["{S1}"]'),
    )
    run("UPDATE session_keys SET latest_session_id = ? WHERE key = 'chat:alice'", (S2,))
    run(
        "INSERT INTO rotations (key, from_session_id, to_session_id, reason, at)"
        " VALUES ('chat:alice', ?, ?, 'manual', ?)",
        (S1, S2, t[2]),
    )
    run("COMMIT")
    conn.close()


async def _old_postgres(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = await asyncpg.connect(url)
    try:
        with monkeypatch.context() as patch:
            _before_namespaces("postgres", patch)
            await migrations.apply_postgres_migrations(conn)
        t = [T0 + timedelta(minutes=n) for n in range(6)]
        async with conn.transaction():
            for sid, key, owner in ((S1, "chat:alice", "alice"), (S3, "agent:main:main", "prime")):
                await conn.execute(
                    "INSERT INTO segments (session_id, key, created_at, context_started_at,"
                    " last_activity_at) VALUES ($1, $2, $3, $3, $3)",
                    sid,
                    key,
                    t[0],
                )
                await conn.execute(
                    "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
                    " VALUES ($1, $2, $3, $4)",
                    key,
                    owner,
                    sid,
                    t[0],
                )
        for seq, (role, content) in enumerate([("user", "old otters"), ("assistant", "old reply")]):
            await conn.execute(
                "INSERT INTO messages (segment_id, seq, role, content, status, created_at)"
                " VALUES ($1, $2, $3, $4, 'complete', $5)",
                S1,
                seq + 1,
                role,
                content,
                t[1],
            )
        await conn.execute(
            "UPDATE segments SET message_count = 2, last_activity_at = $1 WHERE session_id = $2",
            t[1],
            S1,
        )
        async with conn.transaction():
            await conn.execute(
                "UPDATE segments SET archived_at = $1 WHERE session_id = $2", t[2], S1
            )
            await conn.execute(
                "INSERT INTO segments (session_id, key, created_at, context_started_at,"
                " last_activity_at, parent_ids, created_reason)"
                " VALUES ($1, 'chat:alice', $2, $2, $2, $3, 'manual')",
                S2,
                t[2],
                [S1],
            )
            await conn.execute(
                "UPDATE session_keys SET latest_session_id = $1 WHERE key = 'chat:alice'", S2
            )
            await conn.execute(
                "INSERT INTO rotations (key, from_session_id, to_session_id, reason, at)"
                " VALUES ('chat:alice', $1, $2, 'manual', $3)",
                S1,
                S2,
                t[2],
            )
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def migrated(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Store, str]]:
    """An old database, then the current store opened on it (which migrates it)."""
    if request.param == "sqlite":
        path = tmp_path / "old.db"
        _old_sqlite(path, monkeypatch)
        sqlite_store = SQLiteStore.open(path)
        yield sqlite_store, "sqlite"
        await sqlite_store.close()
        return
    async with fresh_database() as url:
        await _old_postgres(url, monkeypatch)
        pg_store = PostgresStore(url, pool_size=2)
        await pg_store.start()
        yield pg_store, "postgres"
        await pg_store.close()


async def test_old_keys_move_into_their_owners_namespace_with_chains_intact(
    migrated: tuple[Store, str],
) -> None:
    store, _ = migrated
    alice = KeyRef("alice", "chat:alice")
    record = await store.get_key(alice)
    assert record is not None and record.owner == "alice" and record.latest_session_id == S2
    assert await store.get_key(KeyRef("prime", "agent:main:main")) is not None
    # Nothing is left under the old, un-namespaced spelling or under another owner.
    assert await store.get_key(KeyRef("bob", "chat:alice")) is None
    chain = await store.chain(alice)
    assert [s.session_id for s in chain] == [S1, S2]
    assert all(s.key == alice for s in chain)
    assert chain[0].archived_at is not None and chain[1].parent_ids == (S1,)
    assert [(m.role.value, m.content) for m in await store.list_messages(S1)] == [
        ("user", "old otters"),
        ("assistant", "old reply"),
    ]
    (rotation,) = await store.rotations(alice)
    assert (rotation.key, rotation.reason) == (alice, RotationReason.MANUAL)
    assert (rotation.from_session_id, rotation.to_session_id) == (S1, S2)
    hits = await store.recall(alice, "otters", rationale="migrated", exclude_session_ids=(S2,))
    assert [h.content for h in hits] == ["old otters"]


async def test_after_the_migration_two_users_share_a_key_name_and_guards_hold(
    migrated: tuple[Store, str],
) -> None:
    store, dialect = migrated
    now = T0 + timedelta(days=1)
    bob = KeyRef("bob", "chat:alice")
    await store.create_key(bob, "01890000-0000-7000-8000-0000000000b0", now)
    assert (await store.get_key(bob)).owner == "bob"  # type: ignore[union-attr]
    assert len(await store.chain(KeyRef("alice", "chat:alice"))) == 2
    listed = {(k.owner, k.key) for k in await store.list_keys()}
    assert {("alice", "chat:alice"), ("bob", "chat:alice"), ("prime", "agent:main:main")} <= listed
    # The guard triggers the migration lifted are back: archived history is immutable.
    if dialect == "sqlite":
        assert isinstance(store, SQLiteStore)
        raw = sqlite3.connect(str(store.path))
        try:
            for sql in (
                f"UPDATE messages SET content = 'x' WHERE segment_id = '{S1}'",
                f"UPDATE segments SET key = 'mallory/chat:alice' WHERE session_id = '{S1}'",
                "UPDATE session_keys SET key = 'mallory/x' WHERE owner = 'alice'",
                "UPDATE rotations SET reason = 'idle'",
            ):
                with pytest.raises(sqlite3.DatabaseError):
                    raw.execute(sql)
        finally:
            raw.close()
    else:
        assert isinstance(store, PostgresStore)
        async with store.pool.acquire() as conn:
            for sql in (
                f"UPDATE messages SET content = 'x' WHERE segment_id = '{S1}'",
                f"UPDATE segments SET key = 'mallory/chat:alice' WHERE session_id = '{S1}'",
                "UPDATE session_keys SET key = 'mallory/x' WHERE owner = 'alice'",
                "UPDATE rotations SET reason = 'idle'",
            ):
                with pytest.raises(asyncpg.PostgresError):
                    await conn.execute(sql)
