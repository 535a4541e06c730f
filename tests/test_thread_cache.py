"""The in-memory thread cache: used only while the store agrees, never a stale context."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, MessageStatus, Role, Segment, SegmentStatus
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller
from sessiongate.service.thread_cache import ThreadCache
from tests.conftest import ALICE, make_settings
from tests.support.helpers import ScriptedModel, collect
from tests.support.pg import fresh_database

KEY = "chat:alice"
#: The cache, the store and NOTIFY address a key in its owner's namespace.
REF = KeyRef(ALICE.name, KEY)
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def segment(count: int, session_id: str = "s1", cleared: int = 0) -> Segment:
    return Segment(
        session_id=session_id,
        key=REF,
        status=SegmentStatus.LATEST,
        created_at=T0,
        archived_at=None,
        parent_ids=(),
        continues=(),
        cleared_after_seq=cleared,
        context_started_at=T0,
        message_count=count,
        last_activity_at=T0,
        created_reason=None,
    )


def message(seq: int, session_id: str = "s1") -> Message:
    return Message(session_id, seq, Role.USER, f"m{seq}", MessageStatus.COMPLETE, T0)


def test_serves_a_window_only_while_the_segment_matches() -> None:
    cache = ThreadCache()
    cache.put(REF, segment(3), 10, [message(1), message(2), message(3)])
    assert [m.seq for m in cache.get(REF, segment(3), 2) or []] == [2, 3]
    assert [m.seq for m in cache.get(REF, segment(3), 50) or []] == [1, 2, 3]  # whole thread
    assert cache.get(REF, segment(4), 10) is None  # someone else appended
    assert cache.get(REF, segment(3, session_id="s2"), 10) is None  # rotated
    assert cache.get(REF, segment(3, cleared=3), 10) is None  # cleared in place
    assert cache.get(KeyRef("alice", "chat:bob"), segment(3), 10) is None
    assert cache.get(KeyRef("bob", KEY), segment(3), 10) is None  # same name, another owner


def test_appends_extend_the_window_and_trim_to_capacity() -> None:
    cache = ThreadCache()
    cache.put(REF, segment(2), 2, [message(1), message(2)])  # exactly full: not whole
    cache.appended(REF, message(3))
    assert [m.seq for m in cache.get(REF, segment(3), 2) or []] == [2, 3]
    assert cache.get(REF, segment(3), 3) is None  # message 1 was trimmed away


def test_an_append_that_is_not_the_next_message_drops_the_entry() -> None:
    cache = ThreadCache()
    cache.put(REF, segment(2), 10, [message(1), message(2)])
    cache.appended(REF, message(4))  # seq 3 was written elsewhere
    assert len(cache) == 0
    cache.put(REF, segment(2), 10, [message(1), message(2)])
    cache.appended(REF, message(3, session_id="s9"))
    assert len(cache) == 0


def test_least_recently_used_keys_are_evicted() -> None:
    cache = ThreadCache(max_keys=2)
    a, b, c = (KeyRef("alice", name) for name in ("a", "b", "c"))
    for key in (a, b):
        cache.put(key, segment(1), 5, [message(1)])
    assert cache.get(a, segment(1), 5) is not None  # "a" is now the most recent
    cache.put(c, segment(1), 5, [message(1)])
    assert cache.get(b, segment(1), 5) is None
    assert cache.get(a, segment(1), 5) is not None


async def test_a_message_written_by_another_process_reaches_the_next_context(
    engine: Engine, scripted: ScriptedModel
) -> None:
    await collect(engine, "first question")
    latest = await engine.store.latest_segment(REF)
    # Another gateway process sharing the database appends behind this one's back.
    await engine.store.append_message(
        latest.session_id, role=Role.USER, content="written elsewhere", now=T0
    )
    await collect(engine, "second question")
    sent = [m["content"] for m in scripted.requests[-1]]
    assert sent[-3:] == ["reply to: first question", "written elsewhere", "second question"]


async def test_repeated_turns_read_the_window_from_the_cache(
    engine: Engine, scripted: ScriptedModel
) -> None:
    for n in range(4):
        await collect(engine, f"question {n}")
    cache = engine.sessions.threads
    assert cache.hits >= 3
    # The context the model saw equals the store's thread exactly.
    latest = await engine.store.latest_segment(REF)
    stored = [m.content for m in await engine.store.thread_tail(latest, 50)]
    assert [m["content"] for m in scripted.requests[-1]][-len(stored) + 1 :] == stored[:-1]


async def test_erasure_and_reimport_do_not_serve_the_old_content(
    engine: Engine, scripted: ScriptedModel
) -> None:
    await collect(engine, "original words")
    lines = list(await engine.sessions.export(KEY, ALICE))
    await engine.sessions.delete(KEY, ALICE)
    assert len(engine.sessions.threads) == 0
    # The same chain, its first message edited, comes back under the same session ids.
    edited = [line.replace("original words", "edited words") for line in lines]
    await engine.sessions.import_chain(edited, ALICE)
    await collect(engine, "next")
    sent = [m["content"] for m in scripted.requests[-1]]
    assert "edited words" in sent and "original words" not in sent


@pytest.mark.postgres
async def test_another_process_erasing_and_reimporting_reaches_this_cache(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Two engines on one PostgreSQL database, as two gateway processes: an erasure and an
    edited re-import in one must not leave the old words in the other's cached context."""
    async with fresh_database() as url:
        seen = ScriptedModel()
        here = build_engine(
            make_settings(tmp_path / "a", database_url=url), clock=clock, models={"scripted": seen}
        )
        there = build_engine(
            make_settings(tmp_path / "b", database_url=url),
            clock=clock,
            models={"scripted": ScriptedModel()},
        )
        await here.start()
        await there.start()
        try:
            await collect(here, "original words")
            assert len(here.sessions.threads) == 1
            lines = list(await there.sessions.export(KEY, ALICE))
            await there.sessions.delete(KEY, ALICE)
            edited = [line.replace("original words", "edited words") for line in lines]
            await there.sessions.import_chain(edited, ALICE)
            for _ in range(200):  # the notification arrives on commit, asynchronously
                if len(here.sessions.threads) == 0:
                    break
                await asyncio.sleep(0.01)
            assert len(here.sessions.threads) == 0
            await collect(here, "next")
            sent = [m["content"] for m in seen.requests[-1]]
            assert "edited words" in sent and "original words" not in sent
        finally:
            await here.aclose()
            await there.aclose()


@pytest.mark.postgres
async def test_a_dropped_listen_connection_clears_the_cache_and_listens_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    async with fresh_database() as url:
        engine = build_engine(
            make_settings(tmp_path, database_url=url),
            clock=clock,
            models={"scripted": ScriptedModel()},
        )
        await engine.start()
        try:
            await collect(engine, "remember me")
            assert len(engine.sessions.threads) == 1
            admin = await asyncpg.connect(url)
            try:
                # The server ends the listening session, as a restart or a network cut would.
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE query LIKE 'LISTEN%' AND datname = current_database()"
                )
            finally:
                await admin.close()
            events = engine.store._events  # type: ignore[attr-defined]
            for _ in range(300):
                if events.reconnects:
                    break
                await asyncio.sleep(0.01)
            assert events.reconnects == 1 and len(engine.sessions.threads) == 0
            # Listening again: an erasure elsewhere still reaches this process. Bob's key of
            # the same name is cached too: the news about alice's must not drop it.
            await collect(engine, "fill the cache again")
            await collect(engine, "bob's own words", caller=Caller("bob"))
            assert len(engine.sessions.threads) == 2
            other = await asyncpg.connect(url)
            try:
                # The payload is the key's stored form, `owner/name`.
                await other.execute(
                    "SELECT pg_notify('sessiongate_key_changed', $1)", REF.storage_id
                )
            finally:
                await other.close()
            for _ in range(200):
                if len(engine.sessions.threads) == 1:
                    break
                await asyncio.sleep(0.01)
            assert len(engine.sessions.threads) == 1
            assert list(engine.sessions.threads._entries) == [KeyRef("bob", KEY)]
        finally:
            await engine.aclose()
