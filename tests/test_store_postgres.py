"""The PostgreSQL adapter itself: migrations, the guard triggers against raw SQL, the
full-text index, and what several processes sharing one database need (concurrent
appends and creates, advisory key locks). Two pools stand in for two processes."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from sessiongate.config import Settings, load_settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role, RotationReason
from sessiongate.errors import ConfigError, KeyExists, MigrationError, SessionGateError
from sessiongate.service.engine import build_engine
from sessiongate.service.sessions import Caller
from sessiongate.store.migrations import load_migrations
from sessiongate.store.postgres.liveness import LIVENESS_CLASS
from sessiongate.store.postgres.locks import PostgresKeyLocks, lock_id
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.sqlite.store import SQLiteStore
from tests.support.pg import fresh_database

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
K = KeyRef("alice", "k")


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with fresh_database() as database:
        yield database


@pytest.fixture
async def store(url: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(url, pool_size=4)
    await opened.start()
    yield opened
    await opened.close()


@pytest.fixture
def ids() -> IdGenerator:
    return IdGenerator(ManualClock(NOW))


# -- migrations ----------------------------------------------------------------------------


async def test_migrations_are_recorded_with_checksums_and_applied_once(url: str) -> None:
    first, second = PostgresStore(url, pool_size=2), PostgresStore(url, pool_size=2)
    # Two processes starting at the same moment: one migrates, the other waits and sees it.
    await asyncio.gather(first.start(), second.start())
    await first.start()  # idempotent
    rows = await first.pool.fetch("SELECT version, name, checksum FROM schema_migrations")
    known = load_migrations("postgres")
    assert [(r[0], r[1], r[2]) for r in rows] == [(m.version, m.name, m.checksum) for m in known]
    assert known[0].checksum == hashlib.sha256(known[0].sql.encode()).hexdigest()
    await first.close()
    await second.close()
    again = PostgresStore(url, pool_size=2)
    await again.start()
    assert await again.pool.fetchval("SELECT COUNT(*) FROM schema_migrations") == len(known)
    await again.close()


async def test_edited_migration_is_detected(url: str) -> None:
    store = PostgresStore(url, pool_size=2)
    await store.start()
    await store.pool.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
    await store.close()
    with pytest.raises(MigrationError, match="changed after"):
        await store.start()


async def test_newer_schema_is_refused(url: str) -> None:
    store = PostgresStore(url, pool_size=2)
    await store.start()
    await store.pool.execute(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (99, 'future', 'x')"
    )
    await store.close()
    with pytest.raises(MigrationError, match="newer"):
        await store.start()


# -- guards against raw SQL ----------------------------------------------------------------


async def test_triggers_refuse_raw_writes_to_archived_rows_and_the_pointer(
    store: PostgresStore, ids: IdGenerator
) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    await store.append_message(s1.session_id, role=Role.USER, content="keep me", now=NOW)
    s2, _ = await store.rotate(
        K,
        expected_latest=s1.session_id,
        new_session_id=ids.new(),
        reason=RotationReason.MANUAL,
        now=NOW,
    )
    before = await store.export_chain(K)
    old, new = s1.session_id, s2.session_id
    attacks = [
        ("UPDATE messages SET content = 'rewritten' WHERE segment_id = $1", (old,)),
        ("DELETE FROM messages WHERE segment_id = $1", (old,)),
        (
            "INSERT INTO messages (segment_id, seq, role, content, status, created_at)"
            " VALUES ($1, 99, 'user', 'x', 'complete', now())",
            (old,),
        ),
        ("UPDATE segments SET message_count = 0 WHERE session_id = $1", (old,)),
        ("UPDATE segments SET cleared_after_seq = 1 WHERE session_id = $1", (old,)),
        ("UPDATE segments SET archived_at = now() WHERE session_id = $1", (old,)),
        ("DELETE FROM segments WHERE session_id = $1", (old,)),
        ("UPDATE segments SET parent_ids = '{}' WHERE session_id = $1", (new,)),
        ("UPDATE session_keys SET latest_session_id = $1 WHERE key = 'alice/k'", (old,)),
        ("UPDATE session_keys SET owner = 'mallory'", ()),
        ("DELETE FROM session_keys", ()),
        (
            "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
            " VALUES ('bob/k2', 'bob', $1, now())",
            (new,),
        ),
        ("UPDATE rotations SET reason = 'idle'", ()),
        ("DELETE FROM rotations", ()),
        # Every table that references the history is named too (as TRUNCATE demands), so
        # what refuses it is the history's own trigger, not a foreign key.
        (
            "TRUNCATE messages, segments, session_keys, rotations, message_search, compactions,"
            " pins, pin_versions, message_vectors",
            (),
        ),
    ]
    async with store.pool.acquire() as raw:
        for sql, params in attacks:
            with pytest.raises(asyncpg.PostgresError) as refused:
                await raw.execute(sql, *params)
            assert isinstance(
                refused.value,
                asyncpg.exceptions.RaiseError
                | asyncpg.exceptions.IntegrityConstraintViolationError,
            ), sql
    assert await store.export_chain(K) == before


async def test_full_text_index_follows_archiving_and_erasure(
    store: PostgresStore, ids: IdGenerator
) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    await store.append_message(s1.session_id, role=Role.USER, content="heron facts", now=NOW)
    indexed = "SELECT COUNT(*) FROM message_search WHERE document @@ 'heron'::tsquery"
    assert await store.pool.fetchval(indexed) == 0  # latest: not indexed yet
    s2, _ = await store.rotate(
        K,
        expected_latest=s1.session_id,
        new_session_id=ids.new(),
        reason=RotationReason.MANUAL,
        now=NOW,
    )
    assert await store.pool.fetchval(indexed) == 1  # archived: searchable
    await store.append_message(s2.session_id, role=Role.USER, content="heron", now=NOW)
    assert await store.pool.fetchval(indexed) == 1
    indexes = await store.pool.fetch(
        "SELECT indexdef FROM pg_indexes WHERE tablename = 'message_search'"
    )
    assert any("USING gin (document)" in r[0] for r in indexes)
    await store.delete_key(K)
    assert await store.pool.fetchval("SELECT COUNT(*) FROM message_search") == 0
    assert await store.pool.fetchval("SELECT COUNT(*) FROM messages") == 0
    assert await store.pool.fetchval("SELECT COUNT(*) FROM erasures") == 0


# -- several processes on one database -----------------------------------------------------


async def test_concurrent_appends_from_two_pools_get_distinct_consecutive_seqs(
    store: PostgresStore, url: str, ids: IdGenerator
) -> None:
    other = PostgresStore(url, pool_size=4)
    await other.start()
    try:
        _, segment = await store.create_key(K, ids.new(), NOW)
        appends = [
            writer.append_message(segment.session_id, role=Role.USER, content=f"{i}", now=NOW)
            for i in range(40)
            for writer in (store, other)
        ]
        sent = await asyncio.gather(*appends)
        assert sorted(m.seq for m in sent) == list(range(1, 81))
        stored = await other.list_messages(segment.session_id, limit=1000)
        assert [m.seq for m in stored] == list(range(1, 81))
        assert {m.seq: m.content for m in stored} == {m.seq: m.content for m in sent}
        assert (await store.latest_segment(K)).message_count == 80
    finally:
        await other.close()


async def test_racing_creates_of_one_key_give_one_key_and_one_key_exists(
    store: PostgresStore, url: str, ids: IdGenerator
) -> None:
    other = PostgresStore(url, pool_size=2)
    await other.start()
    try:
        for round_ in range(5):
            # Two processes creating one user's key at once.
            key = KeyRef("alice", f"race-{round_}")
            results = await asyncio.gather(
                store.create_key(key, ids.new(), NOW),
                other.create_key(key, ids.new(), NOW),
                return_exceptions=True,
            )
            errors = [r for r in results if isinstance(r, BaseException)]
            assert len(errors) == 1 and isinstance(errors[0], KeyExists), results
            assert len(await store.chain(key)) == 1  # the loser's segment did not survive
    finally:
        await other.close()


@pytest.fixture
async def two_lock_pools(url: str) -> AsyncIterator[tuple[PostgresKeyLocks, PostgresKeyLocks]]:
    pools = [await asyncpg.create_pool(url, min_size=1, max_size=4) for _ in range(2)]
    try:
        yield PostgresKeyLocks(pools[0]), PostgresKeyLocks(pools[1])
    finally:
        for pool in pools:
            await pool.close()


async def advisory_locks_held(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        # Every process's own liveness lock (store/postgres/liveness.py) is not counted.
        count = await conn.fetchval(
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND NOT (objsubid = 2 AND classid = $1::bigint::oid)",
            LIVENESS_CLASS,
        )
        return int(count)
    finally:
        await conn.close()


async def test_advisory_locks_serialise_a_key_across_pools(
    two_lock_pools: tuple[PostgresKeyLocks, PostgresKeyLocks], url: str
) -> None:
    a, b = two_lock_pools
    inside: list[str] = []
    overlaps: list[tuple[str, str]] = []

    async def worker(locks: PostgresKeyLocks, name: str) -> None:
        for _ in range(5):
            async with locks.hold(KeyRef("alice", "chat:shared")):
                if inside:
                    overlaps.append((inside[0], name))
                inside.append(name)
                await asyncio.sleep(0.005)
                inside.remove(name)

    await asyncio.gather(
        *(worker(locks, f"{n}{i}") for i in range(3) for n, locks in (("a", a), ("b", b)))
    )
    assert overlaps == []
    assert len(a) == len(b) == 0
    assert await advisory_locks_held(url) == 0


async def test_other_keys_do_not_wait_and_a_cancelled_waiter_leaks_nothing(
    two_lock_pools: tuple[PostgresKeyLocks, PostgresKeyLocks], url: str
) -> None:
    a, b = two_lock_pools
    release = asyncio.Event()
    held = asyncio.Event()

    async def holder() -> None:
        async with a.hold(K):
            held.set()
            await release.wait()

    holding = asyncio.create_task(holder())
    await held.wait()
    assert await advisory_locks_held(url) == 1
    # Another process's waiter on the same key blocks; a different key goes straight in.
    waiter = asyncio.create_task(_enter(b, K))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await asyncio.wait_for(_enter(b, KeyRef("alice", "other")), 2)
    # Cancel the blocked waiter: it must not end up holding (or leaking) the lock.
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert len(b) == 0
    release.set()
    await holding
    await asyncio.wait_for(_enter(b, K), 2)  # free again, for the other process too
    assert await advisory_locks_held(url) == 0


async def _enter(locks: PostgresKeyLocks, key: KeyRef) -> None:
    async with locks.hold(key):
        pass


async def test_a_body_that_raises_still_unlocks(
    two_lock_pools: tuple[PostgresKeyLocks, PostgresKeyLocks], url: str
) -> None:
    a, b = two_lock_pools
    with pytest.raises(RuntimeError, match="boom"):
        async with a.hold(K):
            raise RuntimeError("boom")
    await asyncio.wait_for(_enter(b, K), 2)
    assert await advisory_locks_held(url) == 0


def test_lock_ids_are_stable_signed_64_bit() -> None:
    assert lock_id("chat:alice") == lock_id("chat:alice") != lock_id("chat:alicf")
    assert all(-(2**63) <= lock_id(k) < 2**63 for k in ("", "a", "x" * 200))
    # Fixed forever: processes of different versions must agree on a key's lock.
    digest = hashlib.blake2b(b"sessiongate.key\x00chat:alice", digest_size=8).digest()
    assert lock_id("chat:alice") == int.from_bytes(digest, "big", signed=True)


# -- wiring --------------------------------------------------------------------------------


async def test_engine_on_postgres_uses_advisory_locks_and_counts_keys(
    url: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, database={"url": url, "pool_size": 3})
    engine = build_engine(settings)
    assert isinstance(engine.store, PostgresStore)
    assert isinstance(engine.sessions.locks, PostgresKeyLocks)
    await engine.start()
    try:
        assert engine.store.pool.get_max_size() == 3
        await engine.sessions.rotate_now("chat:a", engine_caller())
        assert await engine.store.count_keys() == 1
        _, api_key = await engine.users.add("admin", primary=True, admin=True)
        user = await engine.users.authenticate(api_key)
        assert user is not None and user.admin
        # stop() then start() again, as the CLI does across its two event loops.
        await engine.stop()
        await engine.start()
        assert await engine.store.count_keys() == 1
    finally:
        await engine.aclose()
    assert not (tmp_path / "sessiongate.db").exists()  # no SQLite file on the side


def engine_caller() -> Caller:
    return Caller("alice")


async def test_sqlite_engine_is_unchanged(tmp_path: Path) -> None:
    engine = build_engine(Settings(data_dir=tmp_path))
    await engine.start()  # nothing to do
    assert isinstance(engine.store, SQLiteStore)
    assert type(engine.sessions.locks).__name__ == "KeyLocks"
    await engine.aclose()


async def test_unreachable_server_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    url = "postgresql://sg:s3cret@127.0.0.1:1/nowhere"
    engine = build_engine(Settings(data_dir=tmp_path, database={"url": url}))
    with pytest.raises(ConfigError) as failed:
        await engine.start()
    message = str(failed.value)
    assert "postgresql://sg@127.0.0.1:1/nowhere" in message and "s3cret" not in message
    assert message.startswith("database.url: cannot connect to PostgreSQL")
    await engine.aclose()


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("mysql://u:pw@h/db", "got scheme 'mysql'"),
        ("sessiongate.db", "got scheme 'none'"),
        ("postgresql://u@h:port/db", "not a valid PostgreSQL URL"),
        ("postgresql://u@h:70000/db", "not a valid PostgreSQL URL"),
    ],
)
def test_bad_database_urls_are_refused_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, fragment: str
) -> None:
    monkeypatch.setenv("SESSIONGATE_DATABASE__URL", url)
    with pytest.raises(ConfigError) as refused:
        load_settings(None)
    assert str(refused.value).startswith("database.url:") and fragment in str(refused.value)
    assert "pw" not in str(refused.value)


def test_pool_size_and_backend_selection() -> None:
    assert Settings().database.pool_size == 10
    assert Settings().database.backend == "sqlite"
    assert Settings(database={"url": "sqlite:///x.db"}).database.backend == "sqlite"
    for scheme in ("postgresql", "postgres"):
        assert Settings(database={"url": f"{scheme}://u@h/db"}).database.backend == "postgres"
    with pytest.raises(ValueError, match="pool_size"):
        Settings(database={"pool_size": 0})
    dumped = Settings(database={"url": "postgresql://u:pw@h/db"}).model_dump(mode="json")
    assert dumped["database"]["url"] == "postgresql://u@h/db"  # `config check` masks it


async def test_nul_text_is_refused_clearly(store: PostgresStore, ids: IdGenerator) -> None:
    _, segment = await store.create_key(K, ids.new(), NOW)
    with pytest.raises(SessionGateError) as refused:
        await store.append_message(segment.session_id, role=Role.USER, content="a\x00b", now=NOW)
    assert refused.value.code == "invalid_content"
    assert await store.list_messages(segment.session_id) == []
