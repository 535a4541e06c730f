"""Hostile input: every case is a typed error and nothing is written."""

from __future__ import annotations

import pytest

from sessiongate.core.keys import KeyRef, validate_session_key
from sessiongate.errors import (
    ContentTooLarge,
    Forbidden,
    InvalidContent,
    InvalidInput,
    InvalidSessionId,
    InvalidSessionKey,
    NotFound,
    NothingToRevert,
    SegmentNotFound,
    SessionNotFound,
)
from sessiongate.service.engine import Engine
from sessiongate.service.sessions import Caller
from sessiongate.service.turn.pipeline import InboundTurn, RecallRequest
from sessiongate.store.sqlite.store import SQLiteStore
from tests.conftest import ALICE
from tests.support.helpers import collect

BOB = Caller("bob")


@pytest.mark.parametrize(
    "key",
    [
        "",
        "a" * 201,
        "has space",
        "slash/inside",
        "new\nline",
        "trailing\n",
        "émoji😀",
        "semi;colon",
        "quote'",
        "nul\x00",
        None,
        42,
        b"bytes",
    ],
)
def test_invalid_session_keys_are_rejected(key: object) -> None:
    with pytest.raises(InvalidSessionKey):
        validate_session_key(key)


@pytest.mark.parametrize(
    "key",
    ["a", "a" * 200, "agent:main:main", "mobile:codex:ipad-7", "chat:alice@example.org", "x.y_z-1"],
)
def test_valid_session_keys_pass(key: str) -> None:
    assert validate_session_key(key) == key


async def assert_nothing_written(engine: Engine) -> None:
    assert isinstance(engine.store, SQLiteStore)  # these tests run on SQLite
    db = engine.store.connection
    assert db.execute("SELECT COUNT(*) FROM session_keys").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("", InvalidContent),
        ("   \n\t", InvalidContent),
        ("x" * 100_001, ContentTooLarge),
        ("lone \ud800 surrogate", InvalidContent),
        ("nul \x00 byte", InvalidContent),
        (None, InvalidContent),
        (["list"], InvalidContent),
    ],
)
async def test_bad_content_is_a_typed_error_and_writes_nothing(
    engine: Engine, content: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        engine.turns.start_turn(InboundTurn("chat:alice", ALICE, content))  # type: ignore[arg-type]
    await assert_nothing_written(engine)


async def test_invalid_key_in_a_turn_writes_nothing(engine: Engine) -> None:
    with pytest.raises(InvalidSessionKey):
        engine.turns.start_turn(InboundTurn("bad key", ALICE, "hi"))
    await assert_nothing_written(engine)


async def test_unknown_agent_is_not_found(engine: Engine) -> None:
    with pytest.raises(NotFound) as info:
        engine.turns.start_turn(InboundTurn("chat:alice", ALICE, "hi", agent="nope"))
    assert info.value.code == "agent_not_found"
    await assert_nothing_written(engine)


@pytest.mark.parametrize(
    "recall",
    [
        RecallRequest("q", ""),
        RecallRequest("", "why"),
        RecallRequest("q", "why", limit=0),
        RecallRequest("q" * 2001, "why"),
        RecallRequest("q", "why", limit=51),
    ],
)
async def test_bad_recall_requests_are_rejected(engine: Engine, recall: RecallRequest) -> None:
    with pytest.raises(InvalidInput):
        engine.turns.start_turn(InboundTurn("chat:alice", ALICE, "hi", recall=recall))
    await assert_nothing_written(engine)


async def test_recall_query_without_words_is_rejected(engine: Engine) -> None:
    await collect(engine, "hello")
    with pytest.raises(InvalidInput):
        await engine.sessions.recall("chat:alice", ALICE, "!!! ???", "because")


async def test_unknown_and_foreign_keys_look_the_same(engine: Engine) -> None:
    await collect(engine, "alice's secret")
    attempts = [
        ("chat:alice", engine.sessions.show("chat:alice", BOB)),
        ("chat:nobody", engine.sessions.show("chat:nobody", BOB)),
        ("chat:alice", engine.sessions.revert("chat:alice", BOB)),
        ("chat:alice", engine.sessions.recall("chat:alice", BOB, "secret", "why")),
        ("chat:alice", engine.sessions.delete("chat:alice", BOB)),
    ]
    for key, op in attempts:
        with pytest.raises(SessionNotFound) as info:
            await op
        # Word for word what a key that never existed gets: nothing reveals the owner.
        assert info.value.message == f"no session with key {key!r}"
    # Bob's turn on that name lands in his own namespace; Alice's data is untouched.
    events = await collect(engine, "bob was here", caller=BOB)
    assert events[-1].type == "end"
    assert "secret" not in " ".join(str(e) for e in events)
    assert (await engine.sessions.show("chat:alice", ALICE)).latest.message_count == 2
    assert (await engine.sessions.show("chat:alice", BOB)).key.owner == "bob"


async def test_admin_reads_but_does_not_write_foreign_keys(engine: Engine) -> None:
    await collect(engine, "hello")
    admin = Caller("root", admin=True)
    assert (await engine.sessions.show("chat:alice", admin, owner="alice")).key.owner == "alice"
    # Without owner= the admin names a key of their own, which does not exist.
    with pytest.raises(SessionNotFound):
        await engine.sessions.show("chat:alice", admin)
    with pytest.raises(Forbidden) as refused:
        admin.key("chat:alice", owner="alice", write=True)
    assert refused.value.code == "admin_read_only"
    with pytest.raises(Forbidden) as refused:
        await engine.sessions.show("chat:alice", BOB, owner="alice")
    assert refused.value.code == "owner_not_allowed"
    with pytest.raises(SessionNotFound):
        await engine.sessions.revert("chat:alice", admin)


async def test_unknown_and_malformed_session_ids(engine: Engine) -> None:
    await collect(engine, "hello")
    with pytest.raises(InvalidSessionId):
        await engine.sessions.messages("chat:alice", ALICE, "not-a-uuid")
    with pytest.raises(SegmentNotFound):
        await engine.sessions.messages("chat:alice", ALICE, "01890000-0000-7000-8000-000000000000")
    latest = (await engine.sessions.show("chat:alice", ALICE)).latest.session_id
    with pytest.raises(InvalidInput):
        await engine.sessions.messages("chat:alice", ALICE, latest, limit=0)


async def test_revert_without_semantic_rotation_is_a_conflict(engine: Engine) -> None:
    await collect(engine, "hello")
    await collect(engine, "/new")
    with pytest.raises(NothingToRevert):
        await engine.sessions.revert("chat:alice", ALICE)
    assert len(await engine.store.chain(KeyRef("alice", "chat:alice"))) == 2
