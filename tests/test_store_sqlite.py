"""The SQLite adapter itself: migrations, WAL, raw-SQL guards, the FTS5 index. What every
store must do is in test_store_contract.py, run on SQLite and PostgreSQL alike."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.ids import IdGenerator, is_session_id
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role, RotationReason
from sessiongate.errors import MigrationError
from sessiongate.store.migrations import apply_sqlite_migrations, load_migrations
from sessiongate.store.sqlite.store import SQLiteStore

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
K = KeyRef("alice", "k")


@pytest.fixture
def ids() -> IdGenerator:
    return IdGenerator(ManualClock(NOW))


async def test_open_uses_wal_and_records_schema_version(tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "a.db")
    db = store.connection
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    versions = [r[0] for r in db.execute("SELECT version FROM schema_migrations")]
    # Every shipped migration, once, in order, numbered from 1 without a gap.
    assert versions == list(range(1, len(load_migrations("sqlite")) + 1))
    assert len(versions) >= 5
    await store.close()
    reopened = SQLiteStore.open(tmp_path / "a.db")  # idempotent
    again = [r[0] for r in reopened.connection.execute("SELECT version FROM schema_migrations")]
    assert again == versions
    await reopened.close()


def test_edited_migration_is_detected(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
    apply_sqlite_migrations(db)
    db.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
    with pytest.raises(MigrationError, match="changed after"):
        apply_sqlite_migrations(db)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    apply_sqlite_migrations(db)
    db.execute("INSERT INTO schema_migrations VALUES (99, 'future', 'x', 0)")
    with pytest.raises(MigrationError, match="newer"):
        apply_sqlite_migrations(db)


async def test_time_sortable_ids_stay_ordered_within_a_millisecond(ids: IdGenerator) -> None:
    made = [ids.new() for _ in range(5000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert all(is_session_id(i) for i in made[:10])


async def test_key_pointer_cannot_be_doubled_or_dropped(tmp_path: Path, ids: IdGenerator) -> None:
    store = SQLiteStore.open(tmp_path / "d.db")
    _, s1 = await store.create_key(K, ids.new(), NOW)
    raw = sqlite3.connect(store.path)
    for sql in (
        "UPDATE session_keys SET latest_session_id = NULL",
        "DELETE FROM session_keys",
        "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
        f" VALUES ('bob/k2', 'bob', '{s1.session_id}', 0)",
        "UPDATE session_keys SET owner = 'mallory'",
        # Nor moved into another namespace (the stored key is `owner/name`).
        "UPDATE session_keys SET key = 'mallory/k'",
    ):
        with pytest.raises(sqlite3.DatabaseError):
            raw.execute(sql)
        raw.rollback()
    raw.close()
    assert (await store.latest_segment(K)).session_id == s1.session_id
    await store.close()


async def test_erasure_leaves_no_rows_and_a_sound_file(tmp_path: Path, ids: IdGenerator) -> None:
    store = SQLiteStore.open(tmp_path / "e.db")
    a, b = KeyRef("alice", "a"), KeyRef("alice", "b")
    for key in (a, b):
        _, seg = await store.create_key(key, ids.new(), NOW)
        from sessiongate.core.segments import Role

        await store.append_message(
            seg.session_id, role=Role.USER, content=f"hi {key.name}", now=NOW
        )
        await store.rotate(
            key,
            expected_latest=seg.session_id,
            new_session_id=ids.new(),
            reason=RotationReason.MANUAL,
            now=NOW,
        )
    await store.delete_key(a)
    db = store.connection
    # Stored keys are `owner/name`: the counts below must look at the form the rows hold.
    for table in ("segments", "rotations"):
        count = f"SELECT COUNT(*) FROM {table} WHERE key = ?"
        assert db.execute(count, (b.storage_id,)).fetchone()[0] > 0
        assert db.execute(count, (a.storage_id,)).fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM erasures").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    await store.close()


async def test_full_text_index_follows_archiving_and_erasure(
    tmp_path: Path, ids: IdGenerator
) -> None:
    from sessiongate.core.segments import Role

    store = SQLiteStore.open(tmp_path / "g.db")
    db = store.connection
    _, s1 = await store.create_key(K, ids.new(), NOW)
    await store.append_message(s1.session_id, role=Role.USER, content="heron facts", now=NOW)
    indexed = "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'heron'"
    assert db.execute(indexed).fetchone()[0] == 0  # latest: not indexed yet
    await store.rotate(
        K,
        expected_latest=s1.session_id,
        new_session_id=ids.new(),
        reason=RotationReason.MANUAL,
        now=NOW,
    )
    assert db.execute(indexed).fetchone()[0] == 1  # archived: searchable
    latest = await store.latest_segment(K)
    await store.append_message(latest.session_id, role=Role.USER, content="heron", now=NOW)
    db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    await store.delete_key(K)
    assert db.execute(indexed).fetchone()[0] == 0
    db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")
    await store.close()


def test_migration_3_unindexes_latest_segments_of_an_existing_database(tmp_path: Path) -> None:
    from sessiongate.store import migrations

    db = sqlite3.connect(tmp_path / "h.db", isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    all_known = migrations.load_migrations("sqlite")
    original = migrations.load_migrations
    migrations.load_migrations = lambda dialect: all_known[:2]
    try:
        migrations.apply_sqlite_migrations(db)
    finally:
        migrations.load_migrations = original
    db.execute("BEGIN")
    db.execute(
        "INSERT INTO segments (session_id, key, created_at, context_started_at,"
        " last_activity_at) VALUES ('s1', 'k', 0, 0, 0)"
    )
    db.execute(
        "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
        " VALUES ('k', 'a', 's1', 0)"
    )
    db.execute(
        "INSERT INTO messages (segment_id, seq, role, content, status, created_at)"
        " VALUES ('s1', 1, 'user', 'pelican', 'complete', 0)"
    )
    db.execute("COMMIT")
    match = "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'pelican'"
    assert db.execute(match).fetchone()[0] == 1  # v2 indexed on append
    migrations.apply_sqlite_migrations(db)
    assert db.execute(match).fetchone()[0] == 0
    db.execute("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')")


async def test_migration_4_moves_existing_keys_into_their_owners_namespace(
    tmp_path: Path,
) -> None:
    from sessiongate.store import migrations

    path = tmp_path / "ns.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    all_known = migrations.load_migrations("sqlite")
    original = migrations.load_migrations
    migrations.load_migrations = lambda dialect: all_known[:3]
    try:
        migrations.apply_sqlite_migrations(db)
    finally:
        migrations.load_migrations = original
    # A v3 chain under the bare name: s1 (archived, one message) -> s2 (latest).
    db.execute("BEGIN")
    for sid in ("s1", "s2"):
        if sid == "s2":
            db.execute("UPDATE segments SET archived_at = 1 WHERE session_id = 's1'")
        db.execute(
            "INSERT INTO segments (session_id, key, created_at, parent_ids,"
            " context_started_at, last_activity_at) VALUES (?, 'k', 0, ?, 0, 0)",
            (sid, "[]" if sid == "s1" else '["s1"]'),
        )
        if sid == "s1":
            db.execute(
                "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
                " VALUES ('k', 'alice', 's1', 0)"
            )
            db.execute(
                "INSERT INTO messages (segment_id, seq, role, content, status, created_at)"
                " VALUES ('s1', 1, 'user', 'pelican', 'complete', 0)"
            )
            db.execute("UPDATE segments SET message_count = 1 WHERE session_id = 's1'")
        else:
            db.execute("UPDATE session_keys SET latest_session_id = 's2'")
    db.execute(
        "INSERT INTO rotations (key, from_session_id, to_session_id, reason, at)"
        " VALUES ('k', 's1', 's2', 'manual', 1)"
    )
    db.execute("COMMIT")
    migrations.apply_sqlite_migrations(db)
    for table in ("session_keys", "segments", "rotations"):
        assert {r[0] for r in db.execute(f"SELECT key FROM {table}")} == {"alice/k"}, table
    # The guards are back, the new stored form included.
    for sql in (
        "UPDATE session_keys SET key = 'mallory/k'",
        "UPDATE segments SET key = 'mallory/k' WHERE session_id = 's2'",
        "UPDATE segments SET message_count = 0 WHERE session_id = 's1'",
        "UPDATE rotations SET key = 'mallory/k'",
    ):
        with pytest.raises(sqlite3.DatabaseError):
            db.execute(sql)
    db.close()
    store = SQLiteStore.open(path)
    ref = KeyRef("alice", "k")
    assert [s.session_id for s in await store.chain(ref)] == ["s1", "s2"]
    assert (await store.latest_segment(ref)).session_id == "s2"
    assert [(r.key, r.to_session_id) for r in await store.rotations(ref)] == [(ref, "s2")]
    assert [f.content for f in await store.recall(ref, "pelican", rationale="r")] == ["pelican"]
    assert [(k.owner, k.key) for k in await store.list_keys("alice")] == [("alice", "k")]
    assert await store.get_key(KeyRef("bob", "k")) is None
    await store.close()


async def test_wal_checkpoints_run_on_their_own_thread(tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "ck.db")
    db = store.connection
    # Commits never checkpoint (that would fsync on the event loop)...
    assert db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert store.checkpointer is not None
    await store.create_key(KeyRef("alice", "ck:key"), "s-ck", NOW)
    for n in range(300):
        await store.append_message("s-ck", role=Role.USER, content=f"message {n}", now=NOW)
    store.checkpointer.stop()  # ...the thread does, and once more as it stops
    assert store.checkpointer.checkpoints >= 1 and store.checkpointer.failures == 0
    busy, wal_frames, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and wal_frames > 0 and copied == wal_frames
    await store.close()
    # Everything is in the database file itself: readable with the WAL gone.
    (tmp_path / "ck.db-wal").unlink(missing_ok=True)
    check = sqlite3.connect(tmp_path / "ck.db")
    assert check.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 300
    check.close()
