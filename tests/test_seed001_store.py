"""Seed 001's endpoint rows (store/*_endpoints.py, service/seed_endpoints.py) on both
stores: the same answers from SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.service.engine import Engine
from sessiongate.service.seed_endpoints import WrongEndpoint, build_seed_endpoints
from sessiongate.service.sessions import Caller
from tests.support.helpers import collect

BOTH = pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)


def alice(name: str) -> KeyRef:
    return KeyRef("alice", name)


@BOTH
async def test_a_key_belongs_to_the_endpoint_of_its_first_message(
    engine: Engine, clock: ManualClock
) -> None:
    seed = build_seed_endpoints(engine.store, clock)
    await collect(engine, "hi", key="jarvis", metadata={"transport": "claude"})
    await collect(engine, "hi", key="codex-k", metadata={"transport": "codex"})
    await collect(engine, "hi", key="rest-k")
    await collect(engine, "hi", key="v1-k", metadata={"transport": "v1"})
    # Later turns, a rotation and another transport change nothing: the first message rules.
    await collect(engine, "/new again", key="jarvis", metadata={"transport": "codex"})
    await collect(engine, "and more", key="rest-k", metadata={"transport": "claude"})

    rows = seed.rows
    assert await rows.created_through(alice("jarvis")) == "claude"
    assert await rows.created_through(alice("codex-k")) == "codex"
    assert await rows.created_through(alice("rest-k")) == ""
    assert await rows.created_through(alice("v1-k")) == "v1"
    assert await rows.created_through(alice("missing")) is None
    assert await rows.created_through(KeyRef("bob", "jarvis")) is None
    assert await rows.count_created_through() == {"claude": 1, "codex": 1}

    with pytest.raises(WrongEndpoint) as refused:
        await seed.check(alice("jarvis"), "codex")
    assert refused.value.code == "wrong_endpoint" and "/api/claude/ws" in refused.value.message
    with pytest.raises(WrongEndpoint):
        await seed.check(alice("codex-k"), "claude")
    assert await seed.check(alice("jarvis"), "claude") is True  # settled
    assert await seed.check(alice("rest-k"), "codex") is True  # open to both, settled
    assert await seed.check(alice("v1-k"), "claude") is True
    assert await seed.check(alice("fresh"), "codex") is False  # its first turn decides
    assert await seed.check(alice("jarvis"), "v1") is True  # not a seed endpoint
    counts = await seed.counts()
    assert counts == {"claude": 1, "codex": 1, "total": 4}


@BOTH
async def test_the_last_key_per_user_and_endpoint(engine: Engine, clock: ManualClock) -> None:
    seed = build_seed_endpoints(engine.store, clock)
    rows = seed.rows
    for key in ("one", "two", "three"):
        await collect(engine, "hi", key=key)
    now = clock.now()
    assert await rows.last_key("alice", "claude") is None
    await rows.record_last_key(alice("one"), "claude", now)
    assert await rows.last_key("alice", "claude") == "one"
    # An older record (a slower writer) never wins over a newer one.
    await rows.record_last_key(alice("two"), "claude", now - timedelta(seconds=1))
    assert await rows.last_key("alice", "claude") == "one"
    await rows.record_last_key(alice("two"), "claude", now + timedelta(seconds=1))
    assert await rows.last_key("alice", "claude") == "two"
    # A key that does not exist (erased meanwhile) is not recorded.
    await rows.record_last_key(alice("gone"), "claude", now + timedelta(seconds=2))
    assert await rows.last_key("alice", "claude") == "two"
    await rows.record_last_key(alice("three"), "codex", now)
    assert await rows.last_key("alice", "codex") == "three"
    assert await rows.last_key("bob", "claude") is None
    # Erased through the service: the hook forgets it.
    engine.sessions.on_erase(seed.forget)
    await engine.sessions.delete("two", engine_caller())
    assert await rows.last_key("alice", "claude") is None
    # Erased behind the service's back: the lookup skips it all the same.
    await engine.store.delete_key(alice("three"))
    assert await rows.last_key("alice", "codex") is None


def engine_caller() -> Caller:
    return Caller("alice")
