"""The store contract: every test here runs on SQLite and on PostgreSQL and must get the
same answers, through the `Store` and `UserStore` ports only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.segments import (
    Message,
    MessageStatus,
    Role,
    RotationReason,
    Segment,
    SegmentStatus,
)
from sessiongate.core.users import User
from sessiongate.errors import (
    Conflict,
    ImmutableSegment,
    InvalidInput,
    KeyExists,
    SegmentNotFound,
    SessionNotFound,
)
from sessiongate.store.base import Store, UserStore
from sessiongate.store.postgres import PostgresStore
from sessiongate.store.postgres_users import PostgresUserStore
from sessiongate.store.sqlite import SQLiteStore
from sessiongate.store.sqlite_users import SQLiteUserStore
from tests.conftest import BACKENDS
from tests.pg import fresh_database

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        sqlite = SQLiteStore.open(tmp_path / "contract.db")
        yield sqlite
        await sqlite.close()
        return
    async with fresh_database() as url:
        pg = PostgresStore(url, pool_size=4)
        await pg.start()
        yield pg
        await pg.close()


@pytest.fixture
def users(store: Store) -> UserStore:
    if isinstance(store, SQLiteStore):
        return SQLiteUserStore(store)
    assert isinstance(store, PostgresStore)
    return PostgresUserStore(store)


@pytest.fixture
def ids() -> IdGenerator:
    return IdGenerator(ManualClock(NOW))


async def say(store: Store, segment: Segment, content: str, at: datetime = NOW) -> Message:
    return await store.append_message(segment.session_id, role=Role.USER, content=content, now=at)


async def rotate(
    store: Store,
    ids: IdGenerator,
    key: str,
    reason: RotationReason = RotationReason.MANUAL,
    at: datetime = NOW,
    **extra: object,
) -> Segment:
    latest = await store.latest_segment(key)
    segment, _ = await store.rotate(
        key,
        expected_latest=latest.session_id,
        new_session_id=ids.new(),
        reason=reason,
        now=at,
        **extra,  # type: ignore[arg-type]
    )
    return segment


# -- keys and the latest pointer -----------------------------------------------------------


async def test_create_key_makes_one_latest_segment(store: Store, ids: IdGenerator) -> None:
    sid = ids.new()
    record, segment = await store.create_key("chat:a", "alice", sid, NOW)
    assert (record.key, record.owner, record.latest_session_id) == ("chat:a", "alice", sid)
    assert record.created_at == NOW and record.overrides == {}
    assert record.last_semantic_rotation_at is None
    assert segment.status is SegmentStatus.LATEST and segment.parent_ids == ()
    assert (segment.message_count, segment.cleared_after_seq) == (0, 0)
    assert segment.created_at == segment.context_started_at == segment.last_activity_at == NOW
    assert await store.get_key("chat:a") == record
    assert await store.latest_segment("chat:a") == segment == await store.get_segment(sid)
    with pytest.raises(KeyExists):
        await store.create_key("chat:a", "alice", ids.new(), NOW)
    assert await store.chain("chat:a") == [segment]


async def test_unknown_keys_and_segments(store: Store, ids: IdGenerator) -> None:
    assert await store.get_key("nobody") is None
    assert await store.get_segment(ids.new()) is None
    assert await store.chain("nobody") == []
    assert await store.rotations("nobody") == []
    with pytest.raises(SessionNotFound):
        await store.latest_segment("nobody")
    with pytest.raises(SessionNotFound):
        await store.set_overrides("nobody", {"a": 1})
    with pytest.raises(SessionNotFound):
        await store.delete_key("nobody")
    with pytest.raises(SessionNotFound):
        await store.export_chain("nobody")
    with pytest.raises(SegmentNotFound):
        await store.append_message(ids.new(), role=Role.USER, content="x", now=NOW)
    with pytest.raises(SessionNotFound):
        await store.rotate(
            "nobody",
            expected_latest=ids.new(),
            new_session_id=ids.new(),
            reason=RotationReason.MANUAL,
            now=NOW,
        )


async def test_rotation_archives_and_moves_the_pointer(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    await say(store, s1, "one")
    later = NOW + timedelta(minutes=5)
    s2, record = await store.rotate(
        "k",
        expected_latest=s1.session_id,
        new_session_id=ids.new(),
        reason=RotationReason.SEMANTIC,
        now=later,
        confidence=0.875,
        deciding_model="judge",
    )
    assert s2.status is SegmentStatus.LATEST and s2.parent_ids == (s1.session_id,)
    assert s2.created_reason is RotationReason.SEMANTIC and s2.created_at == later
    old = await store.get_segment(s1.session_id)
    assert old is not None and old.status is SegmentStatus.ARCHIVED
    assert old.archived_at == later and old.message_count == 1
    assert (record.from_session_id, record.to_session_id) == (s1.session_id, s2.session_id)
    assert (record.confidence, record.deciding_model, record.in_place) == (0.875, "judge", False)
    assert await store.rotations("k") == [record]
    key = await store.get_key("k")
    assert key is not None and key.latest_session_id == s2.session_id
    assert key.last_semantic_rotation_at == later
    with pytest.raises(Conflict) as stale:
        await store.rotate(
            "k",
            expected_latest=s1.session_id,
            new_session_id=ids.new(),
            reason=RotationReason.MANUAL,
            now=later,
        )
    assert stale.value.code == "latest_moved"
    assert [s.session_id for s in await store.chain("k")] == [s1.session_id, s2.session_id]


async def test_chain_follows_insertion_order_not_timestamps(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    # The clock steps back: timestamps go down, the chain order must not.
    s2 = await rotate(store, ids, "k", at=NOW - timedelta(hours=1))
    s3 = await rotate(store, ids, "k", at=NOW - timedelta(hours=2))
    chain = await store.chain("k")
    assert [s.session_id for s in chain] == [s1.session_id, s2.session_id, s3.session_id]
    assert [r.to_session_id for r in await store.rotations("k")] == [
        s2.session_id,
        s3.session_id,
    ]
    exported = await store.export_chain("k")
    assert [s.session_id for s in exported.segments] == [s.session_id for s in chain]


async def test_clear_in_place_keeps_messages_and_restarts_the_thread(
    store: Store, ids: IdGenerator
) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    for word in ("a", "b"):
        await say(store, s1, word)
    later = NOW + timedelta(seconds=30)
    segment, record = await store.clear_in_place(
        "k", expected_latest=s1.session_id, reason=RotationReason.MANUAL, now=later
    )
    assert record.in_place and record.from_session_id == record.to_session_id == s1.session_id
    assert (segment.cleared_after_seq, segment.context_started_at) == (2, later)
    assert segment.active_message_count == 0
    await say(store, segment, "c")
    latest = await store.latest_segment("k")
    assert [m.content for m in await store.thread_tail(latest, 10)] == ["c"]
    assert [m.content for m in await store.list_messages(s1.session_id)] == ["a", "b", "c"]
    with pytest.raises(Conflict):
        await store.clear_in_place(
            "k", expected_latest=ids.new(), reason=RotationReason.MANUAL, now=later
        )


# -- messages ------------------------------------------------------------------------------


async def test_append_round_trips_exactly(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    berlin = timezone(timedelta(hours=2))
    at = datetime(2026, 5, 1, 14, 0, 0, 123456, tzinfo=berlin)
    metadata = {"z": 1, "a": [1, 2.5, None], "ünï": "cödé", "nested": {"b": True}}
    sent = await store.append_message(
        s1.session_id,
        role=Role.ASSISTANT,
        content="Grüße 👋 'quoted' \"double\" \\ back",
        now=at,
        status=MessageStatus.INTERRUPTED,
        metadata=metadata,
    )
    assert sent.created_at == at and sent.created_at.tzinfo == UTC  # UTC out, same instant
    assert sent.created_at.microsecond == 123456
    assert (sent.seq, sent.message_id) == (1, f"{s1.session_id}:1")
    [stored] = await store.list_messages(s1.session_id)
    assert stored == sent and list(stored.metadata) == list(metadata)
    assert stored.created_at.tzinfo == UTC
    with pytest.raises(ValueError, match="naive"):
        await store.append_message(
            s1.session_id, role=Role.USER, content="x", now=datetime(2026, 5, 1)
        )


async def test_seqs_are_consecutive_and_activity_never_goes_back(
    store: Store, ids: IdGenerator
) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    times = [NOW + timedelta(seconds=10), NOW + timedelta(seconds=5), NOW]
    sent = [await say(store, s1, f"m{i}", at) for i, at in enumerate(times)]
    assert [m.seq for m in sent] == [1, 2, 3]
    latest = await store.latest_segment("k")
    assert latest.message_count == 3 and latest.last_activity_at == times[0]
    page = await store.list_messages(s1.session_id, after_seq=1, limit=1)
    assert [m.content for m in page] == ["m1"]
    assert len(await store.list_messages(s1.session_id, limit=-1)) == 3  # negative: no limit
    assert await store.list_messages(s1.session_id, limit=0) == []
    assert [m.content for m in await store.thread_tail(latest, 2)] == ["m1", "m2"]
    assert await store.thread_tail(latest, 0) == []


async def test_archived_segment_refuses_appends(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    await say(store, s1, "before")
    await rotate(store, ids, "k")
    with pytest.raises(ImmutableSegment):
        await say(store, s1, "late write")
    assert [m.content for m in await store.list_messages(s1.session_id)] == ["before"]
    old = await store.get_segment(s1.session_id)
    assert old is not None and old.message_count == 1


async def test_thread_tail_follows_continuations(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    await say(store, s1, "a1")
    await say(store, s1, "a2")
    s2 = await rotate(store, ids, "k", RotationReason.SEMANTIC)
    await say(store, s2, "b1")
    s3 = await rotate(
        store,
        ids,
        "k",
        RotationReason.REVERT,
        continues=(s1.session_id, s2.session_id),
        extra_parents=(s1.session_id,),
    )
    assert s3.continues == (s1.session_id, s2.session_id)
    assert s3.parent_ids == (s2.session_id, s1.session_id)
    await say(store, s3, "c1")
    assert [m.content for m in await store.thread_tail(s3, 10)] == ["a1", "a2", "b1", "c1"]
    assert [m.content for m in await store.thread_tail(s3, 3)] == ["a2", "b1", "c1"]


# -- recall --------------------------------------------------------------------------------


async def test_recall_searches_only_archived_segments_of_the_same_key(
    store: Store, ids: IdGenerator
) -> None:
    _, a1 = await store.create_key("a", "alice", ids.new(), NOW)
    await say(store, a1, "walrus archived")
    a2 = await rotate(store, ids, "a")
    await say(store, a2, "walrus latest")
    _, b1 = await store.create_key("b", "bob", ids.new(), NOW)
    await say(store, b1, "walrus bob")
    await rotate(store, ids, "b")
    found = await store.recall("a", 'walrus" OR *', rationale="testing")
    assert [(f.content, f.session_id, f.rationale) for f in found] == [
        ("walrus archived", a1.session_id, "testing")
    ]
    assert found[0].score > 0 and found[0].message_id == f"{a1.session_id}:1"
    assert found[0].role is Role.USER and found[0].seq == 1 and found[0].created_at == NOW
    assert (
        await store.recall("a", "walrus", rationale="r", exclude_session_ids=[a1.session_id]) == []
    )
    assert await store.recall("a", "narwhal", rationale="r") == []
    with pytest.raises(InvalidInput) as empty:
        await store.recall("a", "  !? _ ", rationale="r")
    assert empty.value.code == "invalid_recall"


async def test_recall_ranks_by_relevance_then_insertion(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    for text in ("otter river", "otter", "Otter", "badger", "the otter and the river"):
        await say(store, s1, text)
    await rotate(store, ids, "k")
    found = await store.recall("k", "OTTER river", rationale="r", limit=10)
    contents = [f.content for f in found]
    assert set(contents) == {"otter river", "otter", "Otter", "the otter and the river"}
    assert set(contents[:2]) == {"otter river", "the otter and the river"}  # both words first
    assert contents[2:] == ["otter", "Otter"]  # equal rank: insertion order
    assert [f.score for f in found] == sorted((f.score for f in found), reverse=True)
    assert len(await store.recall("k", "otter", rationale="r", limit=2)) == 2


async def test_recall_folds_case_beyond_ascii(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key("k", "alice", ids.new(), NOW)
    await say(store, s1, "GRÜSSE aus Köln")
    await rotate(store, ids, "k")
    assert [f.content for f in await store.recall("k", "grüsse", rationale="r")] == [
        "GRÜSSE aus Köln"
    ]
    assert [f.content for f in await store.recall("k", "KÖLN", rationale="r")] == [
        "GRÜSSE aus Köln"
    ]


# -- listing, overrides, erasure -----------------------------------------------------------


async def test_list_and_count_keys(store: Store, ids: IdGenerator) -> None:
    assert await store.count_keys() == 0
    for key, owner in (("b", "alice"), ("B", "bob"), ("a", "alice")):
        _, seg = await store.create_key(key, owner, ids.new(), NOW)
    await say(store, seg, "newest", NOW + timedelta(minutes=1))  # "a" is the most recent
    await rotate(store, ids, "a")
    listed = await store.list_keys()
    assert [k.key for k in listed] == ["a", "B", "b"]  # recency, then byte order of keys
    assert (listed[0].segment_count, listed[0].message_count) == (2, 1)
    assert listed[0].last_activity_at == NOW + timedelta(minutes=1)
    assert [k.key for k in await store.list_keys("alice")] == ["a", "b"]
    assert await store.list_keys("nobody") == []
    assert await store.count_keys() == 3


async def test_overrides_round_trip(store: Store, ids: IdGenerator) -> None:
    await store.create_key("k", "alice", ids.new(), NOW)
    overrides = {"reply_model": "x", "lifecycle": {"idle_window": "2h"}, "n": [1, None]}
    record = await store.set_overrides("k", overrides)
    assert record.overrides == overrides and record.owner == "alice"
    assert (await store.get_key("k")) == record


async def test_erasure_removes_the_whole_chain_and_only_it(store: Store, ids: IdGenerator) -> None:
    for key in ("a", "b"):
        _, seg = await store.create_key(key, "alice", ids.new(), NOW)
        await say(store, seg, f"hi {key}")
        await rotate(store, ids, key)
    erased = await store.chain("a")
    await store.delete_key("a")
    assert await store.get_key("a") is None and await store.chain("a") == []
    assert await store.rotations("a") == []
    assert [await store.get_segment(s.session_id) for s in erased] == [None, None]
    assert await store.list_messages(erased[0].session_id) == []
    assert [f.content for f in await store.recall("b", "hi", rationale="r")] == ["hi b"]
    with pytest.raises(SessionNotFound):
        await store.delete_key("a")
    # The key can be used again from scratch.
    _, fresh = await store.create_key("a", "bob", ids.new(), NOW)
    assert (await say(store, fresh, "again")).seq == 1


# -- export and import ---------------------------------------------------------------------


async def build_chain(store: Store, ids: IdGenerator, key: str = "k") -> None:
    _, s1 = await store.create_key(key, "alice", ids.new(), NOW)
    await say(store, s1, "first otters")
    await store.append_message(
        s1.session_id,
        role=Role.ASSISTANT,
        content="cut short",
        now=NOW + timedelta(seconds=1),
        status=MessageStatus.INTERRUPTED,
        metadata={"model": "m", "usage": {"in": 3}},
    )
    s2 = await rotate(store, ids, key, RotationReason.SEMANTIC, NOW + timedelta(minutes=1))
    await say(store, s2, "beavers", NOW + timedelta(minutes=2))
    await store.clear_in_place(
        key,
        expected_latest=s2.session_id,
        reason=RotationReason.MANUAL,
        now=NOW + timedelta(minutes=3),
    )
    await store.set_overrides(key, {"reply_model": "x"})


async def test_export_import_round_trip(store: Store, ids: IdGenerator) -> None:
    await build_chain(store, ids)
    exported = await store.export_chain("k")
    assert len(exported.segments) == 2 and len(exported.messages) == 3
    assert len(exported.rotations) == 2
    await store.delete_key("k")
    await store.import_chain(exported)
    assert await store.export_chain("k") == exported
    # Imported archives obey the live rules and are searchable.
    with pytest.raises(ImmutableSegment):
        await say(store, exported.segments[0], "late")
    assert [f.content for f in await store.recall("k", "otters", rationale="r")] == ["first otters"]
    latest = await store.latest_segment("k")
    assert (await say(store, latest, "next")).seq == 2


async def test_import_refuses_existing_keys_and_foreign_segments(
    store: Store, ids: IdGenerator
) -> None:
    await build_chain(store, ids)
    exported = await store.export_chain("k")
    with pytest.raises(KeyExists):
        await store.import_chain(exported)
    renamed = replace(exported, key=replace(exported.key, key="other"))
    with pytest.raises(Conflict, match="already exists under another key"):
        await store.import_chain(renamed)
    assert await store.get_key("other") is None


async def test_import_is_all_or_nothing(store: Store, ids: IdGenerator) -> None:
    await build_chain(store, ids)
    exported = await store.export_chain("k")
    await store.delete_key("k")
    # A duplicate (segment, seq) in the last segment fails after everything before it.
    broken = replace(exported, messages=[*exported.messages, exported.messages[-1]])
    with pytest.raises(Conflict):
        await store.import_chain(broken)
    assert await store.get_key("k") is None and await store.count_keys() == 0
    assert [await store.get_segment(s.session_id) for s in exported.segments] == [None, None]
    await store.import_chain(exported)  # the intact file still imports
    assert await store.export_chain("k") == exported


# -- users ---------------------------------------------------------------------------------


async def test_users_and_keys(users: UserStore) -> None:
    await users.add_user(User("zed", primary=True, admin=True, modes=("a", "b")), NOW)
    await users.add_user(User("Amy"), NOW)
    with pytest.raises(Conflict) as dup:
        await users.add_user(User("zed"), NOW)
    assert dup.value.code == "user_exists"
    with pytest.raises(Conflict) as second:
        await users.add_user(User("bo", primary=True), NOW)
    assert second.value.code == "primary_exists"
    assert [u.name for u in await users.list_users()] == ["Amy", "zed"]  # byte order
    assert await users.get_user("zed") == User("zed", True, True, ("a", "b"))
    assert await users.get_user("nobody") is None
    await users.add_key("key123", "zed", "d" * 64, NOW)
    assert await users.find_key("key123") == (User("zed", True, True, ("a", "b")), "d" * 64)
    assert await users.find_key("missing") is None
    with pytest.raises(Conflict):
        await users.add_key("key123", "Amy", "e" * 64, NOW)
    with pytest.raises(Conflict):
        await users.add_key("key999", "nobody", "e" * 64, NOW)
