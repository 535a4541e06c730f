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
from sessiongate.core.keys import KeyRef
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
from sessiongate.store.exchange import retarget
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.postgres.users import PostgresUserStore
from sessiongate.store.sqlite.store import SQLiteStore
from sessiongate.store.sqlite.users import SQLiteUserStore
from tests.conftest import BACKENDS
from tests.support.pg import fresh_database

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def alice(name: str) -> KeyRef:
    return KeyRef("alice", name)


def bob(name: str) -> KeyRef:
    return KeyRef("bob", name)


K = alice("k")
NOBODY = alice("nobody")


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
    key: KeyRef,
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
    chat_a = alice("chat:a")
    record, segment = await store.create_key(chat_a, sid, NOW)
    assert (record.key, record.owner, record.latest_session_id) == ("chat:a", "alice", sid)
    assert record.ref == chat_a and segment.key == chat_a
    assert record.created_at == NOW and record.overrides == {}
    assert record.last_semantic_rotation_at is None
    assert segment.status is SegmentStatus.LATEST and segment.parent_ids == ()
    assert (segment.message_count, segment.cleared_after_seq) == (0, 0)
    assert segment.created_at == segment.context_started_at == segment.last_activity_at == NOW
    assert await store.get_key(chat_a) == record
    assert await store.latest_segment(chat_a) == segment == await store.get_segment(sid)
    with pytest.raises(KeyExists):
        await store.create_key(chat_a, ids.new(), NOW)
    assert await store.chain(chat_a) == [segment]


async def test_unknown_keys_and_segments(store: Store, ids: IdGenerator) -> None:
    assert await store.get_key(NOBODY) is None
    assert await store.get_segment(ids.new()) is None
    assert await store.chain(NOBODY) == []
    assert await store.rotations(NOBODY) == []
    with pytest.raises(SessionNotFound):
        await store.latest_segment(NOBODY)
    with pytest.raises(SessionNotFound):
        await store.set_overrides(NOBODY, {"a": 1})
    with pytest.raises(SessionNotFound):
        await store.delete_key(NOBODY)
    with pytest.raises(SessionNotFound):
        await store.export_chain(NOBODY)
    with pytest.raises(SegmentNotFound):
        await store.append_message(ids.new(), role=Role.USER, content="x", now=NOW)
    with pytest.raises(SessionNotFound):
        await store.rotate(
            NOBODY,
            expected_latest=ids.new(),
            new_session_id=ids.new(),
            reason=RotationReason.MANUAL,
            now=NOW,
        )


async def test_rotation_archives_and_moves_the_pointer(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    await say(store, s1, "one")
    later = NOW + timedelta(minutes=5)
    s2, record = await store.rotate(
        K,
        expected_latest=s1.session_id,
        new_session_id=ids.new(),
        reason=RotationReason.SEMANTIC,
        now=later,
        confidence=0.875,
        deciding_model="judge",
    )
    assert s2.status is SegmentStatus.LATEST and s2.parent_ids == (s1.session_id,)
    assert s2.created_reason is RotationReason.SEMANTIC and s2.created_at == later
    assert s2.key == K
    old = await store.get_segment(s1.session_id)
    assert old is not None and old.status is SegmentStatus.ARCHIVED
    assert old.archived_at == later and old.message_count == 1
    assert (record.from_session_id, record.to_session_id) == (s1.session_id, s2.session_id)
    assert (record.confidence, record.deciding_model, record.in_place) == (0.875, "judge", False)
    assert record.key == K
    assert await store.rotations(K) == [record]
    key = await store.get_key(K)
    assert key is not None and key.latest_session_id == s2.session_id
    assert key.last_semantic_rotation_at == later
    with pytest.raises(Conflict) as stale:
        await store.rotate(
            K,
            expected_latest=s1.session_id,
            new_session_id=ids.new(),
            reason=RotationReason.MANUAL,
            now=later,
        )
    assert stale.value.code == "latest_moved"
    assert [s.session_id for s in await store.chain(K)] == [s1.session_id, s2.session_id]


async def test_chain_follows_insertion_order_not_timestamps(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    # The clock steps back: timestamps go down, the chain order must not.
    s2 = await rotate(store, ids, K, at=NOW - timedelta(hours=1))
    s3 = await rotate(store, ids, K, at=NOW - timedelta(hours=2))
    chain = await store.chain(K)
    assert [s.session_id for s in chain] == [s1.session_id, s2.session_id, s3.session_id]
    assert [r.to_session_id for r in await store.rotations(K)] == [
        s2.session_id,
        s3.session_id,
    ]
    exported = await store.export_chain(K)
    assert [s.session_id for s in exported.segments] == [s.session_id for s in chain]


async def test_clear_in_place_keeps_messages_and_restarts_the_thread(
    store: Store, ids: IdGenerator
) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    for word in ("a", "b"):
        await say(store, s1, word)
    later = NOW + timedelta(seconds=30)
    segment, record = await store.clear_in_place(
        K, expected_latest=s1.session_id, reason=RotationReason.MANUAL, now=later
    )
    assert record.in_place and record.from_session_id == record.to_session_id == s1.session_id
    assert record.key == K
    assert (segment.cleared_after_seq, segment.context_started_at) == (2, later)
    assert segment.active_message_count == 0
    await say(store, segment, "c")
    latest = await store.latest_segment(K)
    assert [m.content for m in await store.thread_tail(latest, 10)] == ["c"]
    assert [m.content for m in await store.list_messages(s1.session_id)] == ["a", "b", "c"]
    with pytest.raises(Conflict):
        await store.clear_in_place(
            K, expected_latest=ids.new(), reason=RotationReason.MANUAL, now=later
        )


# -- messages ------------------------------------------------------------------------------


async def test_append_round_trips_exactly(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
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
    _, s1 = await store.create_key(K, ids.new(), NOW)
    times = [NOW + timedelta(seconds=10), NOW + timedelta(seconds=5), NOW]
    sent = [await say(store, s1, f"m{i}", at) for i, at in enumerate(times)]
    assert [m.seq for m in sent] == [1, 2, 3]
    latest = await store.latest_segment(K)
    assert latest.message_count == 3 and latest.last_activity_at == times[0]
    page = await store.list_messages(s1.session_id, after_seq=1, limit=1)
    assert [m.content for m in page] == ["m1"]
    assert len(await store.list_messages(s1.session_id, limit=-1)) == 3  # negative: no limit
    assert await store.list_messages(s1.session_id, limit=0) == []
    assert [m.content for m in await store.thread_tail(latest, 2)] == ["m1", "m2"]
    assert await store.thread_tail(latest, 0) == []


async def test_archived_segment_refuses_appends(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    await say(store, s1, "before")
    await rotate(store, ids, K)
    with pytest.raises(ImmutableSegment):
        await say(store, s1, "late write")
    assert [m.content for m in await store.list_messages(s1.session_id)] == ["before"]
    old = await store.get_segment(s1.session_id)
    assert old is not None and old.message_count == 1


async def test_thread_tail_follows_continuations(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    await say(store, s1, "a1")
    await say(store, s1, "a2")
    s2 = await rotate(store, ids, K, RotationReason.SEMANTIC)
    await say(store, s2, "b1")
    s3 = await rotate(
        store,
        ids,
        K,
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
    a, b = alice("a"), bob("b")
    _, a1 = await store.create_key(a, ids.new(), NOW)
    await say(store, a1, "walrus archived")
    a2 = await rotate(store, ids, a)
    await say(store, a2, "walrus latest")
    _, b1 = await store.create_key(b, ids.new(), NOW)
    await say(store, b1, "walrus bob")
    await rotate(store, ids, b)
    found = await store.recall(a, 'walrus" OR *', rationale="testing")
    assert [(f.content, f.session_id, f.rationale) for f in found] == [
        ("walrus archived", a1.session_id, "testing")
    ]
    assert found[0].score > 0 and found[0].message_id == f"{a1.session_id}:1"
    assert found[0].role is Role.USER and found[0].seq == 1 and found[0].created_at == NOW
    assert await store.recall(a, "walrus", rationale="r", exclude_session_ids=[a1.session_id]) == []
    assert await store.recall(a, "narwhal", rationale="r") == []
    with pytest.raises(InvalidInput) as empty:
        await store.recall(a, "  !? _ ", rationale="r")
    assert empty.value.code == "invalid_recall"


async def test_recall_ranks_by_relevance_then_insertion(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    for text in ("otter river", "otter", "Otter", "badger", "the otter and the river"):
        await say(store, s1, text)
    await rotate(store, ids, K)
    found = await store.recall(K, "OTTER river", rationale="r", limit=10)
    contents = [f.content for f in found]
    assert set(contents) == {"otter river", "otter", "Otter", "the otter and the river"}
    assert set(contents[:2]) == {"otter river", "the otter and the river"}  # both words first
    assert contents[2:] == ["otter", "Otter"]  # equal rank: insertion order
    assert [f.score for f in found] == sorted((f.score for f in found), reverse=True)
    assert len(await store.recall(K, "otter", rationale="r", limit=2)) == 2


async def test_recall_folds_case_beyond_ascii(store: Store, ids: IdGenerator) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    await say(store, s1, "GRÜSSE aus Köln")
    await rotate(store, ids, K)
    assert [f.content for f in await store.recall(K, "grüsse", rationale="r")] == [
        "GRÜSSE aus Köln"
    ]
    assert [f.content for f in await store.recall(K, "KÖLN", rationale="r")] == ["GRÜSSE aus Köln"]


async def test_recall_never_finds_what_the_offline_stand_in_said(
    store: Store, ids: IdGenerator
) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    await say(store, s1, "where do otters sleep")
    for metadata in ({"offline": True}, {"offline": False}, {}):
        await store.append_message(
            s1.session_id,
            role=Role.ASSISTANT,
            content=f"otters answer {metadata}",
            now=NOW,
            metadata=metadata,
        )
    await rotate(store, ids, K)
    found = await store.recall(K, "otters", rationale="r", limit=10)
    assert sorted(f.content for f in found) == [
        "otters answer {'offline': False}",
        "otters answer {}",
        "where do otters sleep",
    ]


# -- listing, overrides, erasure -----------------------------------------------------------


async def test_a_key_is_titled_by_its_first_user_message_until_one_is_set(
    store: Store, ids: IdGenerator
) -> None:
    _, s1 = await store.create_key(K, ids.new(), NOW)
    [listed] = await store.list_keys("alice")
    assert listed.title is None  # nothing said yet
    await store.append_message(s1.session_id, role=Role.ASSISTANT, content="Hello!", now=NOW)
    await say(store, s1, "  Where do the\n otters sleep   at night?  ")
    await say(store, s1, "and in winter?")
    s2 = await rotate(store, ids, K)
    await say(store, s2, "something else entirely")
    [listed] = await store.list_keys("alice")
    assert listed.title == "Where do the otters sleep at night?"  # the chain's first
    assert (await store.get_key(K)).title is None  # type: ignore[union-attr]

    record = await store.set_title(K, "Otters, at night")
    assert record.title == "Otters, at night"
    assert (await store.get_key(K)).title == "Otters, at night"  # type: ignore[union-attr]
    [listed] = await store.list_keys("alice")
    assert listed.title == "Otters, at night"
    assert (await store.set_title(K, None)).title is None
    [listed] = await store.list_keys("alice")
    assert listed.title == "Where do the otters sleep at night?"
    with pytest.raises(SessionNotFound):
        await store.set_title(NOBODY, "x")

    long_key = alice("long")
    _, s3 = await store.create_key(long_key, ids.new(), NOW)
    await say(store, s3, "word " * 2000)
    listed_long = [k for k in await store.list_keys("alice") if k.key == "long"]
    # Cut on a word boundary within 60 characters, the ellipsis included.
    assert listed_long[0].title == ("word " * 12).strip() + "\u2026"
    assert len(listed_long[0].title) == 60


async def test_list_and_count_keys(store: Store, ids: IdGenerator) -> None:
    assert await store.count_keys() == 0
    for ref in (alice("b"), bob("A"), alice("B"), alice("a")):
        _, seg = await store.create_key(ref, ids.new(), NOW)
    await say(store, seg, "newest", NOW + timedelta(minutes=1))  # alice's "a" is the most recent
    await rotate(store, ids, alice("a"))
    listed = await store.list_keys()
    # Byte order of owner, then key (an order pages can resume from; recency is not):
    # "B" before "b", alice's before bob's.
    assert [(k.owner, k.key) for k in listed] == [
        ("alice", "B"),
        ("alice", "a"),
        ("alice", "b"),
        ("bob", "A"),
    ]
    assert (listed[1].segment_count, listed[1].message_count) == (2, 1)
    assert listed[1].last_activity_at == NOW + timedelta(minutes=1)
    assert [k.key for k in await store.list_keys("alice")] == ["B", "a", "b"]
    assert await store.list_keys("nobody") == []
    assert await store.count_keys() == 4


async def test_overrides_round_trip(store: Store, ids: IdGenerator) -> None:
    await store.create_key(K, ids.new(), NOW)
    overrides = {"reply_model": "x", "lifecycle": {"idle_window": "2h"}, "n": [1, None]}
    record = await store.set_overrides(K, overrides)
    assert record.overrides == overrides and record.owner == "alice" and record.ref == K
    assert (await store.get_key(K)) == record


async def test_erasure_removes_the_whole_chain_and_only_it(store: Store, ids: IdGenerator) -> None:
    a, b = alice("a"), alice("b")
    for key in (a, b):
        _, seg = await store.create_key(key, ids.new(), NOW)
        await say(store, seg, f"hi {key.name}")
        await rotate(store, ids, key)
    erased = await store.chain(a)
    await store.delete_key(a)
    assert await store.get_key(a) is None and await store.chain(a) == []
    assert await store.rotations(a) == []
    assert [await store.get_segment(s.session_id) for s in erased] == [None, None]
    assert await store.list_messages(erased[0].session_id) == []
    assert [f.content for f in await store.recall(b, "hi", rationale="r")] == ["hi b"]
    with pytest.raises(SessionNotFound):
        await store.delete_key(a)
    # The key can be used again from scratch.
    _, fresh = await store.create_key(a, ids.new(), NOW)
    assert (await say(store, fresh, "again")).seq == 1


# -- owners' namespaces --------------------------------------------------------------------


async def test_two_owners_hold_the_same_key_name_apart(store: Store, ids: IdGenerator) -> None:
    mine, theirs = alice("chat:x"), bob("chat:x")
    a_record, a1 = await store.create_key(mine, ids.new(), NOW)
    b_record, b1 = await store.create_key(theirs, ids.new(), NOW)
    assert (a_record.key, a_record.owner) == ("chat:x", "alice")
    assert (b_record.key, b_record.owner) == ("chat:x", "bob")
    assert (a1.key, b1.key) == (mine, theirs)
    assert await store.get_key(mine) == a_record and await store.get_key(theirs) == b_record
    assert await store.count_keys() == 2
    with pytest.raises(KeyExists):
        await store.create_key(theirs, ids.new(), NOW)

    await say(store, a1, "walrus from alice")
    await say(store, b1, "walrus from bob")
    a2 = await rotate(store, ids, mine, RotationReason.SEMANTIC)
    await say(store, a2, "alice again")
    await store.set_overrides(mine, {"reply_model": "x"})

    # Alice's rotation, appends and overrides are invisible from bob's key...
    b_latest = await store.latest_segment(theirs)
    assert b_latest.session_id == b1.session_id and b_latest.status is SegmentStatus.LATEST
    assert b_latest.message_count == 1 and b_latest.key == theirs
    assert [s.session_id for s in await store.chain(theirs)] == [b1.session_id]
    assert await store.rotations(theirs) == []
    assert [m.content for m in await store.list_messages(b1.session_id)] == ["walrus from bob"]
    assert [m.content for m in await store.thread_tail(b_latest, 10)] == ["walrus from bob"]
    b_now = await store.get_key(theirs)
    assert b_now is not None and b_now.overrides == {} and b_now.last_semantic_rotation_at is None
    # ...and alice sees only her own.
    a_latest = await store.latest_segment(mine)
    assert a_latest.session_id == a2.session_id
    assert [s.session_id for s in await store.chain(mine)] == [a1.session_id, a2.session_id]
    assert [(r.key, r.to_session_id) for r in await store.rotations(mine)] == [
        (mine, a2.session_id)
    ]
    assert [m.content for m in await store.list_messages(a1.session_id)] == ["walrus from alice"]

    # Recall searches only the named owner's archive.
    await rotate(store, ids, theirs)
    assert [f.content for f in await store.recall(mine, "walrus", rationale="r")] == [
        "walrus from alice"
    ]
    assert [f.content for f in await store.recall(theirs, "walrus", rationale="r")] == [
        "walrus from bob"
    ]

    # Each export holds its own owner's chain and nothing of the other's.
    mine_out = await store.export_chain(mine)
    theirs_out = await store.export_chain(theirs)
    assert mine_out.key.ref == mine and theirs_out.key.ref == theirs
    assert {s.session_id for s in mine_out.segments} == {a1.session_id, a2.session_id}
    assert {s.key for s in mine_out.segments} == {mine}
    assert [m.content for m in mine_out.messages] == ["walrus from alice", "alice again"]
    assert {r.key for r in mine_out.rotations} == {mine}
    assert b1.session_id in {s.session_id for s in theirs_out.segments}
    assert not {s.session_id for s in theirs_out.segments} & {a1.session_id, a2.session_id}
    assert [m.content for m in theirs_out.messages] == ["walrus from bob"]
    assert {r.key for r in theirs_out.rotations} == {theirs}

    # Erasing one leaves the other whole.
    await store.delete_key(mine)
    assert await store.get_key(mine) is None and await store.chain(mine) == []
    with pytest.raises(SessionNotFound):
        await store.latest_segment(mine)
    assert await store.export_chain(theirs) == theirs_out
    assert [f.content for f in await store.recall(theirs, "walrus", rationale="r")] == [
        "walrus from bob"
    ]
    with pytest.raises(SessionNotFound):
        await store.delete_key(mine)
    assert await store.count_keys() == 1


async def test_list_keys_by_owner_and_same_names_listed_for_each(
    store: Store, ids: IdGenerator
) -> None:
    refs = [alice("chat:x"), bob("chat:x"), alice("notes"), KeyRef("carol", "other")]
    latest = {}
    for ref in refs:
        _, seg = await store.create_key(ref, ids.new(), NOW)
        latest[ref] = seg
    # Only alice's chat:x grows: bob's same-named key must not be counted with it.
    await say(store, latest[alice("chat:x")], "hello", NOW + timedelta(minutes=1))
    latest[alice("chat:x")] = await rotate(store, ids, alice("chat:x"))

    everyone = await store.list_keys()
    assert sorted((k.owner, k.key) for k in everyone) == sorted((r.owner, r.name) for r in refs)
    by_ref = {KeyRef(k.owner, k.key): k for k in everyone}
    for ref, seg in latest.items():
        assert by_ref[ref].latest_session_id == seg.session_id
    assert (by_ref[alice("chat:x")].segment_count, by_ref[alice("chat:x")].message_count) == (2, 1)
    assert (by_ref[bob("chat:x")].segment_count, by_ref[bob("chat:x")].message_count) == (1, 0)
    assert by_ref[bob("chat:x")].last_activity_at == NOW

    assert sorted((k.owner, k.key) for k in await store.list_keys(owner="alice")) == [
        ("alice", "chat:x"),
        ("alice", "notes"),
    ]
    assert [(k.owner, k.key, k.latest_session_id) for k in await store.list_keys(owner="bob")] == [
        ("bob", "chat:x", latest[bob("chat:x")].session_id)
    ]
    assert [(k.owner, k.key) for k in await store.list_keys(owner="carol")] == [("carol", "other")]
    assert await store.count_keys() == 4


# -- export and import ---------------------------------------------------------------------


async def build_chain(store: Store, ids: IdGenerator, key: KeyRef = K) -> None:
    _, s1 = await store.create_key(key, ids.new(), NOW)
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
    exported = await store.export_chain(K)
    assert len(exported.segments) == 2 and len(exported.messages) == 3
    assert len(exported.rotations) == 2
    await store.delete_key(K)
    written = await store.import_chain(exported, ids.new)
    assert written == exported  # into free ids: nothing renamed
    assert await store.export_chain(K) == exported
    # Imported archives obey the live rules and are searchable.
    with pytest.raises(ImmutableSegment):
        await say(store, exported.segments[0], "late")
    assert [f.content for f in await store.recall(K, "otters", rationale="r")] == ["first otters"]
    latest = await store.latest_segment(K)
    assert (await say(store, latest, "next")).seq == 2


async def test_import_refuses_existing_keys_and_renames_taken_segments(
    store: Store, ids: IdGenerator
) -> None:
    # Before namespaces, segment ids already held by another key made the import fail
    # ("already exists under another key"). Now they get fresh ids instead: see
    # test_import_keeps_free_ids_and_renames_taken_ones for the whole rule.
    await build_chain(store, ids)
    exported = await store.export_chain(K)
    with pytest.raises(KeyExists):
        await store.import_chain(exported, ids.new)
    assert await store.export_chain(K) == exported and await store.count_keys() == 1
    other = alice("other")
    written = await store.import_chain(retarget(exported, other), ids.new)
    assert written.key.ref == other
    taken = {s.session_id for s in exported.segments}
    assert not taken & {s.session_id for s in written.segments}
    assert await store.export_chain(other) == written
    assert await store.export_chain(K) == exported


async def test_import_keeps_free_ids_and_renames_taken_ones(store: Store, ids: IdGenerator) -> None:
    await build_chain(store, ids)
    # A revert continuation, so an import has `continues` and two parents to rewrite.
    s1, s2 = (await store.chain(K))[:2]
    s3 = await rotate(
        store,
        ids,
        K,
        RotationReason.REVERT,
        NOW + timedelta(minutes=4),
        continues=(s1.session_id, s2.session_id),
        extra_parents=(s1.session_id,),
    )
    await say(store, s3, "otters again", NOW + timedelta(minutes=5))
    exported = await store.export_chain(K)
    assert len(exported.segments) == 3 and len(exported.rotations) == 3
    await store.delete_key(K)

    # Into an empty store every id is free, and kept.
    assert await store.import_chain(exported, ids.new) == exported
    assert await store.export_chain(K) == exported

    # The same file again, under bob's key of the same name: every id is taken.
    theirs = bob("k")
    copy = await store.import_chain(retarget(exported, theirs), ids.new)
    old_ids = [s.session_id for s in exported.segments]
    new_ids = [s.session_id for s in copy.segments]
    assert len(set(new_ids)) == len(old_ids) and not set(new_ids) & set(old_ids)
    renamed = dict(zip(old_ids, new_ids, strict=True))
    assert copy.key.ref == theirs
    assert copy.key.latest_session_id == renamed[exported.key.latest_session_id]
    assert (
        replace(copy.key, key="k", owner="alice", latest_session_id=exported.key.latest_session_id)
        == exported.key
    )
    for old, new in zip(exported.segments, copy.segments, strict=True):
        assert new.key == theirs
        assert new.parent_ids == tuple(renamed[p] for p in old.parent_ids)
        assert new.continues == tuple(renamed[c] for c in old.continues)
        assert (
            replace(
                new,
                session_id=old.session_id,
                key=old.key,
                parent_ids=old.parent_ids,
                continues=old.continues,
            )
            == old
        )
    assert copy.segments[2].continues == (new_ids[0], new_ids[1])
    assert copy.messages == [
        replace(m, session_id=renamed[m.session_id]) for m in exported.messages
    ]
    assert copy.rotations == [
        replace(
            r,
            key=theirs,
            from_session_id=renamed[r.from_session_id],
            to_session_id=renamed[r.to_session_id],
        )
        for r in exported.rotations
    ]
    # Returned as written: the store holds exactly that, and it works like the original.
    assert await store.export_chain(theirs) == copy
    theirs_latest = await store.latest_segment(theirs)
    assert theirs_latest.session_id == new_ids[-1]
    mine_latest = await store.latest_segment(K)
    assert [m.content for m in await store.thread_tail(theirs_latest, 10)] == [
        m.content for m in await store.thread_tail(mine_latest, 10)
    ]
    found = await store.recall(theirs, "otters", rationale="r")
    assert [(f.content, f.session_id) for f in found] == [("first otters", new_ids[0])]
    with pytest.raises(ImmutableSegment):
        await say(store, copy.segments[0], "late")
    assert (await say(store, theirs_latest, "bob's turn")).seq == 2
    # The original chain is untouched by all of it.
    assert await store.export_chain(K) == exported
    # And the copy is a key like any other: importing it again is refused.
    with pytest.raises(KeyExists):
        await store.import_chain(retarget(exported, theirs), ids.new)


async def test_import_is_all_or_nothing(store: Store, ids: IdGenerator) -> None:
    await build_chain(store, ids)
    exported = await store.export_chain(K)
    await store.delete_key(K)
    # A duplicate (segment, seq) in the last segment fails after everything before it.
    broken = replace(exported, messages=[*exported.messages, exported.messages[-1]])
    with pytest.raises(Conflict):
        await store.import_chain(broken, ids.new)
    assert await store.get_key(K) is None and await store.count_keys() == 0
    assert [await store.get_segment(s.session_id) for s in exported.segments] == [None, None]
    await store.import_chain(exported, ids.new)  # the intact file still imports
    assert await store.export_chain(K) == exported


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
