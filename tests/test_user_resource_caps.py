"""Per-user resource caps on session keys and segments (`[limits] max_keys_per_user`,
`max_segments_per_key`), the paginated key listing (`GET /v1/sessions`: `limit`, `cursor`,
`next_cursor`) and the import body limit (`[limits] max_import_bytes`), on SQLite and
PostgreSQL: through the store port, the engine (two engines sharing one database, as two
gateway processes would), the HTTP API and `sessiongate serve`.

At a cap one more key or segment — a turn on a new key, a rotation (`/new`, idle, revert),
an import — is refused with 409 `key_limit_reached` / `segment_limit_reached`, a message
naming the limit, and nothing stored: not the key, not the segment, not the user's
message. 50 racers at a cap keep exactly the cap.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.key_pages import decode_cursor, encode_cursor, page_size
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role, RotationReason
from sessiongate.core.session_caps import KeyLimitReached, SegmentLimitReached, SessionCaps
from sessiongate.core.users import Caller
from sessiongate.errors import InvalidInput, SessionGateError
from sessiongate.service.engine import Engine, build_engine
from sessiongate.store.base import Store
from sessiongate.store.caps import count_keys_sql, count_segments_sql
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.sqlite.store import SQLiteStore
from tests.conftest import BACKENDS
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel, collect
from tests.support.served import relay_model, served_gateway

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ALICE = Caller("alice")
BOB = Caller("bob")
ADMIN = Caller("root", admin=True)
KEY_CAP = 10
SEGMENT_CAP = 5
RACERS = 50
MIB = 1_048_576


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # conftest.py runs only the modules it lists on both stores; this one always does.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture
async def store(tmp_path: Path, database_url: str) -> AsyncIterator[Store]:
    if not database_url:
        sqlite = SQLiteStore.open(tmp_path / "caps.db")
        yield sqlite
        await sqlite.close()
        return
    pg = PostgresStore(database_url, pool_size=4)
    await pg.start()
    yield pg
    await pg.close()


def capped_settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC", "idle_window": "1h"},
        agents={"defaults": {"model": "scripted"}},
        limits={"max_keys_per_user": KEY_CAP, "max_segments_per_key": SEGMENT_CAP},
    )


@pytest.fixture
async def engines(tmp_path: Path, database_url: str) -> AsyncIterator[list[Engine]]:
    """Two engines on one database: two gateway processes, as far as the store can tell
    (SQLite: two connections to one file; PostgreSQL: two pools)."""
    built: list[Engine] = []
    clock = ManualClock(START)
    try:
        for _ in range(2):
            engine = build_engine(
                capped_settings(tmp_path, database_url),
                clock=clock,
                models={"scripted": ScriptedModel()},
            )
            await engine.start()
            built.append(engine)
        yield built
    finally:
        for engine in built:
            await engine.aclose()


async def outcomes(calls: list[Awaitable[Any]]) -> tuple[int, list[tuple[str, int]]]:
    """How many calls succeeded, and the (code, status) of each refusal."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    refused = []
    for result in results:
        if isinstance(result, SessionGateError):
            refused.append((result.code, result.status))
        elif isinstance(result, BaseException):
            raise result
    return len(results) - len(refused), refused


def ids(n: int) -> list[str]:
    """`n` distinct time-sortable session ids (UUIDv7 form)."""
    return [f"01890000-0000-7000-8000-{index:012x}" for index in range(1, n + 1)]


# -- the store port ----------------------------------------------------------------------


async def test_the_store_refuses_one_key_too_many_and_writes_nothing(store: Store) -> None:
    fresh = iter(ids(20))
    for n in range(3):
        await store.create_key(KeyRef("alice", f"k{n}"), next(fresh), START, max_keys=3)
    with pytest.raises(KeyLimitReached) as refused:
        await store.create_key(KeyRef("alice", "k3"), next(fresh), START, max_keys=3)
    assert (refused.value.code, refused.value.status) == ("key_limit_reached", 409)
    assert "max_keys_per_user = 3" in refused.value.message
    assert await store.get_key(KeyRef("alice", "k3")) is None
    assert len(await store.list_keys("alice")) == 3
    # Another user is not affected, and an erased key frees its place.
    await store.create_key(KeyRef("bob", "k0"), next(fresh), START, max_keys=3)
    await store.delete_key(KeyRef("alice", "k0"))
    await store.create_key(KeyRef("alice", "k3"), next(fresh), START, max_keys=3)


async def test_the_store_refuses_one_segment_too_many_and_changes_nothing(store: Store) -> None:
    fresh = iter(ids(20))
    ref = KeyRef("alice", "k")
    _, latest = await store.create_key(ref, next(fresh), START)
    for _ in range(2):
        latest, _ = await store.rotate(
            ref,
            expected_latest=latest.session_id,
            new_session_id=next(fresh),
            reason=RotationReason.MANUAL,
            now=START,
            max_segments=3,
        )
    with pytest.raises(SegmentLimitReached) as refused:
        await store.rotate(
            ref,
            expected_latest=latest.session_id,
            new_session_id=next(fresh),
            reason=RotationReason.MANUAL,
            now=START,
            max_segments=3,
        )
    assert (refused.value.code, refused.value.status) == ("segment_limit_reached", 409)
    assert "max_segments_per_key = 3" in refused.value.message
    assert len(await store.chain(ref)) == 3
    assert (await store.latest_segment(ref)).session_id == latest.session_id
    assert len(await store.rotations(ref)) == 2
    # The latest segment still takes messages: only new segments are capped.
    await store.append_message(latest.session_id, role=Role.USER, content="still here", now=START)


async def test_an_import_past_the_key_cap_writes_nothing(store: Store) -> None:
    fresh = iter(ids(20))
    source = KeyRef("alice", "source")
    await store.create_key(source, next(fresh), START)
    exported = await store.export_chain(source)
    await store.delete_key(source)
    for n in range(2):
        await store.create_key(KeyRef("alice", f"k{n}"), next(fresh), START)
    with pytest.raises(KeyLimitReached):
        await store.import_chain(exported, lambda: next(fresh), max_keys=2)
    assert await store.get_key(source) is None
    assert await store.import_chain(exported, lambda: next(fresh), max_keys=3)


async def test_key_pages_resume_after_the_cursor_without_repeats_or_gaps(store: Store) -> None:
    fresh = iter(ids(100))
    owners = ("alice", "bob")
    for owner in owners:
        for n in range(0, 20, 2):  # even names now; odd ones appear while pages are read
            await store.create_key(KeyRef(owner, f"k{n:02d}"), next(fresh), START)
    before = {(k.owner, k.key) for k in await store.list_keys()}
    seen: list[tuple[str, str]] = []
    after: KeyRef | None = None
    created = 1
    while True:
        page = await store.list_keys(after=after, limit=3)
        if not page:
            break
        seen += [(k.owner, k.key) for k in page]
        after = KeyRef(page[-1].owner, page[-1].key)
        if created < 20:  # new keys land before, at and after the cursor
            for owner in owners:
                await store.create_key(KeyRef(owner, f"k{created:02d}"), next(fresh), START)
            created += 2
    assert len(seen) == len(set(seen)), "a key was listed twice"
    assert before <= set(seen), "a key that existed throughout was skipped"
    assert seen == sorted(seen)
    # One owner's pages, and a page that starts after the last key is empty.
    alice_keys = await store.list_keys("alice", limit=4)
    assert [k.owner for k in alice_keys] == ["alice"] * 4
    assert await store.list_keys("alice", after=KeyRef("alice", "zz")) == []


# -- the engine: turns, rotations, imports and races ---------------------------------------


async def test_a_turn_on_one_key_too_many_is_refused_and_stores_nothing(
    engines: list[Engine],
) -> None:
    engine = engines[0]
    for n in range(KEY_CAP):
        assert (await collect(engine, f"hello {n}", key=f"k{n}"))[-1].type == "end"
    events = await collect(engine, "one key too many", key="overflow")
    assert [e.type for e in events] == ["error"]
    assert (events[0].code, events[0].status) == ("key_limit_reached", 409)
    assert f"max_keys_per_user = {KEY_CAP}" in events[0].message
    assert await engine.store.get_key(KeyRef("alice", "overflow")) is None
    # Turns on existing keys go on; other users are not affected.
    assert (await collect(engine, "still fine", key="k0"))[-1].type == "end"
    assert (await collect(engine, "bob's own", key="overflow", caller=BOB))[-1].type == "end"


async def test_a_rotation_past_the_segment_cap_is_refused_and_the_message_not_stored(
    engines: list[Engine],
) -> None:
    engine = engines[0]
    sessions = engine.sessions
    for _ in range(SEGMENT_CAP):  # the first call creates the key
        await sessions.rotate_now("chat:alice", ALICE)
    await collect(engine, "in the last segment")
    latest = await sessions.latest("chat:alice", ALICE)
    count = latest.message_count
    with pytest.raises(SegmentLimitReached):
        await sessions.rotate_now("chat:alice", ALICE)
    # `/new` in a message, and an idle gap's rotation, are refused before the message.
    for content in ("/new start over", "after a long pause"):
        if content.startswith("after"):
            assert isinstance(sessions.clock, ManualClock)
            sessions.clock.advance(timedelta(hours=2))
        events = await collect(engine, content)
        assert [e.type for e in events] == ["error"], events
        assert events[0].code == "segment_limit_reached" and events[0].status == 409
        assert "max_segments_per_key" in events[0].message
    after = await sessions.latest("chat:alice", ALICE)
    assert (after.session_id, after.message_count) == (latest.session_id, count)
    assert len((await sessions.show("chat:alice", ALICE)).segments) == SEGMENT_CAP


async def test_fifty_racing_new_keys_and_rotations_keep_exactly_the_caps(
    engines: list[Engine],
) -> None:
    sessions = [e.sessions for e in engines]
    for n in range(KEY_CAP - 3):  # three places left
        await sessions[0].rotate_now(f"before{n}", ALICE)
    made, refused = await outcomes(
        [sessions[i % 2].rotate_now(f"racer{i}", ALICE) for i in range(RACERS)]
    )
    assert made == 3
    assert refused == [("key_limit_reached", 409)] * (RACERS - 3)
    assert len(await engines[1].store.list_keys("alice")) == KEY_CAP

    # One key (one segment so far), both engines rotating it: exactly the segment cap.
    made, refused = await outcomes(
        [sessions[i % 2].rotate_now("before0", ALICE) for i in range(RACERS)]
    )
    assert made == SEGMENT_CAP - 1
    assert refused == [("segment_limit_reached", 409)] * (RACERS - SEGMENT_CAP + 1)


async def test_an_import_is_held_to_both_caps(engines: list[Engine]) -> None:
    sessions = engines[0].sessions
    await collect(engines[0], "hello", key="source", caller=BOB)
    for _ in range(SEGMENT_CAP - 1):
        await sessions.rotate_now("source", BOB)
    lines = await sessions.export("source", BOB)
    # A chain with more segments than a key may hold is refused whole.
    tighter = engines[1].sessions
    tighter.caps = SessionCaps(KEY_CAP, SEGMENT_CAP - 1)
    with pytest.raises(SegmentLimitReached) as refused:
        await tighter.import_chain(lines, ALICE)
    assert f"the file holds {SEGMENT_CAP} segments" in refused.value.message
    assert await engines[0].store.get_key(KeyRef("alice", "source")) is None
    # At the key cap, an import is one key too many.
    for n in range(KEY_CAP):
        await sessions.rotate_now(f"k{n}", ALICE)
    with pytest.raises(KeyLimitReached):
        await sessions.import_chain(lines, ALICE)
    assert await engines[0].store.get_key(KeyRef("alice", "source")) is None
    await sessions.delete("k0", ALICE)
    assert (await sessions.import_chain(lines, ALICE)).key == "source"


async def test_the_listing_pages_through_the_service_and_checks_its_input(
    engines: list[Engine],
) -> None:
    sessions = engines[0].sessions
    for caller in (ALICE, BOB):
        for n in range(5):
            await sessions.rotate_now(f"k{n}", caller)
    first = await sessions.list_page(ALICE, limit=2)
    assert [k.key for k in first.keys] == ["k0", "k1"] and first.next_cursor
    second = await sessions.list_page(ALICE, cursor=first.next_cursor, limit=2)
    third = await sessions.list_page(ALICE, cursor=second.next_cursor, limit=2)
    assert [k.key for k in second.keys + third.keys] == ["k2", "k3", "k4"]
    assert third.next_cursor is None  # no empty page at the end
    everyone = await sessions.list_page(ADMIN, limit=1000)
    assert len(everyone.keys) == 10 and everyone.next_cursor is None
    bobs = [k async for k in sessions.every_key(ADMIN, owner="bob")]
    assert [(k.owner, k.key) for k in bobs] == [("bob", f"k{n}") for n in range(5)]

    bad: list[tuple[dict[str, Any], Caller, str]] = [
        ({"limit": 0}, ALICE, "invalid_limit"),
        ({"limit": "1001"}, ALICE, "invalid_limit"),
        ({"limit": "ten"}, ALICE, "invalid_limit"),
        ({"limit": "9" * 5000}, ALICE, "invalid_limit"),
        ({"cursor": "not a cursor"}, ALICE, "invalid_cursor"),
        ({"cursor": "eyJ2IjoxfQ"}, ALICE, "invalid_cursor"),  # {"v":1}
        # Bob's cursor, and an admin's all-owners cursor, are not alice's listing.
        ({"cursor": encode_cursor("bob", KeyRef("bob", "k1"))}, ALICE, "invalid_cursor"),
        (
            {"cursor": encode_cursor(None, KeyRef("alice", "k1")), "owner": "alice"},
            ADMIN,
            "invalid_cursor",
        ),
        ({"owner": "bob"}, ALICE, "owner_not_allowed"),
    ]
    for arguments, caller, code in bad:
        with pytest.raises(SessionGateError) as refused:
            await sessions.list_page(caller, **arguments)
        assert refused.value.code == code, arguments
        assert refused.value.status in (400, 403)


# -- pure rules --------------------------------------------------------------------------


def test_a_cursor_is_opaque_round_trips_and_refuses_tampering() -> None:
    last = KeyRef("alice", "chat:x@y.z-1")
    cursor = encode_cursor("alice", last)
    assert "alice" not in cursor and "/" not in cursor and "=" not in cursor
    assert decode_cursor(cursor, "alice") == last
    assert decode_cursor(encode_cursor(None, last), None) == last
    for tampered in (cursor[:-2], cursor + "!", "A" * 2000, encode_cursor(None, KeyRef("a", ""))):
        with pytest.raises(InvalidInput) as refused:
            decode_cursor(tampered, None)
        assert refused.value.code == "invalid_cursor"
    assert (page_size(None), page_size("1000"), page_size(" 7 ")) == (100, 1000, 7)


def test_the_caps_and_the_import_limit_are_validated_at_start_up() -> None:
    limits = Settings().limits
    assert (limits.max_keys_per_user, limits.max_segments_per_key) == (1000, 10_000)
    assert limits.max_import_bytes == 64 * MIB > limits.max_body_bytes
    for field in ("max_keys_per_user", "max_segments_per_key", "max_import_bytes"):
        with pytest.raises(ValueError, match=field):
            Settings(limits={field: 0})


async def test_the_counts_read_an_index_and_stop_at_the_cap(tmp_path: Path) -> None:
    """Cheap whatever a user holds: SQLite's plans search the indexes, never scan."""
    await (SQLiteStore.open(tmp_path / "plan.db")).close()  # the schema
    db = sqlite3.connect(tmp_path / "plan.db")
    try:
        for sql, index in (
            (count_keys_sql("?", "?"), "session_keys_by_owner"),
            (count_segments_sql("?", "?"), "segments_by_key"),
        ):
            plan = " ".join(str(r[-1]) for r in db.execute(f"EXPLAIN QUERY PLAN {sql}", ("a", 5)))
            assert index in plan and "SCAN session_keys" not in plan, plan
            assert "SCAN segments" not in plan, plan
    finally:
        db.close()


# -- the HTTP API (SQLite, in process) ----------------------------------------------------


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Any]:
    settings = gateway_settings(
        tmp_path,
        limits={
            "max_body_bytes": 65536,
            "max_content_chars": 20000,
            "max_keys_per_user": 4,
            "max_import_bytes": 256 * 1024,
        },
    )
    with running_gateway(settings, {"scripted": ScriptedModel()}) as running:
        yield running


def test_the_listing_pages_over_http(gw: Any) -> None:
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        for user in ("alice", "bob"):
            for n in range(3):
                answer = client.post(f"/v1/sessions/k{n}/new", headers=gw.auth(user))
                assert answer.status_code == 200, answer.text
        alice = gw.auth("alice")
        page = client.get("/v1/sessions", params={"limit": 2}, headers=alice).json()
        assert [s["key"] for s in page["sessions"]] == ["k0", "k1"]
        assert set(page["sessions"][0]) == {
            "key",
            "owner",
            "latest_session_id",
            "segment_count",
            "title",
            "message_count",
            "last_activity_at",
        }
        rest = client.get(
            "/v1/sessions", params={"limit": 2, "cursor": page["next_cursor"]}, headers=alice
        ).json()
        assert [s["key"] for s in rest["sessions"]] == ["k2"] and rest["next_cursor"] is None
        whole = client.get("/v1/sessions", headers=alice).json()
        assert len(whole["sessions"]) == 3 and whole["next_cursor"] is None
        # An admin pages through everyone's keys, or one user's.
        root = gw.auth("root")
        owners = client.get("/v1/sessions", params={"owner": "bob", "limit": 2}, headers=root)
        assert {s["owner"] for s in owners.json()["sessions"]} == {"bob"}
        assert owners.json()["next_cursor"]
        for params, headers, status, code in (
            ({"limit": "0"}, alice, 400, "invalid_limit"),
            ({"limit": "1001"}, alice, 400, "invalid_limit"),
            ({"cursor": "garbage!"}, alice, 400, "invalid_cursor"),
            ({"cursor": owners.json()["next_cursor"]}, root, 400, "invalid_cursor"),
            ({"owner": "bob"}, alice, 403, "owner_not_allowed"),
        ):
            answer = client.get("/v1/sessions", params=params, headers=headers)
            assert answer.status_code == status, (params, answer.text)
            assert answer.json()["error"]["code"] == code


def test_the_key_cap_over_http_is_a_409_naming_the_limit(gw: Any) -> None:
    alice = gw.auth("alice")
    with httpx.Client(base_url=gw.url, headers=alice, timeout=30) as client:
        for n in range(4):
            answer = client.post(f"/v1/sessions/k{n}/messages", json={"content": "hi"})
            assert answer.status_code == 200, answer.text
        for stream in (False, True):
            answer = client.post(
                "/v1/sessions/k4/messages", json={"content": "one too many", "stream": stream}
            )
            assert answer.status_code == 409, answer.text
            error = answer.json()["error"]
            assert error["code"] == "key_limit_reached"
            assert "max_keys_per_user = 4" in error["message"]
        assert client.post("/v1/sessions/k4/new").status_code == 409
        assert client.post("/v1/chat", json={"content": "routed"}).status_code == 409
        assert client.get("/v1/sessions/k4").status_code == 404


def test_an_import_over_max_import_bytes_gets_413_announced_or_streamed(gw: Any) -> None:
    alice = gw.auth("alice")
    with httpx.Client(base_url=gw.url, headers=alice, timeout=30) as client:
        client.post("/v1/sessions/small/messages", json={"content": "hello"})
        exported = client.get("/v1/sessions/small/export").content
        # Bigger than max_body_bytes (64 KiB here) yet within max_import_bytes: imported.
        padded = exported + b"\n" * (200 * 1024)
        answer = client.post("/v1/import", params={"key": "copy"}, content=padded)
        assert answer.status_code == 201, answer.text
        too_big = exported + b"\n" * (300 * 1024)

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(too_big), 16384):
                yield too_big[start : start + 16384]

        for body in (too_big, chunks()):  # Content-Length, then chunked
            answer = client.post("/v1/import", params={"key": "big"}, content=body)
            assert answer.status_code == 413, answer.text
            error = answer.json()["error"]
            assert error["code"] == "payload_too_large"
            assert "max_import_bytes" in error["message"]
        assert client.get("/v1/sessions/big").status_code == 404
        # The connection served on after the refusal.
        assert client.get("/v1/sessions").status_code == 200


# -- `sessiongate serve` ------------------------------------------------------------------


def test_served_gateway_round_trips_an_export_over_1_mib_and_holds_the_caps(
    tmp_path: Path, database_url: str
) -> None:
    database = f'[database]\nurl = "{database_url}"\n' if database_url else ""
    config = (
        relay_model(tmp_path, "relay")
        + '[agents.defaults]\nmodel = "relay"\n'
        + database
        + "[limits]\nmax_keys_per_user = 3\nmax_segments_per_key = 3\n"
        + f"max_import_bytes = {4 * MIB}\n"
    )
    with served_gateway(tmp_path, config, {"alice": (), "root": ("--admin",)}) as served:
        with served.client("alice", timeout=60) as client:
            word = "conversation "
            for n in range(6):  # each turn: ~100k chars in, the relay's echo of them out
                content = f"turn {n} " + word * 7600
                answer = client.post(
                    "/v1/sessions/big/messages", json={"content": content, "stream": False}
                )
                assert answer.status_code == 200, answer.text
            exported = client.get("/v1/sessions/big/export").content
            assert len(exported) > MIB  # over max_body_bytes, which used to apply here
            assert client.delete("/v1/sessions/big").status_code == 204
            imported = client.post("/v1/import", content=exported)
            assert imported.status_code == 201, imported.text
            assert client.get("/v1/sessions/big/export").content == exported
            oversized = exported * 4  # over max_import_bytes
            refused = client.post("/v1/import", params={"key": "copy"}, content=oversized)
            assert refused.status_code == 413
            assert refused.json()["error"]["code"] == "payload_too_large"

            # The segment cap: `big` has one segment; two rotations fill it.
            for _ in range(2):
                assert client.post("/v1/sessions/big/new").status_code == 200
            before = client.get("/v1/sessions/big").json()
            answer = client.post(
                "/v1/sessions/big/messages", json={"content": "/new again", "stream": False}
            )
            assert answer.status_code == 409
            assert answer.json()["error"]["code"] == "segment_limit_reached"
            assert client.get("/v1/sessions/big").json() == before

            # The key cap: `big` and two more; the fourth key is refused.
            for key in ("second", "third"):
                assert client.post(f"/v1/sessions/{key}/new").status_code == 200
            answer = client.post(
                "/v1/sessions/fourth/messages", json={"content": "hi", "stream": False}
            )
            assert answer.status_code == 409
            assert answer.json()["error"]["code"] == "key_limit_reached"
            assert "max_keys_per_user = 3" in answer.json()["error"]["message"]
            assert client.post("/v1/import", params={"key": "fourth"}, content=exported).json()[
                "error"
            ]["code"] == ("key_limit_reached")

            # The listing, a page at a time, holds exactly the three keys.
            seen: list[str] = []
            cursor = None
            while True:
                params: dict[str, Any] = {"limit": 1}
                if cursor:
                    params["cursor"] = cursor
                page = client.get("/v1/sessions", params=params).json()
                seen += [s["key"] for s in page["sessions"]]
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            assert seen == ["big", "second", "third"]
        listed = served.cli("sessions", "list")
        assert listed.returncode == 0, listed.stderr
        assert all(key in listed.stdout for key in ("big", "second", "third"))
